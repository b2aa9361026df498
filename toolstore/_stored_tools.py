"""The catalog's stored tools as a write sees them: read back (``list_tools``), and what incoming tools change against
them (``tool_changes``): a write's first look, unlocked, before it embeds, and its locked look under the catalog's lock.

Connection-level reads; the write path (``_catalog``) calls them, and so do the features that read a catalog's tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._embedders.base import Embedder
from ._models import CatalogInfo, Tool
from ._rows import carry_expansions, check_ids, tool_from_row
from ._sql import query


@dataclass(frozen=True)
class Changes:
    tools: list[Tool]  # the incoming tools, generated expansions carried over
    changed: list[Tool]  # new or different from the stored row
    repair: list[Tool]  # the catalog's other tools without a vector (stored while no embedder was at hand)
    hashes: dict[str, str]  # content hash by id, of every incoming tool (none when the catalog held no tool)


def tool_changes(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    prune_scope: tuple[bool, str | None] = (False, None),
) -> Changes:
    """What ``tools`` change in the catalog ``info``: the new or different ones (by content hash), and the catalog's
    tools without a vector to embed with them when there is an ``embedder`` (not those the write prunes,
    ``prune_scope``: prune, and the upstream it prunes, None for every one)."""
    bare = [t.id for t in tools if not t.expansion]
    tools = carry_expansions(tools, {t.id: t for t in list_tools(conn, info, bare)} if bare else {})
    existing = dict(conn.execute(query("tool_hashes"), {"catalog": info.id}).fetchall())
    # into a catalog without tools every tool is new: its row hashes it, in the thread that builds the rows
    hashes = {t.id: t.content_hash() for t in tools} if existing else {}
    changed = [t for t in tools if existing.get(t.id) != hashes[t.id]] if existing else list(tools)
    repair: list[Tool] = []
    vectorless = conn.execute(query("vectorless_count"), {"catalog": info.id}).fetchone() if embedder else None
    if vectorless is not None and vectorless[0] > 0:  # then which; read only when some are not in this write
        missing = dict(conn.execute(query("tools_without_vectors"), {"catalog": info.id}).fetchall())
        incoming, changed_ids = {t.id: t for t in tools}, {t.id for t in changed}
        repair = [incoming[i] for i in missing if i in incoming and i not in changed_ids]
        prune, upstream = prune_scope  # a tool this write prunes is not embedded first
        others = [i for i, u in missing.items() if i not in incoming and not (prune and upstream in (None, u))]
        repair += list_tools(conn, info, others) if others else []
    return Changes(tools, changed, repair, hashes)


def list_tools(conn: psycopg.Connection[Any], info: CatalogInfo, ids: Sequence[str] | None = None) -> list[Tool]:
    """The catalog's tools (or those with the given ids), ordered by id."""
    with conn.cursor(row_factory=dict_row) as cur:
        if ids is None:
            cur.execute(query("list_tools"), {"catalog": info.id})
        else:
            cur.execute(query("get_tools"), {"catalog": info.id, "ids": check_ids(ids)})
        return [tool_from_row(r) for r in cur.fetchall()]
