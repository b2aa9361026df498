"""The reranker hook (no I/O): which fused candidates a reranker sees, what it must return, and the new order.

``route(..., reranker=f)``: ``f(query, candidates) -> scores`` is called once per route with the fused top
``k * rerank_depth`` routed candidates (:class:`RoutedTool`, best first; always-on tools and exact name matches are
not sent: they keep their places) and returns one finite number per candidate, higher is better. Those candidates
are reordered by score (stable: ties keep the fused order) before packing; the rest follow in fused order.

The contract when it goes wrong: a reranker that *raises* is treated like a failed embedder: the route is served in
fused order and ``degraded_reason`` says why (a remote reranker being down must not take routing down). A reranker
that *returns* something unusable -- not a sequence, the wrong number of scores, a non-number, NaN or infinity,
or a coroutine to a synchronous store -- is a bug in the caller's code: InvalidInputError naming it.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from ._errors import InvalidInputError, redact
from ._result import RoutedTool

#: route()'s default ``rerank_depth``: the reranker sees the fused top ``k * rerank_depth`` candidates.
DEFAULT_RERANK_DEPTH = 3
MAX_RERANK_DEPTH = 50
#: What a reranker is: ``(query, candidates) -> scores`` (a coroutine function too, with AsyncToolStore).
Reranker = Callable[[str, list[RoutedTool]], "Sequence[float] | Awaitable[Sequence[float]]"]


def check_reranker(reranker: object, depth: object) -> int:
    """The depth the reranker sees (``DEFAULT_RERANK_DEPTH`` when ``depth`` is None); InvalidInputError unless
    ``reranker`` is None or callable and ``depth`` None or an integer in range, given only with a reranker."""
    if reranker is not None and not callable(reranker):
        raise InvalidInputError(f"reranker must be a callable (query, candidates) -> scores, got {reranker!r}")
    if depth is None:
        return DEFAULT_RERANK_DEPTH
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_RERANK_DEPTH:
        raise InvalidInputError(f"rerank_depth must be an integer from 1 to {MAX_RERANK_DEPTH}, got {depth!r}")
    if reranker is None:
        raise InvalidInputError("rerank_depth is only used with a reranker (reranker=f)")
    return depth


def pool_positions(candidates: Sequence[RoutedTool], size: int) -> list[int]:
    """Where, in ``candidates`` (the statement's order), the first ``size`` rerankable candidates are: routed
    (not always-on) and not exact matches."""
    positions = [i for i, c in enumerate(candidates) if not c.always_on and not c.exact]
    return positions[:size]


def check_scores(scores: object, count: int) -> list[float]:
    """The reranker's answer as floats, one per candidate; InvalidInputError naming what is wrong."""
    if inspect.isawaitable(scores):
        close = getattr(scores, "close", None)
        if close is not None:
            close()  # never awaited: close it so Python does not warn
        raise InvalidInputError("reranker returned an awaitable: an async reranker needs AsyncToolStore")
    if isinstance(scores, (str, bytes, dict)) or not hasattr(scores, "__len__") or not hasattr(scores, "__iter__"):
        raise InvalidInputError(f"reranker must return a sequence of scores, got {type(scores).__name__}")
    values = list(scores)  # type: ignore[call-overload]
    if len(values) != count:
        raise InvalidInputError(f"reranker returned {len(values)} scores for {count} candidates")
    out: list[float] = []
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidInputError(f"reranker score #{i + 1} is not a number: {value!r}")
        if not math.isfinite(float(value)):
            raise InvalidInputError(f"reranker score #{i + 1} is not finite: {value!r}")
        out.append(float(value))
    return out


def reorder(candidates: Sequence[RoutedTool], positions: Sequence[int], scores: Sequence[float]) -> list[RoutedTool]:
    """``candidates`` with those at ``positions`` (the pool) sorted by ``scores`` (descending, ties in fused order)
    in the same places, each marked with its reranked rank (on ``fused_rank``'s scale: the ``fused_rank`` of the place
    it takes, so an exact match ahead of the pool counts in both) and score."""
    order = sorted(range(len(positions)), key=lambda j: -scores[j])
    out = list(candidates)
    for place, j in zip(positions, order):
        rank = candidates[place].fused_rank
        out[place] = replace(candidates[positions[j]], rerank_rank=rank, rerank_score=scores[j])
    return out


def rerank_failed(exc: BaseException) -> str:
    """The degraded reason when the reranker raised (credentials in its message redacted: a remote reranker's client
    may quote its URL with a key)."""
    return redact(f"reranker failed ({type(exc).__name__}: {exc}): fused order kept")


def rerank_summary(depth: int, pool: int, *, failed: bool) -> dict[str, Any]:
    """What ``RouteResult.rerank`` says: the depth asked for, the candidates sent, whether the order was applied."""
    return {"depth": depth, "candidates": pool, "applied": not failed}
