"""Anchors: per-catalog rules ``pattern -> tool, boost`` (``sql/anchors.sql``, migration 0008).

route() adds the boosts of the rules whose pattern matches the request (Postgres regular expressions, ``~*``:
case-insensitive) to the tools' fused scores, inside the route statement (``sql/route.sql``, ``anchored``). A rule
goes with its tool when the tool is removed (the table's foreign key cascades).

Every write is all or nothing, under the catalog's lock like the other writes, and checks each rule before anything
is written, naming the bad one: a known tool, a finite boost from -:data:`MAX_BOOST` to :data:`MAX_BOOST` (not 0),
a pattern of at most :data:`MAX_PATTERN_CHARS` characters that Postgres compiles, that does not match the empty
string (it would match every request), without back-references, and that matches adversarial requests of the
longest length route() accepts within :data:`TRIAL_MS` milliseconds, or :data:`TRIAL_FACTOR` times a plain word's
match on a busy server (under a statement timeout, and timed: some of the engine's slow paths never look at the
timeout), at one of :data:`TRIAL_TRIES` tries (a burst of other work slows one). Postgres' regular expression
engine runs nested quantifiers such as ``(a+)+$`` in linear time; back-references are where it can take exponential time
(``(.*)*\\1$`` runs for seconds on a 20,000-character request), and huge nested bounded repetitions are slow or
fail too (``(a{1,200}){1,200}b``): the first are refused outright, the trial match catches the rest.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import psycopg
from psycopg import errors
from psycopg.rows import dict_row

from ._catalog_row import lock_catalog
from ._connect import retry_conflicts
from ._errors import InvalidInputError
from ._input import (
    MAX_ANCHORS,
    MAX_BOOST,
    MAX_ID_CHARS,
    MAX_PATTERN_CHARS,
    MAX_QUERY_CHARS,
    check_text,
    flag,
    listed,
    read_json,
)
from ._models import Anchor, CatalogInfo
from ._rows import CREATE_IT
from ._sql import query
from ._textfile import path_name, read_text_file

#: The trial match of a new pattern against adversarial requests of MAX_QUERY_CHARS characters must end within this,
#: or within TRIAL_FACTOR times a plain word's trial on the same requests, run just before (at most TRIAL_MAX_MS): on
#: a busy server every match slows alike, and a pattern Postgres runs in linear time must not be refused for it.
TRIAL_MS = 100
TRIAL_FACTOR = 20
TRIAL_MAX_MS = 2000
#: Tries of a trial match (each after its reference) that must all be slow for a pattern to be refused.
TRIAL_TRIES = 3
#: The plain word of that reference trial: a literal, matched in linear time.
REFERENCE_PATTERN = "toolstore"
_FIELDS = {"pattern", "tool", "boost", "id"}


def _backreference(pattern: str) -> bool:
    """Whether ``pattern`` holds a back-reference (``\\1`` ... ``\\9``)."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] in "123456789":
                return True
            i += 2
        else:
            i += 1
    return False


def check_anchor(anchor: object, what: str = "anchor") -> Anchor:
    """The checks that need no database; InvalidInputError naming ``what`` and the bad field."""
    if not isinstance(anchor, Anchor):
        raise InvalidInputError(f"{what} must be an Anchor, got {type(anchor).__name__}")
    pattern = check_text(anchor.pattern, f"{what} pattern", max_chars=MAX_PATTERN_CHARS)
    if _backreference(pattern):
        raise InvalidInputError(
            f"{what} pattern {pattern!r} uses a back-reference (\\1 ... \\9): refused, matching one can take "
            "exponential time"
        )
    tool = check_text(anchor.tool, f"{what} tool", max_chars=MAX_ID_CHARS)
    boost = anchor.boost
    if (
        isinstance(boost, bool)
        or not isinstance(boost, (int, float))
        or not -MAX_BOOST <= boost <= MAX_BOOST  # exact for any int (math.isfinite overflows), false for NaN
        or boost == 0
    ):
        raise InvalidInputError(
            f"{what} boost must be a non-zero number from {-MAX_BOOST:g} to {MAX_BOOST:g}, got {boost!r}"
        )
    return Anchor(pattern=pattern, tool=tool, boost=float(boost))


