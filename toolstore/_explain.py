"""``RouteResult.explain()``: why each tool was routed, as JSON-ready data (no I/O).

Per tool: its final rank, each signal's rank, weight and RRF contribution ``weight / (k_rrf + rank)`` (their sum is
the fused score ``rrf``), the adjustments the statement added after fusion (``score = rrf + sum(adjustments)``),
the exact / always-on / explored flags and its rank before and after reranking. Per request: the fusion the
statement ran, the filters, the stage timings, degradation, exploration, reranking, and the slots the coverage
(``sub_requests``) and abstention (``abstention``) features fill.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._fusion import SIGNALS, rrf

if TYPE_CHECKING:
    from ._result import RoutedTool, RouteResult


def statement_fusion(params: Mapping[str, Any]) -> dict[str, Any]:
    """The fusion the ``route`` statement ran with ``params``: the weights as used (0 for a signal whose vector
    was not computed), the RRF constant, the sub-requests' weight as used (0: not split), the over-fetch per retriever
    and the fused rows fetched (``limit``)."""
    weights = {s: float(params[f"w_{s}"]) for s in SIGNALS}
    return {
        "weights": weights,
        "k_rrf": float(params["k_rrf"]),
        "split": float(params["w_split"]),
        "overfetch": params["n"],
        "limit": params["limit"],
    }


def contributions(tool: RoutedTool, weights: Any, k_rrf: float) -> dict[str, dict[str, Any]]:
    """Per signal of ``SIGNALS``: the tool's rank in it (None: not returned), its weight and RRF contribution."""
    out: dict[str, dict[str, Any]] = {}
    for signal in SIGNALS:
        rank = getattr(tool.signals, signal)
        weight = float(weights.get(signal, 0.0))
        out[signal] = {
            "rank": rank,
            "weight": weight,
            "contribution": 0.0 if rank is None else rrf(weight, rank, k_rrf),
        }
    return out


def explain_tool(tool: RoutedTool, rank: int | None, weights: Any, k_rrf: float) -> dict[str, Any]:
    """One tool's entry; ``rank``: its 1-based place among the packed routed tools (None: always-on or skipped)."""
    signals = contributions(tool, weights, k_rrf)
    return {
        "id": tool.tool.id,
        "rank": rank,
        "score": tool.score,
        "rrf": sum(s["contribution"] for s in signals.values()),
        "signals": signals,
        "adjustments": dict(tool.adjustments),
        "sub_request": tool.part,
        "exact": tool.exact,
        "always_on": tool.always_on,
        "explored": tool.explored,
        "fused_rank": tool.fused_rank,
        "rerank_rank": tool.rerank_rank,
        "rerank_score": tool.rerank_score,
        "tokens": tool.tokens,
    }


def explain_result(result: RouteResult) -> dict[str, Any]:
    """The whole explanation of ``result`` (see the module's docstring); every value is JSON-serialisable."""
    fusion = dict(result.fusion)
    weights = dict(fusion.get("weights", {}))
    k_rrf = float(fusion.get("k_rrf", 0.0))
    tools = []
    routed = 0
    for tool in result.tools:
        routed += 0 if tool.always_on else 1
        tools.append(explain_tool(tool, None if tool.always_on else routed, weights, k_rrf))
    return {
        "request": {
            "query": result.query,
            "fusion": {**fusion, "weights": weights},
            "filters": {name: _plain(value) for name, value in result.filters.items()},
            "timings_ms": dict(result.timings),
            "dense_used": result.dense_used,
            "degraded_reason": result.degraded_reason,
            "token_budget": result.token_budget,
            "tokens_used": result.tokens_used,
            "exploration": None if result.exploration is None else dict(result.exploration),
            "rerank": None if result.rerank is None else dict(result.rerank),
            "sub_requests": [_plain(part) for part in result.sub_requests],
            "abstention": None if result.abstention is None else _plain(result.abstention),
        },
        "tools": tools,
        "skipped": [explain_tool(tool, None, weights, k_rrf) for tool in result.skipped],
    }


def _plain(value: Any) -> Any:
    """``value`` with its mappings as dicts and its sequences as lists (what ``json.dumps`` takes)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if hasattr(value, "as_dict"):
        return _plain(value.as_dict())
    return value
