"""route(): one SQL statement fuses five retrievers by weighted RRF; packing happens here, client-side."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from ._catalog import CatalogInfo, check_model, embed_cached, tool_from_row
from ._embedders.base import Embedder
from ._errors import InvalidInputError
from ._models import SIGNALS, RoutedTool, RouteResult, Signals
from ._packing import pack, tool_tokens
from ._sql import query
from ._text import query_identifiers, query_text

DEFAULT_WEIGHTS: dict[str, float] = {s: 1.0 for s in SIGNALS}
DEFAULT_K_RRF = 5.0  # measured on the shared benchmarks (README, Quality): beats the classic 60 on all three
MIN_OVERFETCH = 40
EXAMPLES_PER_CANDIDATE = 3  # intent neighbours fetched per over-fetched candidate
NEIGHBOURS_PER_TOOL = 3  # at most this many neighbours of one tool are summed


@dataclass(frozen=True)
class Fusion:
    """How retrievers are fused: weight per signal, the RRF constant and the over-fetch per retriever."""

    weights: Mapping[str, float]
    k_rrf: float = DEFAULT_K_RRF
    overfetch: int | None = None

    def depth(self, k: int) -> int:
        return self.overfetch if self.overfetch is not None else max(4 * k, MIN_OVERFETCH)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Complete and validate a weights mapping: known signal names, finite, non-negative."""
    if not isinstance(weights, Mapping):
        raise InvalidInputError(f"weights must be a mapping of signal -> weight, got {type(weights).__name__}")
    unknown = sorted(set(weights) - set(SIGNALS))
    if unknown:
        raise InvalidInputError(f"unknown signal(s) in weights: {', '.join(unknown)}; known: {', '.join(SIGNALS)}")
    out = dict(DEFAULT_WEIGHTS)
    for name, value in weights.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InvalidInputError(f"weight for {name!r} must be a finite number >= 0, got {value!r}")
        out[name] = float(value)
    if not any(out.values()):
        raise InvalidInputError("every weight is 0: at least one retriever must be on")
    return out


def catalog_fusion(info: CatalogInfo) -> Fusion:
    """The catalog's tuned fusion (``toolstore tune``) or the defaults."""
    tuned = info.settings.get("fusion") if info.settings else None
    if not tuned:
        return Fusion(weights=dict(DEFAULT_WEIGHTS))
    return Fusion(
        weights=check_weights(tuned.get("weights", {})),
        k_rrf=float(tuned.get("k_rrf", DEFAULT_K_RRF)),
        overfetch=tuned.get("overfetch"),
    )