def adversarial_requests(pattern: str) -> list[str]:
    """Requests of MAX_QUERY_CHARS characters that make a slow pattern slow: one letter, letters and spaces, and the
    pattern's own letters, each repeated and ending in a character that fails the match late."""
    own = "".join(dict.fromkeys(c for c in pattern if c.isalnum())) or "a"
    n = MAX_QUERY_CHARS - 1
    return [("a" * n) + "!", ("a " * n)[:n] + "!", (own * n)[:n] + "\x01"]


def _trial_budget_ms(conn: psycopg.Connection[Any], inputs: list[str]) -> int:
    """How long a pattern's trial match on ``inputs`` may take: :data:`TRIAL_MS`, or :data:`TRIAL_FACTOR` times what
    :data:`REFERENCE_PATTERN`'s takes now when that is more (a busy server), at most :data:`TRIAL_MAX_MS`."""
    started = time.perf_counter()
    conn.execute(query("anchor_trial"), {"pattern": REFERENCE_PATTERN, "inputs": inputs}).fetchone()
    reference_ms = (time.perf_counter() - started) * 1000
    return min(TRIAL_MAX_MS, max(TRIAL_MS, math.ceil(TRIAL_FACTOR * reference_ms)))


def _check_pattern(conn: psycopg.Connection[Any], anchor: Anchor, what: str) -> None:
    """Compile ``anchor``'s pattern in Postgres and run the trial match (inside the caller's transaction), a slow one
    again up to :data:`TRIAL_TRIES` times in all, each after its reference: a plain pattern's trial slowed by a burst
    of other work (writers of a storm beside it) is not refused, a pathological one is slow at every try."""
    inputs = adversarial_requests(anchor.pattern)
    for attempt in range(TRIAL_TRIES):
        budget_ms = _trial_budget_ms(conn, inputs)
        matches_empty = _trial(conn, anchor, what, inputs, budget_ms)
        if matches_empty is not None:
            break
        if attempt == TRIAL_TRIES - 1:
            raise InvalidInputError(
                f"{what} pattern {anchor.pattern!r} is pathological: matching a {MAX_QUERY_CHARS:,}-character request "
                f"took over {budget_ms} ms"
            )
    if matches_empty:
        raise InvalidInputError(
            f"{what} pattern {anchor.pattern!r} matches the empty string, so every request: make the tool always-on "
            "instead"
        )


def _trial(conn: psycopg.Connection[Any], anchor: Anchor, what: str, inputs: list[str], budget_ms: int) -> bool | None:
    """One trial match of ``anchor``'s pattern on ``inputs`` within ``budget_ms``: whether it matches the empty string,
    or None when it took longer (cancelled, or timed: some of the engine's slow paths do not look at the timeout)."""
    try:
        with conn.transaction():  # a savepoint: a refused pattern leaves the transaction usable for the error
            (previous, _) = conn.execute(query("statement_timeout"), {"value": f"{budget_ms}ms"}).fetchone()  # type: ignore[misc]
            started = time.perf_counter()
            row = conn.execute(query("anchor_trial"), {"pattern": anchor.pattern, "inputs": inputs}).fetchone()
            elapsed = time.perf_counter() - started
            conn.execute(query("statement_timeout"), {"value": previous})
    except errors.QueryCanceled:
        return None
    except (psycopg.DataError, errors.ProgramLimitExceeded, errors.InternalError_) as exc:
        problem = (exc.diag.message_primary or str(exc)).removeprefix("invalid regular expression: ")
        raise InvalidInputError(
            f"{what} pattern {anchor.pattern!r} is not a regular expression Postgres accepts: {problem}"
        ) from None
    if elapsed > budget_ms / 1000:
        return None
    assert row is not None
    return bool(row[0])


