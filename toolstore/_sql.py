"""Packaged SQL: the named blocks of ``sql/*.sql`` (``-- name: block_name`` starts a block), each also with its
placeholders numbered for a raw cursor, and where the packaged ``sql/`` and ``migrations/`` directories are."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ._errors import DatabaseError

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]|%%|%")


def resource_dir(name: str) -> Path:
    """``migrations`` or ``sql``: inside the installed package (wheel), else at the repository root."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise DatabaseError(f"toolstore's {name}/ directory is missing from the installation ({here})")


def parse_blocks(text: str) -> dict[str, str]:
    """Split a .sql file's text into {name: statement}; text before the first header is ignored."""
    parts = _HEADER.split(text)
    blocks: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        blocks[name] = body.strip().rstrip(";")
    return blocks


@cache
def queries() -> dict[str, str]:
    """Every named block of every file in ``sql/``."""
    blocks: dict[str, str] = {}
    for path in sorted(resource_dir("sql").glob("*.sql")):
        for name, body in parse_blocks(path.read_text(encoding="utf-8")).items():
            if name in blocks:
                raise ValueError(f"SQL block {name!r} is defined in two files")
            blocks[name] = body
    return blocks


def query(name: str) -> str:
    """The statement of block ``name``."""
    return queries()[name]


def number_placeholders(text: str, what: str = "SQL") -> tuple[str, tuple[str, ...]]:
    """``text`` with Postgres' own placeholders: each ``%(param)s`` or ``%(param)b`` becomes ``$n`` (a name used twice
    keeps its number), ``%%`` becomes ``%``; and the parameter names in ``$n`` order. Any other ``%`` is an error."""
    names: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            raise ValueError(f"{what}: a placeholder other than %(name)s or %(name)b, or a lone %")
        return f"${names.setdefault(match.group(1), len(names) + 1)}"

    return _PLACEHOLDER.sub(number, text), tuple(names)


@cache
def raw_query(name: str) -> tuple[str, tuple[str, ...]]:
    """Block ``name`` for psycopg's raw cursor, which sends the text as is (:func:`number_placeholders`).

    The default cursor parses a statement's placeholders on every call once it is over 4 KB (the route statement is
    17 KB: 0.29 ms a call). A value's format then comes from its type (``_connect.VectorArray`` for a list of
    vectors in binary), not from a ``b`` placeholder.
    """
    return number_placeholders(query(name), f"SQL block {name!r}")
