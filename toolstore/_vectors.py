"""Vectors in Postgres: the embedding cache, query vectors for route(), tool and example vector writes.

Every tool and example vector toolstore computes goes through :func:`embed_cached` (keyed by model and sha256 of the
text). Query vectors never touch Postgres: they live in :class:`QueryVectors`' in-process LRU, so route() writes
nothing and runs on a read-only connection (a hot standby).

The vector tables' partitions and HNSW indexes: :mod:`toolstore._indexes`.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import psycopg

from ._breaker import BREAKER_COOLDOWN, Breaker
from ._commits import repeatable
from ._embedders.base import Embedded, Embedder
from ._embedders.factory import key_in_use
from ._errors import (
    DatabaseError,
    EmbedderError,
    EmbedderUnavailableError,
    ModelMismatchError,
)
from ._models import CatalogInfo
from ._observe import logger
from ._progress import part
from ._sql import query

#: The cache keys whose vectors of another width a role that may not write the cache was told of (once a process).
_STALE_WARNED: set[str] = set()

#: A prune keeps the cache's entries younger than this: a catalog's first import (or a reembed) caches its vectors
#: before its write transaction records the model that reads them.
CACHE_GRACE = timedelta(hours=1)


def as_array(vector: Any) -> np.ndarray:
    """A pgvector value as float32 numpy (pgvector-python returns Vector objects or arrays by version)."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def embed_cached(
    conn: psycopg.Connection[Any],
    embedder: Embedder,
    texts: Sequence[str],
    *,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    require: Callable[[int], None] | None = None,
    computed: set[str] | None = None,
) -> np.ndarray:
    """Vectors for ``texts``, from the Postgres cache keyed by (model, sha256) where present.

    Misses are embedded with ``embed`` (default ``embedder.embed_many``: all of them, or an error and nothing
    stored) and added to the cache when the role may write it (the owner: a vector a granted role cached would be
    used by every catalog's writes). The key's model is ``embedder.cache_key``: the model, and a model directory's
    token limit, since a long text's vector depends on where the embedder cuts it (the shipped local model's names
    its build: another build's vectors are not read). A cached vector of another width
    than ``embedder.dim`` (a compatible server restarted serving the model name at another dimension, at the same
    address) is never handed back: it is embedded again, and replaced in the cache. ``require`` (a catalog's
    ``CatalogInfo.require_dim``) is told the width before anything is embedded, or, when the embedder learns it,
    after the first batch: a width the catalog refuses stops the write there. ``computed``, when given, gets the texts
    the embedder was asked for (not cached, or cached at another width): the rest came from the cache.
    """
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    hashes = [text_hash(t) for t in texts]
    unique = list(dict.fromkeys(hashes))
    key = embedder.cache_key
    params: dict[str, Any] = {"model": key, "hashes": unique}
    rows = conn.execute(query("cache_lookup"), params, binary=True).fetchall()
    found = {bytes(h): as_array(v) for h, v in rows}
    first_text = {h: t for h, t in zip(hashes, texts)}

    def embedded(missing: list[bytes]) -> dict[bytes, np.ndarray]:
        vectors = _embed_checked(embedder, [first_text[h] for h in missing], embed or embedder.embed_many, require)
        return dict(zip(missing, vectors))

    fresh = embedded([h for h in unique if h not in found]) if len(found) < len(unique) else {}
    dim = embedder.dim if fresh else _cached_width(embedder, list(found.values()))  # known after misses: no probe
    stale = [h for h, v in found.items() if v.shape != (dim,)]
    if stale:
        fresh |= embedded(stale)
    if computed is not None:
        computed.update(first_text[h] for h in fresh)
    if fresh:
        rows = sorted(fresh.items(), key=lambda r: r[0])
        params = {"model": key, "hashes": [r[0] for r in rows], "vectors": [r[1] for r in rows]}
        if conn.execute(query("cache_writable")).fetchone()[0]:  # type: ignore[index]
            with repeatable(conn):  # a write tried again finds them cached
                if stale:
                    conn.execute(query("cache_forget"), {"model": key, "hashes": stale, "dim": embedder.dim})
                copied = [(key, h, v) for h, v in rows]
                store_rows(conn, "copy_cache", ("text", "bytea", "vector"), copied, fallback=("cache_store", params))
        elif stale and key not in _STALE_WARNED:  # once a process: each of this role's writes embeds them again
            _STALE_WARNED.add(key)
            logger.warning(
                "the embedding cache holds %d vectors of %s of another width than its %d dimensions now, which "
                "role %r may not replace: each of its writes embeds those texts again, until the tables' owner writes "
                "them (an import or a reembed of the same texts); said once a process",
                len(stale),
                key,
                embedder.dim,
                conn.info.user,
            )
        found.update(fresh)
    return np.stack([found[h] for h in hashes])