def add_anchors(
    conn: psycopg.Connection[Any], catalog: str, anchors: Iterable[Anchor], *, replace: bool = False
) -> tuple[list[Anchor], int]:
    """Add (or, for an existing tool and pattern, re-boost) ``anchors``; ``replace``: the catalog's anchors become
    exactly these. A tool and pattern given twice is one rule, with the later boost (as a later add would leave it).
    All or nothing. Returns the written anchors with their ids, and how many of the catalog's anchors the write
    removed (``replace``; a rule written again not counted), as its DELETE found them under the catalog's lock."""
    given = [check_anchor(a, f"anchor #{i + 1}") for i, a in enumerate(anchors)]
    if len(given) > MAX_ANCHORS:
        raise InvalidInputError(f"{len(given):,} anchors given; a catalog holds at most {MAX_ANCHORS:,}")
    numbered = {(a.pattern, a.tool): (i, a) for i, a in enumerate(given)}  # one insert may not touch a row twice
    checked = [a for _, a in numbered.values()]

    def write() -> tuple[list[Anchor], int]:
        with conn.transaction():
            info = lock_catalog(conn, catalog, hint=CREATE_IT)
            ids = sorted({a.tool for a in checked})
            pks = dict(conn.execute(query("anchor_tool_pks"), {"catalog": info.id, "ids": ids}).fetchall())
            unknown = [i for i in ids if i not in pks]
            if unknown:
                raise InvalidInputError(
                    f"anchors name tools that are not in catalog {catalog!r}: {', '.join(map(repr, unknown[:10]))}"
                )
            for i, anchor in numbered.values():
                _check_pattern(conn, anchor, f"anchor #{i + 1}")
            cleared = set(conn.execute(query("clear_anchors"), {"catalog": info.id}).fetchall()) if replace else set()
            params = {
                "catalog": info.id,
                "tool_pks": [pks[a.tool] for a in checked],
                "patterns": [a.pattern for a in checked],
                "boosts": [a.boost for a in checked],
            }
            written = [r[0] for r in conn.execute(query("insert_anchors"), params).fetchall()]
            (count,) = conn.execute(query("count_anchors"), {"catalog": info.id}).fetchone()  # type: ignore[misc]
            if count > MAX_ANCHORS:
                raise InvalidInputError(f"catalog {catalog!r} would hold {count:,} anchors; at most {MAX_ANCHORS:,}")
            removed = cleared - {(pks[a.tool], a.pattern) for a in checked}
            return _read(conn, info, written), len(removed)

    if not checked and not replace:
        return [], 0
    return retry_conflicts(write)


def _read(conn: psycopg.Connection[Any], info: CatalogInfo, ids: Sequence[int] | None) -> list[Anchor]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("list_anchors"), {"catalog": info.id, "ids": ids}).fetchall()
    return [anchor_from_row(r) for r in rows]


def anchor_from_row(row: Mapping[str, Any]) -> Anchor:
    return Anchor(pattern=row["pattern"], tool=row["tool"], boost=row["boost"], id=row["id"])


def remove_anchors(conn: psycopg.Connection[Any], catalog: str, ids: Iterable[int]) -> int:
    """Remove the anchors with these ids; InvalidInputError (nothing removed) when one is not in the catalog."""
    wanted = list(ids)
    for i in wanted:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 < i < 2**63:
            raise InvalidInputError(f"an anchor id must be an integer from 1 to {2**63 - 1} (a bigint), got {i!r}")

    def write() -> int:
        with conn.transaction():
            info = lock_catalog(conn, catalog)
            gone = {r[0] for r in conn.execute(query("remove_anchors"), {"catalog": info.id, "ids": wanted})}
            missing = sorted(set(wanted) - gone)
            if missing:
                raise InvalidInputError(f"no anchor with id {', '.join(map(str, missing))} in catalog {catalog!r}")
            return len(gone)

    return retry_conflicts(write)


