"""A tiny loader for the named SQL blocks in ``sql/*.sql`` (``-- name: block_name`` starts a block)."""

from __future__ import annotations

import re
from functools import cache

from ._migrate import resource_dir

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
