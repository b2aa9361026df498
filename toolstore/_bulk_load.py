"""A large write's HNSW indexes: when a write loads so many new vectors into one of the catalog's vector tables that
their index is better dropped before it (concurrently, outside a transaction) and built once after (more than
``BULK_VECTORS``: ``to_drop``, the one rule of upsert, add_examples and reembed, and ``bulk_tables`` for tools and
examples written together), the write run between (``loaded``: the indexes built again after a failure, made whole
after a success), and the planner's statistics refreshed after a write of more than ``ANALYZE_AFTER`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from ._connect import retry_conflicts
from ._embedders.base import Embedder
from ._indexes import BULK_VECTORS, drop_indexes, in_transaction, indexes_after_write, restore_indexes
from ._models import CatalogInfo, IntentExample, Tool
from ._rows import check_examples, check_tools
from ._sql import query
from ._stored_tools import Changes, tool_changes

T = TypeVar("T")

#: A write changing more rows than this refreshes the planner's statistics (ANALYZE).
ANALYZE_AFTER = 500


def to_drop(conn: psycopg.Connection[Any], info: CatalogInfo | None, table: str, n: int) -> list[str]:
    """``[table]`` when loading ``n`` new vectors into it should drop the catalog's index there first (more than
    BULK_VECTORS, where :func:`may_drop`: one build after the load beats row-by-row inserts), else none."""
    return [table] if n > BULK_VECTORS and may_drop(conn, info) else []


def may_drop(conn: psycopg.Connection[Any], info: CatalogInfo | None) -> bool:
    """Whether a write may drop the catalog's HNSW indexes before it: the catalog has vectors (a dimension), and the
    write runs outside a transaction (dropped and built concurrently)."""
    return info is not None and info.embed_dim is not None and not in_transaction(conn)


def loaded(
    conn: psycopg.Connection[Any],
    catalog: str,
    info: CatalogInfo | None,
    tables: list[str],
    write: Callable[[], T],
    indexes: bool = True,
) -> T:
    """``write()`` with the catalog's HNSW index of each of ``tables`` dropped before it (concurrently) and built again
    after a failure; after a success the catalog's indexes are made whole (unless ``indexes`` is false: the caller does
    it), which also repairs one a killed concurrent build left invalid."""
    if tables and info is not None:
        retry_conflicts(lambda: drop_indexes(conn, info.id, tables=tables))
    try:
        result = write()
    except BaseException as exc:
        if tables:
            restore_indexes(conn, catalog, exc)
        raise
    if indexes:
        indexes_after_write(conn, catalog)
    return result


def bulk_tables(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    tools: Sequence[Tool],
    examples: Sequence[IntentExample],
    embedder: Embedder,
    prune: bool,
) -> tuple[list[str], Changes | None]:
    """The vector tables into which the write brings more than BULK_VECTORS new vectors, counted as
    :func:`._catalog.upsert_tools` and :func:`._catalog.add_examples` count them; the input is checked first, as they
    check it. With the tools' first look when it took one (more than BULK_VECTORS tools), which
    :func:`._catalog.upsert_tools` then reuses."""
    tables, changes = [], None
    if len(tools) > BULK_VECTORS:
        check_tools(tools)
        changes = tool_changes(conn, info, tools, embedder, (prune, None))
        if len(changes.changed) + len(changes.repair) > BULK_VECTORS:
            tables.append("tool_vectors")
    if len(examples) > BULK_VECTORS:
        check_examples(examples)
        existing = {(r[0], r[1]) for r in conn.execute(query("existing_examples"), {"catalog": info.id})}
        if len({ex.query for ex in examples if (ex.tool_id, ex.query) not in existing}) > BULK_VECTORS:
            tables.append("intent_examples")
    return tables, changes