def load_anchors(path: str | os.PathLike[str]) -> list[Anchor]:
    """Anchors from a JSON file: a list of ``{"pattern", "tool", "boost"?}`` objects, or an object holding one under
    ``"anchors"`` (what ``toolstore anchors list --json`` prints). InvalidInputError names the file and the rule."""
    name = path_name(path, "anchors file")
    data = read_json(read_text_file(path, "anchors file"), name)
    if isinstance(data, Mapping) and "anchors" in data:
        data = data["anchors"]
    if not isinstance(data, list):
        raise InvalidInputError(f'{name}: expected a list of anchors or an object with "anchors"')
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"{name}: anchor #{i + 1} must be an object, got {type(item).__name__}")
        unknown = sorted(set(item) - _FIELDS)
        if unknown or "pattern" not in item or "tool" not in item:
            problem = f"unknown field(s) {', '.join(unknown)}" if unknown else 'needs "pattern" and "tool"'
            raise InvalidInputError(f"{name}: anchor #{i + 1}: {problem}")
        anchor = Anchor(pattern=item["pattern"], tool=item["tool"], boost=item.get("boost", 1.0))
        out.append(check_anchor(anchor, f"{name}: anchor #{i + 1}"))
    return out


class AnchorMethods:
    """The anchor writes of ``ToolStore`` (a mixin: the store supplies ``catalog`` and ``_run``; ``anchors()``, a
    read, is in ``_reads``)."""

    catalog: str
    _run: Callable[[Callable[[psycopg.Connection[Any]], Any]], Any]

    def add_anchors(self, anchors: Iterable[Anchor] | str | os.PathLike[str], *, replace: bool = False) -> list[Anchor]:
        """Add routing rules (or a JSON file of them, :func:`load_anchors`), re-boosting an existing (pattern, tool)
        (given twice, the later boost wins); ``replace``: they become the catalog's only anchors. All or nothing.
        Returns them with their ids."""
        return self._add_anchors(anchors, replace=flag(replace, "replace"))[0]

    def replace_anchors(self, anchors: Iterable[Anchor] | str | os.PathLike[str]) -> tuple[list[Anchor], int]:
        """``add_anchors(anchors, replace=True)``, and how many of the catalog's anchors went (a rule given again is not
        counted), as the write itself removed them (an anchor another writer added just before is counted)."""
        return self._add_anchors(anchors, replace=True)

    def _add_anchors(
        self, anchors: Iterable[Anchor] | str | os.PathLike[str], *, replace: bool
    ) -> tuple[list[Anchor], int]:
        rules = load_anchors(anchors) if isinstance(anchors, (str, os.PathLike)) else listed(anchors, "anchors")
        result: tuple[list[Anchor], int] = self._run(
            lambda conn: add_anchors(conn, self.catalog, rules, replace=replace)
        )
        return result

    def remove_anchors(self, ids: Iterable[int]) -> int:
        """Remove anchors by id (all or nothing: InvalidInputError when one is unknown); returns how many."""
        wanted = listed(ids, "anchor ids")
        removed: int = self._run(lambda conn: remove_anchors(conn, self.catalog, wanted))
        return removed


class AsyncAnchorMethods:
    """The anchor writes of ``AsyncToolStore`` (a mixin: the store supplies ``_write(method, *args, **kwargs)``, which
    runs ToolStore's method of that name in its writer thread); each as :class:`AnchorMethods`'."""

    _write: Callable[..., Awaitable[Any]]

    async def add_anchors(
        self, anchors: Iterable[Anchor] | str | os.PathLike[str], *, replace: bool = False
    ) -> list[Anchor]:
        return cast("list[Anchor]", await self._write("add_anchors", anchors, replace=replace))

    async def replace_anchors(self, anchors: Iterable[Anchor] | str | os.PathLike[str]) -> tuple[list[Anchor], int]:
        return cast("tuple[list[Anchor], int]", await self._write("replace_anchors", anchors))

    async def remove_anchors(self, ids: Iterable[int]) -> int:
        return cast("int", await self._write("remove_anchors", listed(ids, "anchor ids")))