def _embed_checked(
    embedder: Embedder,
    texts: Sequence[str],
    embed: Callable[[Sequence[str]], np.ndarray],
    require: Callable[[int], None] | None,
) -> np.ndarray:
    """``embed(texts)``, of the embedder's width, which ``require`` is told first: before any request when the
    embedder knows it, else after the first batch (the rest is not embedded when it refuses)."""
    if require is not None and embedder.known_dim is not None:
        require(embedder.known_dim)
    first = embedder.batch_size if require is not None and embedder.known_dim is None else len(texts)
    with part(0, len(texts)):
        vectors = embed(texts[:first])
    if require is not None:
        require(vectors.shape[-1])
    if first < len(texts):
        with part(first, len(texts)):
            vectors = np.concatenate([vectors, embed(texts[first:])])
    if vectors.shape != (len(texts), embedder.dim):
        raise EmbedderError(f"embedder returned shape {vectors.shape}, expected ({len(texts)}, {embedder.dim})")
    return vectors


def _cached_width(embedder: Embedder, cached: list[np.ndarray]) -> int:
    """The embedder's width, which cached vectors must have to be handed back; when it learns it and has not yet,
    asked of its model (one probe request). A probe that fails as the server is unavailable, its retries spent, says
    nothing of the width: the cached vectors' width then, when they have one (a warning says so; the catalog checks it
    against the width it records, a refusal proves it changed)."""
    if embedder.known_dim is not None:
        return embedder.known_dim
    try:
        return embedder.dim
    except EmbedderUnavailableError as exc:
        widths = {len(v) for v in cached}
        if len(widths) != 1:
            raise
        width = widths.pop()
        logger.warning(
            "%s All %d texts to embed are in the embedding cache, at %d dimensions: they are used without the "
            "model's width checked",
            exc,
            len(cached),
            width,
        )
        return width


def prune_cache(conn: psycopg.Connection[Any]) -> int:
    """Delete the embedding cache's entries that no catalog's embedder reads (``key_in_use``): those of models no
    catalog records (a dropped catalog's, the model a reembed left), the plain entries of model directories that
    a release before their ``#max_tokens`` key wrote, and the shipped local model's of another build (or under its name
    alone, from before its key named the build), but none younger than ``CACHE_GRACE`` (a catalog's first import,
    or a reembed, caches its vectors before recording their model). Returns how many were deleted. DatabaseError for a
    role other than the tables' owner."""
    with conn.transaction():
        if not conn.execute(query("cache_prunable")).fetchone()[0]:  # type: ignore[index]
            raise DatabaseError(
                f"role {conn.info.user!r} may not prune the embedding cache: only the owner of toolstore's tables "
                "sees every catalog's model"
            )
        models = {model for (model,) in conn.execute(query("catalog_models"))}
        keys = [key for (key,) in conn.execute(query("cache_keys")) if not key_in_use(key, models)]
        params = {"keys": keys, "grace": CACHE_GRACE}
        return conn.execute(query("cache_prune"), params).rowcount if keys else 0


def store_rows(
    conn: psycopg.Connection[Any],
    copy: str,
    types: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    fallback: tuple[str, dict[str, Any]],
) -> None:
    """Rows (vectors among them) through binary COPY: a 10k-vector write takes a tenth of a second instead of seconds
    as text parameters. Two cases take the ``fallback`` statement (binary parameters) instead: row-level security
    refuses COPY FROM to roles other than the owner, and a concurrent writer may have cached the same text first."""
    try:
        with conn.transaction(), conn.cursor() as cur, cur.copy(query(copy)) as writer:  # a savepoint in a transaction
            writer.set_types(list(types))
            for row in rows:
                writer.write_row(row)
    except (psycopg.errors.FeatureNotSupported, psycopg.errors.UniqueViolation):
        conn.execute(query(fallback[0]), fallback[1], binary=True)


