"""The SQL blocks of ``tests/retrievers.sql``: each retriever alone, to check the route statement against."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from toolstore._sql import parse_blocks

PATH = Path(__file__).resolve().parent / "retrievers.sql"


@cache
def block(name: str) -> str:
    return parse_blocks(PATH.read_text(encoding="utf-8"))[name]
