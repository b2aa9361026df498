"""Vectors in Postgres: the embedding cache, query vectors for route(), tool vectors and the HNSW indexes.

Every vector toolstore computes goes through :func:`embed_cached` (keyed by model and sha256 of the text), except
query vectors of embedders that compute faster than a round trip (``Embedder.cache_queries`` False), which only
live in :class:`QueryVectors`' in-process LRU.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg

from ._embedders.base import Embedder
from ._errors import EmbedderError
from ._models import CatalogInfo
from ._sql import query

T = TypeVar("T")
#: Above this many new vectors in one write, the catalog's HNSW indexes are rebuilt rather than updated row by row.
BULK_VECTORS = 1000


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
    rows = conn.execute(query("cache_lookup"), {"model": embedder.model, "hashes": unique}).fetchall()
    found = {bytes(h): as_array(v) for h, v in rows}
    missing = [h for h in unique if h not in found]
    if missing:
        first_text = {h: t for h, t in zip(hashes, texts)}
        vectors = embedder.embed_many([first_text[h] for h in missing])
        if vectors.shape != (len(missing), embedder.dim):
            raise EmbedderError(f"embedder returned shape {vectors.shape}, expected ({len(missing)}, {embedder.dim})")
        conn.execute(query("cache_store"), {"model": embedder.model, "hashes": missing, "vectors": list(vectors)})
        found.update(zip(missing, vectors))
    return np.stack([found[h] for h in hashes])


class QueryVectors:
    """Query embeddings: an in-process LRU of ``size`` entries, then the Postgres cache for embedders that ask
    for it (``cache_queries``), else the embedder itself. Thread-safe."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._lru: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection[Any], embedder: Embedder, text: str) -> np.ndarray:
        vector = self.cached(embedder, text)
        if vector is None:
            vector = embed_cached(conn, embedder, [text])[0] if embedder.cache_queries else embedder.embed(text)
            self.remember(embedder, text, vector)
        return vector

    def cached(self, embedder: Embedder, text: str) -> np.ndarray | None:
        """The in-process vector of ``text`` (None on a miss); the async driver fetches misses itself."""
        key = (embedder.model, text)
        with self._lock:
            if key in self._lru:
                self._lru.move_to_end(key)
                return self._lru[key]
        return None

    def remember(self, embedder: Embedder, text: str, vector: np.ndarray) -> None:
        with self._lock:
            self._lru[(embedder.model, text)] = vector
            while len(self._lru) > self.size:
                self._lru.popitem(last=False)


def write_vectors(
    conn: psycopg.Connection[Any], info: CatalogInfo, embedder: Embedder, count: int, write: Callable[[], T]
) -> T:
    """Run ``write`` (statements storing ``count`` vectors of ``embedder``) inside the caller's transaction, keeping
    the catalog's HNSW indexes right: the catalog's model is recorded on first use, and above :data:`BULK_VECTORS`
    the indexes are dropped before and built once after."""
    if info.embed_model is None:
        conn.execute(query("set_catalog_model"), {"catalog": info.id, "model": embedder.model, "dim": embedder.dim})
    bulk = count > BULK_VECTORS
    if bulk:
        conn.execute(query("drop_vector_indexes"), {"catalog": info.id})
    result = write()
    present = conn.execute(query("vector_index_exists"), {"catalog": info.id}).fetchone()
    if bulk or info.embed_model is None or not (present and present[0]):
        conn.execute(query("ensure_vector_indexes"), {"catalog": info.id})
    return result
