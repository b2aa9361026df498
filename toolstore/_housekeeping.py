"""A catalog's housekeeping writes: remove one tool, drop the catalog, merge its settings; each under the catalog's
row lock (``_catalog_row.lock_catalog``), retried when Postgres picks it as a deadlock victim."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import psycopg

from ._catalog_row import lock_catalog
from ._connect import retry_conflicts
from ._errors import UnknownToolError
from ._indexes import partitions_after_drop
from ._models import CatalogInfo
from ._observe import logger
from ._remedies import partitions_behind_pooler
from ._setup import pooled
from ._sql import query


def remove_tool(conn: psycopg.Connection[Any], catalog: str, tool_id: str) -> None:
    """Delete one tool (its vector, examples and BM25 statistics go with it), under the catalog's lock."""

    def write() -> None:
        with conn.transaction():
            info = lock_catalog(conn, catalog)
            if conn.execute(query("delete_tool"), {"catalog": info.id, "id": tool_id}).fetchone() is None:
                raise UnknownToolError(f"no tool {tool_id!r} in catalog {catalog!r}")

    retry_conflicts(write)


def drop_catalog(conn: psycopg.Connection[Any], catalog: str) -> CatalogInfo:
    """Delete the catalog with its tools, vectors, examples and statistics; then its partitions (with their indexes),
    detached concurrently. Returns the dropped row with the counts of the tools and examples dropped (read by the
    delete, under the catalog's lock: no writer adds or removes one in between)."""

    def write() -> CatalogInfo:
        with conn.transaction():
            info = lock_catalog(conn, catalog)
            _, tools, examples = conn.execute(query("drop_catalog"), {"name": catalog}).fetchone()  # type: ignore[misc]
            return replace(info, n_tools=tools, n_examples=examples)

    dropped = retry_conflicts(write)
    partitions_after_drop(conn)
    if pooled(conn) and (left := [row[0] for row in conn.execute(query("orphan_partitions"))]):
        logger.warning("%s", partitions_behind_pooler(left))
    return dropped


def set_settings(conn: psycopg.Connection[Any], catalog: str, updates: Mapping[str, Any]) -> None:
    """Merge ``updates`` into the catalog's settings, under its lock (no concurrent update is lost)."""

    def write() -> None:
        with conn.transaction():
            info = lock_catalog(conn, catalog)
            settings = {**info.settings, **updates}
            conn.execute(query("set_catalog_settings"), {"catalog": info.id, "settings": json.dumps(settings)})

    retry_conflicts(write)
