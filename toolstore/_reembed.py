"""Switch a catalog to another embedding model (another dimension included) without dropping anything."""

from __future__ import annotations

from typing import Any

import psycopg

from ._catalog import list_tools
from ._embedders.base import Embedder
from ._models import CatalogInfo
from ._sql import query
from ._text import dense_text
from ._vectors import embed_cached


def reembed(conn: psycopg.Connection[Any], info: CatalogInfo, embedder: Embedder) -> dict[str, Any]:
    """Embed every tool and intent example with ``embedder`` and make it the catalog's model.

    Vectors are computed first (cached ones reused); then one transaction swaps them in, records the
    new model and dimension, and rebuilds the catalog's HNSW indexes. On any error nothing changes.
    """
    tools = list_tools(conn, info)
    examples = conn.execute(query("all_examples"), {"catalog": info.id}).fetchall()
    tool_vectors = embed_cached(conn, embedder, [dense_text(t) for t in tools])
    example_vectors = embed_cached(conn, embedder, [q for _, q in examples])
    with conn.transaction():
        conn.execute(query("lock_catalog"), {"catalog": info.id})
        conn.execute(query("drop_vector_indexes"), {"catalog": info.id})
        conn.execute(query("set_catalog_model"), {"catalog": info.id, "model": embedder.model, "dim": embedder.dim})
        conn.execute(query("clear_tool_vectors"), {"catalog": info.id})
        if tools:
            params = {"catalog": info.id, "ids": [t.id for t in tools], "vectors": list(tool_vectors)}
            conn.execute(query("upsert_tool_vectors"), params)
        if examples:
            params = {"catalog": info.id, "pks": [pk for pk, _ in examples], "vectors": list(example_vectors)}
            conn.execute(query("set_example_vectors"), params)
        conn.execute(query("ensure_vector_indexes"), {"catalog": info.id})
    return {
        "catalog": info.name,
        "from_model": info.embed_model,
        "to_model": embedder.model,
        "dim": embedder.dim,
        "tools": len(tools),
        "examples": len(examples),
    }
