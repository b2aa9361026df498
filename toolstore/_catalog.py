"""The write path: tools, vectors and intent examples go in as one transaction, all or nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from ._embedders.base import Embedder
from ._errors import InvalidInputError, InvalidToolError, ModelMismatchError, UnknownToolError
from ._models import IntentExample, Tool
from ._sql import query
from ._text import dense_text, description_doc, expansion_doc, name_doc

BULK_VECTORS = 1000  # above this many new vectors, HNSW indexes are rebuilt rather than updated row by row
ANALYZE_AFTER = 500  # a write changing more rows than this refreshes the planner's statistics
MAX_EXAMPLE_CHARS = 2000


@dataclass(frozen=True)
class CatalogInfo:
    id: int
    name: str
    embed_model: str | None
    embed_dim: int | None
    settings: dict[str, Any]
    n_tools: int = 0
    n_examples: int = 0


@dataclass
class ImportReport:
    """What an import changed."""

    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    embedded: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "inserted": len(self.inserted),
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "removed": len(self.removed),
            "embedded": self.embedded,
        }


def tool_row(tool: Tool, content_hash: str | None = None) -> dict[str, Any]:
    """The JSON row ``upsert_tools`` reads for one tool (``content_hash`` when already computed)."""
    return {
        "id": tool.id,
        "name": tool.name,
        "title": tool.title,
        "provider": tool.provider,
        "description": tool.description,
        "parameters": tool.parameters,
        "categories": list(tool.categories),
        "tags": list(tool.tags),
        "keywords": list(tool.keywords),
        "examples": list(tool.examples),
        "expansion": tool.expansion,
        "avoid_when": tool.avoid_when,
        "always_on": tool.always_on,
        "spec": tool.spec,
        "content_hash": content_hash or tool.content_hash(),
        "name_doc": name_doc(tool),
        "description_doc": description_doc(tool),
        "expansion_doc": expansion_doc(tool),
    }


def tool_from_row(row: dict[str, Any]) -> Tool:
    return Tool(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        title=row["title"],
        provider=row["provider"],
        parameters=row["parameters"],
        categories=tuple(row["categories"]),
        tags=tuple(row["tags"]),
        keywords=tuple(row["keywords"]),
        examples=tuple(row["examples"]),
        expansion=row["expansion"],
        avoid_when=row["avoid_when"],
        always_on=row["always_on"],
        spec=row["spec"],
    )


def check_tools(tools: Sequence[Tool]) -> None:
    """Reject what the database would reject later, naming the tool: duplicates, NUL bytes, bad types."""
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        label = f"tool #{index + 1} ({tool.id!r})" if isinstance(tool, Tool) else f"tool #{index + 1}"
        if not isinstance(tool, Tool):
            raise InvalidToolError(f"{label}: expected a toolstore.Tool, got {type(tool).__name__}")
        if not tool.id or not tool.id.strip():
            raise InvalidToolError(f"{label}: id is empty")
        if not tool.name or not tool.name.strip():
            raise InvalidToolError(f"{label}: name is empty")
        if tool.id in seen:
            raise InvalidToolError(f"{label}: id {tool.id!r} appears twice")
        seen.add(tool.id)
        if tool.parameters is not None and not isinstance(tool.parameters, dict):
            raise InvalidToolError(f"{label}: parameters must be a JSON object or None")
        try:
            json.dumps(tool.parameters)
            json.dumps(tool.spec)
        except (TypeError, ValueError) as exc:
            raise InvalidToolError(f"{label}: not JSON-serialisable: {exc}") from exc
        if has_nul([getattr(tool, f.name) for f in fields(tool)]):
            raise InvalidToolError(f"{label}: contains a NUL byte")


def has_nul(value: Any) -> bool:
    """True when a NUL character hides anywhere in a (nested) JSON-like value."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_nul(v) for v in value)
    return False


def as_array(vector: Any) -> np.ndarray:
    """A pgvector value as float32 numpy (pgvector-python returns Vector objects or arrays by version)."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def embed_cached(conn: psycopg.Connection[Any], embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors for ``texts``, from the Postgres cache keyed by (model, sha256) where present.

    Misses are embedded (all of them, or an error and nothing stored) and added to the cache.
    """
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    hashes = [text_hash(t) for t in texts]
    unique = list(dict.fromkeys(hashes))
    found = {
        bytes(h): as_array(v)
        for h, v in conn.execute(query("cache_lookup"), {"model": embedder.model, "hashes": unique}).fetchall()
    }
    missing = [h for h in unique if h not in found]
    if missing:
        first_text = {h: t for h, t in zip(hashes, texts)}
        vectors = embedder.embed_many([first_text[h] for h in missing])
        if vectors.shape != (len(missing), embedder.dim):
            from ._errors import EmbedderError

            raise EmbedderError(f"embedder returned shape {vectors.shape}, expected ({len(missing)}, {embedder.dim})")
        conn.execute(query("cache_store"), {"model": embedder.model, "hashes": missing, "vectors": list(vectors)})
        found.update(zip(missing, vectors))
    return np.stack([found[h] for h in hashes])


def check_model(info: CatalogInfo, embedder: Embedder) -> None:
    if info.embed_model is not None and info.embed_model != embedder.model:
        raise ModelMismatchError(
            f"catalog {info.name!r} is embedded with {info.embed_model!r} but the embedder is {embedder.model!r}; "
            f"use the same model or switch the catalog with `toolstore reembed --model ...`"
        )