class QueryVectors:
    """Query embeddings for route(): an in-process LRU of ``size`` entries in front of :meth:`Embedder.embed_query`.
    Thread-safe.

    A circuit breaker (:class:`~toolstore._breaker.Breaker`) guards the embedder: after a failure, calls raise at once
    for ``cooldown`` seconds (route() answers lexically and says why), then one probes it again. It is the embedder's
    own when it has one (``Embedder.breaker``: what its writes found of the server counts here, and the reverse), else
    ``breaker``, this cache's.
    :meth:`get` is the sync driver's path, :meth:`aget_many` the async driver's (the embedder in a worker thread).

    The LRU holds one embedder's vectors: asked for another's (the store reembedded, its embedder replaced), it
    forgets them, as the name of a model does not tell its vectors apart (another server, another width).
    """

    def __init__(
        self, size: int = 2048, *, cooldown: float = BREAKER_COOLDOWN, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size = size
        self.breaker = Breaker(cooldown, clock=clock)  # for an embedder without its own
        self.cooldown = self.breaker.cooldown
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._embedder: Embedder | None = None  # whose vectors the LRU holds
        self._lock = threading.Lock()

    def get(self, embedder: Embedder, text: str) -> np.ndarray:
        return self.get_many(embedder, [text])[0]

    def get_many(self, embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
        """The vectors of ``texts``: cached ones from the LRU, the others from one ``embed_queries_with_cuts`` call
        behind the breaker."""
        found, missing = self.lookup(embedder, texts)
        if missing:
            with self.breaker_of(embedder).guard(cooldown=self.cooldown):
                embedded = embedder.embed_queries_with_cuts(missing)
            found |= self.remember_many(embedder, missing, embedded)
        return [found[t] for t in texts]

    async def aget_many(self, embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
        """:meth:`get_many` for asyncio: the LRU, then one ``embed_queries_with_cuts`` call in a worker thread (off
        the event loop) for the rest, behind the same breaker."""
        found, missing = self.lookup(embedder, texts)
        if missing:
            with self.breaker_of(embedder).guard(cooldown=self.cooldown):
                embedded = await asyncio.to_thread(embedder.embed_queries_with_cuts, missing)
            found |= self.remember_many(embedder, missing, embedded)
        return [found[t] for t in texts]

    def breaker_of(self, embedder: Embedder) -> Breaker:
        """The breaker in front of ``embedder``: its own (its server's), else this cache's."""
        return self.breaker if embedder.breaker is None else embedder.breaker

    def lookup(self, embedder: Embedder, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The vectors of ``texts`` the LRU holds, and the texts still to embed (each once, in order)."""
        found = {t: v for t in texts if (v := self.cached(embedder, t)) is not None}
        return found, [t for t in dict.fromkeys(texts) if t not in found]

    def remember_many(self, embedder: Embedder, texts: Sequence[str], embedded: Embedded) -> dict[str, np.ndarray]:
        """:meth:`remember` for each of ``texts`` (a wrong count of vectors is a failure too), but a text cut in a way
        that is not its own (``Embedded.cut``) is not kept: it is embedded again when next asked for."""
        vectors = embedded.vectors
        if len(vectors) != len(texts):
            error = EmbedderError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
            self.breaker_of(embedder).failed(error)
            raise error
        return {
            t: self.remember(embedder, t, np.asarray(v), keep=i not in embedded.cut)
            for i, (t, v) in enumerate(zip(texts, vectors))
        }

    def cached(self, embedder: Embedder, text: str) -> np.ndarray | None:
        """The in-process vector of ``text`` by ``embedder``, or None."""
        with self._lock:
            if embedder is not self._embedder:
                self._lru.clear()
                self._embedder = embedder
            vector = self._lru.get(text)
            if vector is not None:
                self._lru.move_to_end(text)
            return vector

    def remember(self, embedder: Embedder, text: str, vector: np.ndarray, *, keep: bool = True) -> np.ndarray:
        """The embedder answered: keep the vector (unless not ``keep``) and close the breaker, and return it; a vector
        of the wrong shape is a failure (EmbedderError, the breaker opens)."""
        if vector.shape != (embedder.dim,):
            error = EmbedderError(f"embedder returned shape {vector.shape}, expected ({embedder.dim},)")
            self.breaker_of(embedder).failed(error)
            raise error
        self.breaker_of(embedder).succeeded()
        with self._lock:
            if not keep or embedder is not self._embedder:  # another embedder asked since: its vectors only
                return vector
            self._lru[text] = vector
            while len(self._lru) > self.size:
                self._lru.popitem(last=False)
        return vector


def record_model(conn: psycopg.Connection[Any], info: CatalogInfo, model: str, vectors: Sequence[np.ndarray]) -> None:
    """Inside a write transaction of a catalog's vectors, before writing them: record its model and the vectors'
    width with its first vectors; later, ModelMismatchError when they are of another width than the catalog's (the
    same model name served at another dimension: a compatible server restarted so). The width is the vectors'
    (``one_width``; from ``embed_cached``: the embedder's, or the cache's when its server could not be asked)."""
    dim = one_width(model, vectors)
    if info.embed_model is None:
        conn.execute(query("set_catalog_model"), {"catalog": info.id, "model": model, "dim": dim})
    else:
        info.require_dim(dim)


def one_width(model: str, vectors: Sequence[np.ndarray]) -> int:
    """The width of a write's ``vectors``; ModelMismatchError when they have several: some from the cache while the
    embedder's server could not be asked for its width, the others from the server since, at another."""
    widths = sorted({len(v) for v in vectors})
    if len(widths) != 1:
        raise ModelMismatchError(
            f"the vectors of {model} in this write are of {' and '.join(map(str, widths))} dimensions: its server, "
            "which could not be asked for its width as the write began, answers at another width than the cached "
            "vectors have; write again"
        )
    return widths[0]


def write_tool_vectors(
    conn: psycopg.Connection[Any], catalog_id: int, ids: Sequence[str], vectors: Sequence[np.ndarray]
) -> None:
    """Replace the vectors of these tools of the catalog (inside the writer's transaction)."""
    pks = dict(conn.execute(query("tool_pks"), {"catalog": catalog_id, "ids": list(ids)}).fetchall())
    conn.execute(query("delete_tool_vectors"), {"catalog": catalog_id, "ids": list(ids)})
    rows = [(pks[i], catalog_id, v) for i, v in zip(ids, vectors)]
    params = {"catalog": catalog_id, "ids": list(ids), "vectors": list(vectors)}
    store_rows(conn, "copy_tool_vectors", ("int8", "int4", "vector"), rows, fallback=("upsert_tool_vectors", params))


def write_examples(
    conn: psycopg.Connection[Any], catalog_id: int, examples: Sequence[tuple[str, str, np.ndarray]]
) -> None:
    """Store (tool id, request, vector) examples that are not stored yet (inside the writer's transaction)."""
    ids = sorted({tool_id for tool_id, _, _ in examples})
    pks = dict(conn.execute(query("tool_pks"), {"catalog": catalog_id, "ids": ids}).fetchall())
    rows = [(catalog_id, pks[tool_id], text, v) for tool_id, text, v in examples]
    params = {
        "catalog": catalog_id,
        "ids": [e[0] for e in examples],
        "queries": [e[1] for e in examples],
        "vectors": [e[2] for e in examples],
    }
    store_rows(conn, "copy_examples", ("int4", "int8", "text", "vector"), rows, fallback=("insert_examples", params))


def replace_example_vectors(
    conn: psycopg.Connection[Any], catalog_id: int, vectors: Sequence[tuple[int, np.ndarray]]
) -> None:
    """New vectors for the catalog's examples, by pk (a model switch; inside the writer's transaction)."""
    conn.execute(query("example_vectors_in"))
    with conn.cursor() as cur, cur.copy(query("copy_example_vectors")) as writer:
        writer.set_types(["int8", "vector"])
        for row in vectors:
            writer.write_row(row)
    conn.execute(query("update_example_vectors"), {"catalog": catalog_id})
