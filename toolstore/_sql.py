"""Packaged SQL: the named blocks of ``sql/*.sql`` (``-- name: block_name`` starts a block) and where the packaged
``sql/`` and ``migrations/`` directories are."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ._errors import DatabaseError

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
