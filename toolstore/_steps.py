"""route() as steps: the route path written once, which the sync and the async store both drive.

A step generator does no I/O. It yields what it needs from outside -- the catalog's row (:data:`CATALOG`), the rows
of a named SQL block (:class:`Fetch`) or a query vector (:class:`Embed`) -- and is sent the answer, or has the
driver's exception thrown in at that point; it returns the result. ``_drive``'s :func:`drive` and :func:`adrive` run a
generator with a function that answers one step (:func:`answer_sync` / :func:`answer_async`, which ``ToolStore`` and
``AsyncToolStore`` make on their own connection, with :func:`fetch_rows` / :func:`afetch_rows` for SQL) and hold no
logic of route() themselves.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg.rows import dict_row

from ._catalog_cache import CatalogCache
from ._embedders.base import Embedder
from ._errors import InvalidInputError, StatementTimeoutError, UnknownToolError, first_line
from ._explain import statement_fusion
from ._filters import unmatched_filter
from ._models import CatalogInfo
from ._names import call_keys, may_be_hashed, resolve_calls, unanswered
from ._observe import RouteTrace, logger
from ._request import RouteCall, RouteRequest
from ._rerank import Reranker, check_scores, pool_positions, reorder, rerank_failed, rerank_summary
from ._result import RoutedTool, RouteResult
from ._route import (
    bind_route,
    context_texts,
    context_vector,
    embedder_failed,
    statement_params,
    with_calls,
)
from ._routed import fused_candidates, route_result
from ._rows import name_row
from ._setup import local_session, local_session_async, pooled
from ._sql import query, raw_query
from ._vectors import QueryVectors

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """Run SQL block ``block`` (``sql/*.sql``) with ``params``; answer: its rows as dicts."""

    block: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Embed:
    """The store's embedder's vectors of ``texts``, in order (through the in-process cache and the circuit breaker;
    the texts not cached are embedded in one call, ``Embedder.embed_queries``)."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Rerank:
    """The reranker's scores for ``candidates`` (``reranker(query, candidates)``), unchecked."""

    reranker: Reranker
    query: str
    candidates: list[RoutedTool]


def rerank_sync(step: Rerank) -> Any:
    """The synchronous answer to a :class:`Rerank`: the reranker's return value."""
    return step.reranker(step.query, step.candidates)


async def rerank_async(step: Rerank) -> Any:
    """:func:`rerank_sync` on asyncio: a coroutine function is awaited, a plain function runs in a worker thread
    (a reranker is usually a model or a remote call: it must not block the event loop); an awaitable it returns
    (an object with an async ``__call__``) is awaited."""
    if inspect.iscoroutinefunction(step.reranker):
        return await step.reranker(step.query, step.candidates)
    value = await asyncio.to_thread(step.reranker, step.query, step.candidates)
    return await value if inspect.isawaitable(value) else value


class _Catalog:
    """Read the store's catalog row; answer: its :class:`CatalogInfo`."""


CATALOG = _Catalog()
Step = Fetch | Embed | Rerank | _Catalog
Steps = Generator[Step, Any, T]


#: A route's statements run without a cap unless the store is given one: the cap rides in a pipeline with each
#: statement, which costs 0.43-0.53 ms a route (7-8% of a 2,000-tool route here), and only a store whose catalogs are
#: written by others (tenants: a thousand anchors' patterns can make a route slow) needs it.
DEFAULT_STATEMENT_TIMEOUT: float | None = None
#: The longest ``statement_timeout`` accepted, in seconds (a day).
MAX_STATEMENT_TIMEOUT = 86_400
#: Blocks prepared on a connection at their first run, not psycopg's sixth (``prepare_threshold`` 5): each of the five
#: runs before parsed and planned the route statement again, about 4 ms at 10k tools, so a new connection's first routes
#: were the slowest (bench/PROFILE.md, issue 15). Not where it never prepares (threshold None: ``_setup``'s pooler).
PREPARED_BLOCKS = frozenset({"route"})


def statement_timeout_ms(seconds: float | None) -> int:
    """A store's ``statement_timeout`` (seconds, or None for no limit) in milliseconds, 0 for none; InvalidInputError
    for anything but a positive number of seconds up to :data:`MAX_STATEMENT_TIMEOUT` or None."""
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_STATEMENT_TIMEOUT:
        raise InvalidInputError(
            f"statement_timeout must be a positive number of seconds up to {MAX_STATEMENT_TIMEOUT:,}, or None (no "
            f"limit), got {seconds!r}"
        )
    if not psycopg.Pipeline.is_supported():  # the cap rides in the statement's round trip: libpq's pipeline mode
        logger.warning("statement_timeout needs libpq 14 or later (psycopg[binary] ships one): routes are not capped")
        return 0
    return max(1, round(seconds * 1000))


def _prepare(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], step: Fetch) -> bool | None:
    """psycopg's ``prepare``: True for :data:`PREPARED_BLOCKS` where ``conn`` prepares at all, else None."""
    return True if step.block in PREPARED_BLOCKS and conn.prepare_threshold is not None else None


def fetch_rows(conn: psycopg.Connection[Any], step: Fetch, timeout_ms: int = 0) -> list[dict[str, Any]]:
    """The synchronous answer to a :class:`Fetch` on ``conn``: the block with its placeholders numbered once
    (``raw_query``), on a raw cursor; with ``timeout_ms``, cancelled past that many milliseconds
    (:func:`statement_timeout_ms`), the cap set in the same round trip (:class:`StatementTimeoutError`)."""
    text, names = raw_query(step.block)
    args, prepare = [step.params[name] for name in names], _prepare(conn, step)
    if not timeout_ms and not pooled(conn):
        with psycopg.RawCursor(conn, row_factory=dict_row) as cur:
            return cur.execute(text, args, prepare=prepare).fetchall()
    started = time.monotonic()
    try:  # behind a transaction pooler, the session's parameters ride in the pipeline too
        with conn.pipeline(), psycopg.RawCursor(conn, row_factory=dict_row) as cur:
            local_session(conn)
            if timeout_ms:
                conn.execute(query("statement_timeout"), {"value": f"{timeout_ms}ms"})
            return cur.execute(text, args, prepare=prepare).fetchall()
    except psycopg.errors.QueryCanceled as exc:
        if not timeout_ms or not _ran_past(started, timeout_ms):  # someone cancelled it: a DatabaseError
            raise
        raise _timed_out(step, timeout_ms, exc) from exc


async def afetch_rows(conn: psycopg.AsyncConnection[Any], step: Fetch, timeout_ms: int = 0) -> list[dict[str, Any]]:
    """:func:`fetch_rows` on an async connection."""
    text, names = raw_query(step.block)
    args, prepare = [step.params[name] for name in names], _prepare(conn, step)
    if not timeout_ms and not pooled(conn):
        async with psycopg.AsyncRawCursor(conn, row_factory=dict_row) as cur:
            await cur.execute(text, args, prepare=prepare)
            return await cur.fetchall()
    started = time.monotonic()
    try:
        async with conn.pipeline(), psycopg.AsyncRawCursor(conn, row_factory=dict_row) as cur:
            await local_session_async(conn)
            if timeout_ms:
                await conn.execute(query("statement_timeout"), {"value": f"{timeout_ms}ms"})
            await cur.execute(text, args, prepare=prepare)
            return await cur.fetchall()
    except psycopg.errors.QueryCanceled as exc:
        if not timeout_ms or not _ran_past(started, timeout_ms):  # someone cancelled it: a DatabaseError
            raise
        raise _timed_out(step, timeout_ms, exc) from exc


def _ran_past(started: float, timeout_ms: int) -> bool:
    """Whether a capped statement sent at ``started`` (:func:`time.monotonic`) has run ``timeout_ms`` by now: Postgres
    says "query canceled" (QueryCanceled) for a statement past its statement_timeout and for one that someone
    cancelled (pg_cancel_backend, a client's cancel on Ctrl-C) alike, and the server's timer starts after this one."""
    return time.monotonic() - started >= timeout_ms / 1000


def _timed_out(step: Fetch, timeout_ms: int, exc: Exception) -> StatementTimeoutError:
    return StatementTimeoutError(
        f"route cancelled: its {step.block!r} statement ran past the store's statement_timeout of "
        f"{timeout_ms / 1000:g} s ({first_line(exc)})"
    )


def answer_sync(
    conn: psycopg.Connection[Any],
    embedder: Embedder | None,
    vectors: QueryVectors,
    info: Callable[[], CatalogInfo],
    timeout_ms: int = 0,
) -> Callable[[Step], Any]:
    """What answers a step on ``conn`` for ``ToolStore``: a :class:`Fetch` its rows, an :class:`Embed` ``embedder``'s
    vectors through ``vectors`` (the cache and circuit breaker), a :class:`Rerank` the reranker's scores, and
    :data:`CATALOG` the catalog's row (``info()``); ``timeout_ms``: :func:`fetch_rows`'."""

    def answer(step: Step) -> Any:
        if isinstance(step, Fetch):
            return fetch_rows(conn, step, timeout_ms)
        if isinstance(step, Embed):
            assert embedder is not None
            return vectors.get_many(embedder, step.texts)
        if isinstance(step, Rerank):
            return rerank_sync(step)
        return info()

    return answer


def answer_async(
    conn: psycopg.AsyncConnection[Any],
    embedder: Embedder | None,
    vectors: QueryVectors,
    info: Callable[[], Awaitable[CatalogInfo]],
    timeout_ms: int = 0,
) -> Callable[[Step], Awaitable[Any]]:
    """:func:`answer_sync` for ``AsyncToolStore``, on asyncio."""

    async def answer(step: Step) -> Any:
        if isinstance(step, Fetch):
            return await afetch_rows(conn, step, timeout_ms)
        if isinstance(step, Embed):
            assert embedder is not None
            return await vectors.aget_many(embedder, step.texts)
        if isinstance(step, Rerank):
            return await rerank_async(step)
        return await info()

    return answer


def resolve_steps(
    info: CatalogInfo, names: Sequence[str], namespaces: Sequence[str | None] = (), *, replica: int | None = None
) -> Steps[list[str | None]]:
    """The tool id each name a model called means in the catalog (``_names.resolve_calls``; inside the Responses
    namespace ``namespaces[i]`` when given and not None), or None: by index first, the catalog's whole name list only
    when no tool there answered to some call (several tools answering make a call ambiguous, which more cannot mend).
    ``replica``: on a read replica, the primary's WAL position after the store's last write of tools
    (``_replicas.Written``): a call no tool answers to is answered (None) only when the replica streams from the
    primary now and has replayed that and all it has received (:func:`_replayed`), else it is an UnknownToolError
    (the replica may only lack the tool: the read is handed on, ``LAGGING``, and the primary looks), at once unless it
    may be a hashed name form, which only the whole list can resolve (``_names.may_be_hashed``)."""
    if not names:
        return []
    spaces = list(namespaces) or [None] * len(names)
    params = {"catalog": info.id, "names": list(names), "keys": call_keys(names)}
    candidates = [name_row(r) for r in (yield Fetch("call_candidates", params))]
    missing = unanswered(names, candidates, spaces)
    if missing and replica is not None and not any(map(may_be_hashed, missing)):
        yield from _replayed(info, missing, replica)  # before the whole list: a lagging replica hands on at once
        replica = None  # it has replayed the store's writes and all it received: it answers as the primary would
    if missing:
        block = "tool_names" if all(s is None for s in spaces) else "call_names"  # tool_names reads no spec
        candidates = [name_row(r) for r in (yield Fetch(block, {"catalog": info.id}))]
        if replica is not None and (missing := unanswered(names, candidates, spaces)):
            yield from _replayed(info, missing, replica)
    return resolve_calls(names, candidates, spaces)


def _replayed(info: CatalogInfo, missing: Sequence[str], written: int) -> Steps[None]:
    """On a read replica, where no tool answers to the calls ``missing``: nothing when it streams from the primary now
    and has replayed all the WAL it has received and up to ``written`` (block ``replayed``), so they are answered
    there as the primary would (None); else UnknownToolError, and the read is handed on."""
    (row,) = yield Fetch("replayed", {"written": written})
    if not row["replayed"]:
        calls = ", ".join(map(repr, missing))
        raise UnknownToolError(f"no tool of catalog {info.name!r} answers to the call(s) {calls} on a lagging replica")


def route_steps(
    cache: CatalogCache, embedder: Embedder | None, call: RouteCall, *, replica: int | None = None
) -> Steps[RouteResult]:
    """route() of its checked arguments (``_route.check_route``): the tries :class:`CatalogCache` allows, each with the
    cached or a freshly read catalog row. ``replica``: on a read replica, where the primary's WAL was after the store's
    last write of tools (:func:`resolve_steps`)."""
    catalog = ""
    for read in cache.attempts():
        info = cache.keep((yield CATALOG)) if read else cache.cached
        catalog = info.name
        try:
            return (yield from _route_once(info, embedder, call, replica))
        except Exception as exc:
            if not cache.retry(exc, read=read):
                raise
    raise cache.exhausted(catalog)


def _route_once(
    info: CatalogInfo, embedder: Embedder | None, call: RouteCall, replica: int | None
) -> Steps[RouteResult]:
    """One try: resolve the messages' calls, embed (degrading to lexical when the embedder fails), the statement,
    packing; timed stage by stage."""
    request, reason = bind_route(call, info, embedder)
    if request.call_names:
        ids = yield from resolve_steps(info, request.call_names, request.call_namespaces, replica=replica)
        request = with_calls(request, ids)
    with RouteTrace(info.name, request.query, request.k) as trace:
        qvec: np.ndarray | None = None
        cvec: np.ndarray | None = None
        part_vecs: list[np.ndarray] = []
        if reason is None and embedder is not None:
            try:
                with trace.stage("embed"):
                    # the request alone, then its clauses in one call (similar lengths pad little), then the turns
                    qvec = (yield Embed((request.query,)))[0]
                    info.require_dim(len(qvec))  # its model's name served at another width since: lexical
                    part_vecs = (yield Embed(request.parts)) if request.parts else []
                    turns = context_texts(request)
                    earlier = (yield Embed(turns)) if turns else []
                    cvec = context_vector(qvec, earlier)
            except Exception as exc:  # provider down, timeout, bad response: degrade, and say so
                qvec, cvec, part_vecs, reason = None, None, [], embedder_failed(exc)
        params = statement_params(info, request, qvec, cvec, part_vecs)
        with trace.stage("statement"):
            try:
                rows = yield Fetch("route", params)
            except Exception as exc:  # a filter value that matches no tool: bad input, not a database failure
                bad = unmatched_filter(exc)
                if bad is None:
                    raise
                raise bad from None
        candidates, summary = None, None
        if request.reranker is not None:
            with trace.stage("rerank"):
                candidates, summary, failed = yield from rerank_steps(request, rows)
            reason = "; ".join(r for r in (reason, failed) if r) or reason
        with trace.stage("pack"):
            result = route_result(
                request,
                rows,
                dense_used=qvec is not None,
                degraded_reason=reason,
                fusion=statement_fusion(params),
                candidates=candidates,
            )
        return trace.done(replace(result, rerank=summary))


def rerank_steps(
    request: RouteRequest, rows: Sequence[Mapping[str, Any]]
) -> Steps[tuple[list[RoutedTool], dict[str, Any], str | None]]:
    """The rows as candidates (``_routed.fused_candidates``), the fused top ``k * rerank_depth`` reordered by the
    reranker's scores (``_rerank``), what ``RouteResult.rerank`` says, and None; or, when the reranker raised, the
    fused order and why. Unusable scores raise InvalidInputError."""
    candidates = fused_candidates(rows)
    positions = pool_positions(candidates, request.k * request.rerank_depth)
    summary = rerank_summary(request.rerank_depth, len(positions), failed=False)
    if not positions or request.reranker is None:
        return candidates, summary, None
    try:
        answer = yield Rerank(request.reranker, request.query, [candidates[i] for i in positions])
    except Exception as exc:  # the reranker (or its service) failed: route in fused order, and say so
        return candidates, rerank_summary(request.rerank_depth, len(positions), failed=True), rerank_failed(exc)
    return reorder(candidates, positions, check_scores(answer, len(positions))), summary, None
