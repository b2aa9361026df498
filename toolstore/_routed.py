"""The route statement's rows as a :class:`RouteResult`, without I/O: each row a :class:`RoutedTool` (its rank in
every signal, the sub-request that lifted it, the adjustments added after fusion), packed into the request's ``k``
and token budget with the exploration slot (``_explore``), or only the always-on tools when abstention says no tool
fits (``_abstain``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._abstain import from_rows
from ._explore import explore_pack
from ._filters import filter_params
from ._fusion import SIGNALS
from ._packing import Prompt, tool_tokens
from ._request import RouteRequest
from ._result import RoutedTool, RouteResult, Signals
from ._rows import tool_from_row

#: Statement columns (when present) added to the fused score after fusion, and their sign in ``adjustments``.
ADJUSTMENTS = (("part_boost", 1.0), ("anchor_boost", 1.0), ("avoid_penalty", -1.0))


def applied_filters(request: RouteRequest) -> dict[str, Any]:
    """The filters ``request`` routes under, by name (only those given)."""
    given = filter_params(request)
    return {name: list(values) for name, values in given.items() if name != "filtered" and values is not None}


def route_result(
    request: RouteRequest,
    rows: Sequence[Mapping[str, Any]],
    *,
    dense_used: bool,
    degraded_reason: str | None,
    fusion: Mapping[str, Any] | None = None,
    candidates: Sequence[RoutedTool] | None = None,
) -> RouteResult:
    """The statement's rows (by column name), packed into the request's ``k`` and token budget (with the
    exploration slot), counted in the request's format. ``candidates``: the rows already made
    :func:`fused_candidates` (and reranked), if they were."""
    candidates = fused_candidates(rows) if candidates is None else list(candidates)
    model, weights = request.abstain, request.fusion.weights
    abstention = None if model is None else from_rows(model, weights, request.fusion.k_rrf, rows, dense_used=dense_used)
    if abstention is not None and abstention.abstained:
        candidates = [c for c in candidates if c.always_on]
    fmt = request.fmt
    if request.token_budget is not None:
        candidates = [replace(c, tokens=tool_tokens(c.tool, fmt)) for c in candidates]
    packed, skipped, used, exploration = explore_pack(
        candidates, k=request.k, token_budget=request.token_budget, seed=request.seed, query=request.query, fmt=fmt
    )
    if request.token_budget is None:
        packed = [replace(c, tokens=tool_tokens(c.tool, fmt)) for c in packed]
        used = Prompt(fmt, packed).used
    return RouteResult(
        query=request.query,
        tools=packed,
        skipped=skipped,
        token_budget=request.token_budget,
        tokens_used=used,
        fmt=fmt,
        dense_used=dense_used,
        degraded_reason=degraded_reason or None,
        session=request.session,
        unresolved=list(request.unresolved),
        sub_requests=list(request.parts),
        fusion=dict(fusion or {}),
        filters=applied_filters(request),
        exploration=exploration,
        abstained=abstention is not None and abstention.abstained,
        abstention=abstention,
    )


def fused_candidates(rows: Sequence[Mapping[str, Any]]) -> list[RoutedTool]:
    """The statement's rows as RoutedTools in its order, the routed ones numbered (``fused_rank``)."""
    candidates = [routed_tool(row) for row in rows]
    ranks = iter(range(1, len(candidates) + 1))
    return [c if c.always_on else replace(c, fused_rank=next(ranks)) for c in candidates]


def routed_tool(row: Mapping[str, Any]) -> RoutedTool:
    """One row of the route statement as a RoutedTool."""
    signals = Signals(**{s: row[f"rank_{s}"] for s in SIGNALS})
    return RoutedTool(
        tool=tool_from_row(row),
        score=float(row["score"]),
        signals=signals,
        always_on=row["always_on"],
        exact=row["exact"],
        part=row["part"],
        part_score=None if row["part_score"] is None else float(row["part_score"]),
        adjustments={name: sign * float(row[name]) for name, sign in ADJUSTMENTS if row.get(name)},
        anchors=tuple(row.get("anchor_ids") or ()),
    )