def upsert_tools(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    *,
    prune: bool = False,
) -> ImportReport:
    """Insert new tools, update changed ones (by content hash), optionally remove absent ones.

    Embeddings of new and changed tools are computed before the transaction starts, so an embedder
    failure writes nothing; the rest happens in one transaction.
    """
    from ._expand import carry_expansions  # _expand builds on this module

    check_tools(tools)
    if embedder is not None:
        check_model(info, embedder)
    tools = carry_expansions(conn, info, tools)  # a re-import keeps expansions toolstore generated
    existing = dict(conn.execute(query("tool_hashes"), {"catalog": info.id}).fetchall())
    hashes = {t.id: t.content_hash() for t in tools}
    changed = [t for t in tools if existing.get(t.id) != hashes[t.id]]
    vectors = None
    if embedder is not None and changed:
        vectors = embed_cached(conn, embedder, [dense_text(t) for t in changed])
    report = ImportReport()
    with conn.transaction():
        conn.execute(query("lock_catalog"), {"catalog": info.id})
        if changed:
            rows = json.dumps([tool_row(t, hashes[t.id]) for t in changed], ensure_ascii=False)
            for tool_id, inserted in conn.execute(query("upsert_tools"), {"catalog": info.id, "rows": rows}):
                (report.inserted if inserted else report.updated).append(tool_id)
        report.unchanged = len(tools) - len(changed)
        if vectors is not None and embedder is not None:
            write_vectors(conn, info, embedder, [t.id for t in changed], vectors)
            report.embedded = len(changed)
        if prune:
            keep = [t.id for t in tools]
            report.removed = [r[0] for r in conn.execute(query("prune_tools"), {"catalog": info.id, "keep": keep})]
    if len(changed) + len(report.removed) > ANALYZE_AFTER:
        conn.execute(query("analyze_tables"))
    return report


def write_vectors(
    conn: psycopg.Connection[Any], info: CatalogInfo, embedder: Embedder, ids: Sequence[str], vectors: np.ndarray
) -> None:
    """Store tool vectors (inside the caller's transaction), recording the catalog's model on first use."""
    if info.embed_model is None:
        conn.execute(query("set_catalog_model"), {"catalog": info.id, "model": embedder.model, "dim": embedder.dim})
    bulk = len(ids) > BULK_VECTORS
    if bulk:
        conn.execute(query("drop_vector_indexes"), {"catalog": info.id})
    conn.execute(query("upsert_tool_vectors"), {"catalog": info.id, "ids": list(ids), "vectors": list(vectors)})
    present = conn.execute(query("vector_index_exists"), {"catalog": info.id}).fetchone()
    if bulk or info.embed_model is None or not (present and present[0]):
        conn.execute(query("ensure_vector_indexes"), {"catalog": info.id})


def add_examples(
    conn: psycopg.Connection[Any], info: CatalogInfo, examples: Sequence[IntentExample], embedder: Embedder
) -> int:
    """Store new intent examples (embedded) for tools of the catalog; returns how many were added.

    Examples already stored are skipped (nothing re-embedded); unknown tools are an error and then
    nothing is written.
    """
    check_model(info, embedder)
    examples = list(dict.fromkeys(examples))
    for index, ex in enumerate(examples):
        if not isinstance(ex.query, str) or not ex.query.strip():
            raise InvalidInputError(f"intent example #{index + 1} for {ex.tool_id!r}: query is empty")
        if "\x00" in ex.query:
            raise InvalidInputError(f"intent example #{index + 1} for {ex.tool_id!r}: query contains a NUL byte")
        if len(ex.query) > MAX_EXAMPLE_CHARS:
            raise InvalidInputError(
                f"intent example #{index + 1} for {ex.tool_id!r}: query longer than {MAX_EXAMPLE_CHARS} characters"
            )
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
    with conn.transaction():
        conn.execute(query("lock_catalog"), {"catalog": info.id})
        if info.embed_model is None:
            conn.execute(query("set_catalog_model"), {"catalog": info.id, "model": embedder.model, "dim": embedder.dim})
        bulk = len(new) > BULK_VECTORS
        if bulk:
            conn.execute(query("drop_vector_indexes"), {"catalog": info.id})
        params = {
            "catalog": info.id,
            "ids": [ex.tool_id for ex in new],
            "queries": [ex.query for ex in new],
            "vectors": list(vectors),
        }
        written = len(conn.execute(query("insert_examples"), params).fetchall())
        present = conn.execute(query("vector_index_exists"), {"catalog": info.id}).fetchone()
        if bulk or not (present and present[0]):
            conn.execute(query("ensure_vector_indexes"), {"catalog": info.id})
    if written > ANALYZE_AFTER:
        conn.execute(query("analyze_tables"))
    return written


def list_tools(conn: psycopg.Connection[Any], info: CatalogInfo, ids: Sequence[str] | None = None) -> list[Tool]:
    with conn.cursor(row_factory=dict_row) as cur:
        if ids is None:
            cur.execute(query("list_tools"), {"catalog": info.id})
        else:
            cur.execute(query("get_tools"), {"catalog": info.id, "ids": list(ids)})
        return [tool_from_row(r) for r in cur.fetchall()]
