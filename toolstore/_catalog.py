"""The write path and listings: tools, vectors and intent examples go in as one transaction, all or nothing.

Connection-level functions; :class:`toolstore.ToolStore` says when to call them. What a row looks like and what
input is refused lives in ``_rows``, vectors and their indexes in ``_vectors``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._embedders.base import Embedder
from ._errors import UnknownToolError
from ._models import CatalogInfo, ImportReport, IntentExample, Tool
from ._rows import carry_expansions, check_examples, check_tools, tool_from_row, tool_row
from ._sql import query
from ._text import dense_text
from ._vectors import embed_cached, write_vectors

#: A write changing more rows than this refreshes the planner's statistics (ANALYZE).
ANALYZE_AFTER = 500


def upsert_tools(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    *,
    prune: bool = False,
) -> ImportReport:
    """Insert new tools, update changed ones (by content hash), optionally remove absent ones.

    Incoming tools without an expansion keep the one ``toolstore expand`` generated for them. Embeddings of
    new and changed tools are computed before the transaction starts, so an embedder failure writes nothing;
    the rest happens in one transaction (a savepoint when the caller has one open).
    """
    check_tools(tools)
    if embedder is not None:
        info.require_model(embedder.model)
    bare = [t.id for t in tools if not t.expansion]
    tools = carry_expansions(tools, {t.id: t for t in list_tools(conn, info, bare)} if bare else {})
    existing = dict(conn.execute(query("tool_hashes"), {"catalog": info.id}).fetchall())
    hashes = {t.id: t.content_hash() for t in tools}
    changed = [t for t in tools if existing.get(t.id) != hashes[t.id]]
    vectors = None
    if embedder is not None and changed:
        vectors = embed_cached(conn, embedder, [dense_text(t) for t in changed])
    report = ImportReport(unchanged=len(tools) - len(changed))
    with conn.transaction():
        conn.execute(query("lock_catalog"), {"catalog": info.id})
        if changed:
            rows = json.dumps([tool_row(t, hashes[t.id]) for t in changed], ensure_ascii=False)
            for tool_id, inserted in conn.execute(query("upsert_tools"), {"catalog": info.id, "rows": rows}):
                (report.inserted if inserted else report.updated).append(tool_id)
        if vectors is not None and embedder is not None:
            params = {"catalog": info.id, "ids": [t.id for t in changed], "vectors": list(vectors)}
            write_vectors(
                conn, info, embedder, len(changed), lambda: conn.execute(query("upsert_tool_vectors"), params)
            )
            report.embedded = len(changed)
        if prune:
            keep = [t.id for t in tools]
            report.removed = [r[0] for r in conn.execute(query("prune_tools"), {"catalog": info.id, "keep": keep})]
    if len(changed) + len(report.removed) > ANALYZE_AFTER:
        analyze(conn)
    return report


def add_examples(
    conn: psycopg.Connection[Any], info: CatalogInfo, examples: Sequence[IntentExample], embedder: Embedder
) -> int:
    """Store new intent examples (embedded) for tools of the catalog; returns how many were added.

    Examples already stored are skipped (nothing re-embedded); unknown tools are an error and then
    nothing is written.
    """
    info.require_model(embedder.model)
    examples = list(dict.fromkeys(examples))
    check_examples(examples)
    ids = sorted({ex.tool_id for ex in examples})
    known = {r[0] for r in conn.execute(query("tool_pks"), {"catalog": info.id, "ids": ids})}
    unknown = [i for i in ids if i not in known]
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5])
        raise UnknownToolError(f"intent examples name {len(unknown)} tool(s) not in catalog {info.name!r}: {shown}")
    existing = {(r[0], r[1]) for r in conn.execute(query("existing_examples"), {"catalog": info.id})}
    new = [ex for ex in examples if (ex.tool_id, ex.query) not in existing]
    if not new:
        return 0
    vectors = embed_cached(conn, embedder, [ex.query for ex in new])
    params = {
        "catalog": info.id,
        "ids": [ex.tool_id for ex in new],
        "queries": [ex.query for ex in new],
        "vectors": list(vectors),
    }
    with conn.transaction():
        conn.execute(query("lock_catalog"), {"catalog": info.id})
        written = write_vectors(
            conn, info, embedder, len(new), lambda: len(conn.execute(query("insert_examples"), params).fetchall())
        )
    if written > ANALYZE_AFTER:
        analyze(conn)
    return written


def list_tools(conn: psycopg.Connection[Any], info: CatalogInfo, ids: Sequence[str] | None = None) -> list[Tool]:
    """The catalog's tools (or those with the given ids), ordered by id."""
    with conn.cursor(row_factory=dict_row) as cur:
        if ids is None:
            cur.execute(query("list_tools"), {"catalog": info.id})
        else:
            cur.execute(query("get_tools"), {"catalog": info.id, "ids": list(ids)})
        return [tool_from_row(r) for r in cur.fetchall()]


def remove_tool(conn: psycopg.Connection[Any], info: CatalogInfo, tool_id: str) -> None:
    """Delete one tool (its vector, examples and BM25 statistics go with it)."""
    if conn.execute(query("delete_tool"), {"catalog": info.id, "id": tool_id}).fetchone() is None:
        raise UnknownToolError(f"no tool {tool_id!r} in catalog {info.name!r}")


def analyze(conn: psycopg.Connection[Any]) -> None:
    """Fresh planner statistics after a bulk write: without them the BM25 joins start from the postings."""
    conn.execute(query("analyze_tables"))