def _check_ids(name: str, values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise InvalidInputError(f"{name} must be a list of strings")
    return list(values)


def statement_params(
    info: CatalogInfo,
    raw_query: str,
    qvec: np.ndarray | None,
    fusion: Fusion,
    *,
    k: int,
    token_budget: int | None = None,
    allow: Sequence[str] | None = None,
    block: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The bound parameters of the ``route`` statement."""
    n = fusion.depth(k)
    w = fusion.weights
    return {
        "catalog": info.id,
        "dim": info.embed_dim,
        "query_text": query_text(raw_query),
        "identifiers": query_identifiers(raw_query),
        "qvec": qvec,
        "n": n,
        "n_examples": n * EXAMPLES_PER_CANDIDATE,
        "per_tool": NEIGHBOURS_PER_TOOL,
        "k_rrf": fusion.k_rrf,
        "w_name": w["name"],
        "w_description": w["description"],
        "w_expansion": w["expansion"],
        "w_dense": w["dense"] if qvec is not None else 0.0,
        "w_intent": w["intent"] if qvec is not None else 0.0,
        "allow": _check_ids("allow", allow),
        "block": _check_ids("block", block),
        "categories": _check_ids("categories", categories),
        "filtered": allow is not None or block is not None or categories is not None,
        # Without a budget only the top k can be packed; with one, skipped tools leave room for later ones.
        "limit": n if token_budget is not None else k,
    }


class QueryVectors:
    """Query embeddings: an in-process LRU, then (for embedders that ask for it) the Postgres cache."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._lru: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conn: psycopg.Connection[Any], embedder: Embedder, text: str) -> np.ndarray:
        key = (embedder.model, text)
        with self._lock:
            if key in self._lru:
                self._lru.move_to_end(key)
                return self._lru[key]
        if embedder.cache_queries:
            vector = embed_cached(conn, embedder, [text])[0]
        else:
            vector = embedder.embed(text)
        with self._lock:
            self._lru[key] = vector
            while len(self._lru) > self.size:
                self._lru.popitem(last=False)
        return vector


def query_vector(
    conn: psycopg.Connection[Any],
    vectors: QueryVectors,
    info: CatalogInfo,
    embedder: Embedder | None,
    query: str,
    fusion: Fusion,
) -> tuple[np.ndarray | None, str | None]:
    """The query embedding, or None and the reason dense and intent retrieval are off for this call."""
    if fusion.weights["dense"] == 0 and fusion.weights["intent"] == 0:
        return None, None
    if embedder is None:
        return None, "no embedder configured: lexical retrieval only"
    if info.embed_model is None:
        return None, f"catalog {info.name!r} has no embeddings yet: lexical retrieval only"
    check_model(info, embedder)
    try:
        return vectors.get(conn, embedder, query), None
    except Exception as exc:  # provider down, timeout, bad response: degrade, and say so
        return None, f"embedder failed ({type(exc).__name__}: {exc}): lexical retrieval only"


def route(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    query_string: str,
    *,
    embedder: Embedder | None,
    vectors: QueryVectors,
    fusion: Fusion,
    k: int = 8,
    token_budget: int | None = None,
    allow: Sequence[str] | None = None,
    block: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> RouteResult:
    """Route one request; see ``ToolStore.route`` for the meaning of each argument."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"k must be a positive integer, got {k!r}")
    if token_budget is not None and (
        isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 0
    ):
        raise InvalidInputError(f"token_budget must be a non-negative integer or None, got {token_budget!r}")
    if fusion.k_rrf < 0 or not math.isfinite(fusion.k_rrf):
        raise InvalidInputError(f"k_rrf must be a finite number >= 0, got {fusion.k_rrf!r}")
    if fusion.overfetch is not None and (not isinstance(fusion.overfetch, int) or fusion.overfetch < 1):
        raise InvalidInputError(f"overfetch must be a positive integer, got {fusion.overfetch!r}")
    query_text(query_string)  # validates before any embedding work
    qvec, reason = query_vector(conn, vectors, info, embedder, query_string, fusion)
    params = statement_params(
        info,
        query_string,
        qvec,
        fusion,
        k=k,
        token_budget=token_budget,
        allow=allow,
        block=block,
        categories=categories,
    )
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("route"), params).fetchall()
    candidates = [_routed(row) for row in rows]
    if token_budget is not None:
        candidates = [replace(c, tokens=tool_tokens(c.tool)) for c in candidates]
    packed, skipped, used = pack(candidates, k=k, token_budget=token_budget)
    if token_budget is None:
        packed = [replace(c, tokens=tool_tokens(c.tool)) for c in packed]
        used = sum(c.tokens for c in packed)
    return RouteResult(
        query=query_string,
        tools=packed,
        skipped=skipped,
        token_budget=token_budget,
        tokens_used=used,
        dense_used=qvec is not None,
        degraded_reason=reason,
    )


def _routed(row: dict[str, Any]) -> RoutedTool:
    signals = Signals(
        name=row["rank_name"],
        description=row["rank_description"],
        expansion=row["rank_expansion"],
        dense=row["rank_dense"],
        intent=row["rank_intent"],
    )
    return RoutedTool(
        tool=tool_from_row(row),
        score=float(row["score"]),
        signals=signals,
        always_on=row["always_on"],
        exact=row["exact"],
    )
