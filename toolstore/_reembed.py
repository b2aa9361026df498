"""Switch a catalog to another embedding model (another dimension included) without dropping anything."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from ._abstain import SETTINGS_KEY
from ._bulk_load import loaded, to_drop
from ._catalog_row import catalog_info, lock_catalog
from ._connect import retry_conflicts
from ._embedders.base import Embedder
from ._models import Tool
from ._rows import unknown_catalog
from ._sql import query
from ._stored_tools import list_tools
from ._text import dense_text
from ._vectors import embed_cached, one_width, replace_example_vectors, write_tool_vectors


def reembed(conn: psycopg.Connection[Any], catalog: str, embedder: Embedder) -> dict[str, Any]:
    """Embed every tool and intent example with ``embedder`` and make it the catalog's model.

    Vectors are computed first (cached ones reused); then one transaction swaps them in and records the new model and
    dimension (and, for another model, drops a calibrated abstention model, fitted on the old model's similarities:
    ``abstain_reset`` in the report); then the catalog's HNSW indexes for the new dimension are built and the old ones
    dropped (both concurrently). The index of a table that takes more than ``BULK_VECTORS`` vectors is dropped before
    and built once after, by upsert's rule (``_bulk_load``), unless the dimension changes (the new vectors go into no
    old index). On any error the catalog keeps its old model and vectors.
    """
    info = catalog_info(conn, catalog)
    if info is None:
        raise unknown_catalog(catalog)
    tools = list_tools(conn, info)
    queries = [q for _, q in conn.execute(query("all_examples"), {"catalog": info.id})]
    texts = _texts(tools, queries)
    vectors = dict(zip(texts, embed_cached(conn, embedder, texts))) if texts else {}
    dim = one_width(embedder.model, list(vectors.values())) if vectors else embedder.dim  # the cache's: server down
    tables: list[str] = []  # each vector table whose index the rewrite would update row by row, and better drops first
    if info.embed_dim == dim:
        tables = to_drop(conn, info, "tool_vectors", len(tools)) + to_drop(conn, info, "intent_examples", len(queries))
    counts: dict[str, int] = {}

    def write() -> None:
        counts.clear()  # a try a deadlock rolled back counted what was undone
        with conn.transaction():
            locked = lock_catalog(conn, catalog)
            tools = list_tools(conn, locked)
            examples = conn.execute(query("all_examples"), {"catalog": locked.id}).fetchall()
            missing = [t for t in _texts(tools, [q for _, q in examples]) if t not in vectors]  # written since
            if missing:
                vectors.update(zip(missing, embed_cached(conn, embedder, missing)))
                one_width(embedder.model, list(vectors.values()))  # the server's since, the cache's before
            params: dict[str, Any] = {"catalog": locked.id, "model": embedder.model, "dim": dim}
            conn.execute(query("set_catalog_model"), params)
            if locked.settings.get(SETTINGS_KEY) and locked.embed_model != embedder.model:
                # a calibrated abstention model weighs the old model's similarities: back to the shipped default
                settings = json.dumps({**locked.settings, SETTINGS_KEY: None})
                conn.execute(query("set_catalog_settings"), {"catalog": locked.id, "settings": settings})
                counts["abstain_reset"] = 1
            conn.execute(query("clear_tool_vectors"), {"catalog": locked.id})
            if tools:
                write_tool_vectors(conn, locked.id, [t.id for t in tools], [vectors[dense_text(t)] for t in tools])
            if examples:
                replace_example_vectors(conn, locked.id, [(pk, vectors[q]) for pk, q in examples])
            counts.update(tools=len(tools), examples=len(examples))

    loaded(conn, catalog, info, tables, lambda: retry_conflicts(write))  # then the new dimension's indexes built
    return {
        "catalog": info.name,
        "from_model": info.embed_model,
        "to_model": embedder.model,
        "dim": dim,
        "abstain_reset": bool(counts.pop("abstain_reset", 0)),
        **counts,
    }


def _texts(tools: list[Tool], examples: list[str]) -> list[str]:
    """Every text a catalog embeds: its tools' dense texts, then its intent examples' requests, without repeats."""
    return list(dict.fromkeys([dense_text(t) for t in tools] + examples))
