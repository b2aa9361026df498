"""A catalog's row, read (:func:`catalog_info`) or locked for a write (:func:`lock_catalog`), as every write starts
from it: ``_catalog`` (tools, examples, settings, removals), ``_anchors``, ``_access``, ``_reembed``, ``_mcp_sync``."""

from __future__ import annotations

from functools import partial
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._drive import drive
from ._models import CatalogInfo
from ._rows import LIST_THEM, info_from_row, unknown_catalog
from ._sql import query
from ._steps import Fetch, Steps, fetch_rows


def catalog_row_steps(name: str, *, counts: bool = False) -> Steps[CatalogInfo | None]:
    """The catalog's row (with tool and example counts when ``counts``), or None when it does not exist: the one read
    of it, which :func:`catalog_info` runs on a connection and both stores drive (``_reads.catalog_steps``)."""
    rows = yield Fetch("get_catalog" if counts else "get_catalog_light", {"name": name})
    return info_from_row(rows[0]) if rows else None


def catalog_info(conn: psycopg.Connection[Any], name: str, *, counts: bool = False) -> CatalogInfo | None:
    """The catalog's row (with tool and example counts when ``counts``), or None when it does not exist."""
    return drive(catalog_row_steps(name, counts=counts), partial(fetch_rows, conn))


def lock_catalog(
    conn: psycopg.Connection[Any], name: str, *, create: bool = False, hint: str = LIST_THEM
) -> CatalogInfo:
    """Inside a transaction: the catalog's row, locked for this transaction (created first when ``create`` and it
    does not exist: only the owner role may create catalogs under row-level security); ``hint``: the
    UnknownCatalogError's when there is none."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("lock_catalog"), {"name": name}).fetchone()
        if row is None and create:
            conn.execute(query("ensure_catalog"), {"name": name})
            row = cur.execute(query("lock_catalog"), {"name": name}).fetchone()
    if row is None:
        raise unknown_catalog(name, hint)
    return info_from_row(row)
