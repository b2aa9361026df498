"""The tests' one fusion oracle: weighted RRF written out plainly, to hold the route statement and the tuner's
vectorised fusion (``toolstore._candidates.CandidateTable``) to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolstore._candidates import Transitions, signal_ranks
from toolstore._fusion import SIGNALS, Fusion
from toolstore._lists import Lists, ToolIndex


def rrf(ranks: Mapping[str, Mapping[str, int]], weights: Mapping[str, float], k_rrf: float) -> dict[str, float]:
    """``sum_j w_j / (k_rrf + rank_j)`` per tool, summed in signal order as the statement sums; signals weighted 0
    (or not in ``weights``) contribute nothing."""
    scores: dict[str, float] = {}
    for signal in SIGNALS:
        weight = weights.get(signal, 0.0)
        if weight > 0:
            for tool_id, rank in ranks.get(signal, {}).items():
                scores[tool_id] = scores.get(tool_id, 0.0) + weight / (k_rrf + rank)
    return scores


def ranked(lists: Mapping[str, Sequence[str]]) -> dict[str, dict[str, int]]:
    """Ranked id lists as {signal: {id: 1-based rank}}."""
    return {signal: {t: r for r, t in enumerate(ids, start=1)} for signal, ids in lists.items()}


def route_ids(
    lists: Lists, tools: ToolIndex, fusion: Fusion, *, k: int = 10, transitions: Transitions | None = None
) -> list[str]:
    """The ids ``route(lists.query, k=k)`` returns under ``fusion`` (no filters, no token budget): always-on tools
    first, then exact matches, then by fused score (compared at 1e-9; with ``fusion.split``, plus split times the
    tool's best sum in one sub-request), ties by the database's id order.
    ``transitions``: the catalog's transition counts, for the ``transition`` signal."""
    depth = fusion.depth(k)
    scores = rrf(dict(zip(SIGNALS, signal_ranks(lists, tools, depth, transitions))), fusion.weights, fusion.k_rrf)
    if fusion.split > 0 and lists.parts:  # plus split x the best sum in one sub-request
        sums = [
            rrf(dict(zip(SIGNALS, signal_ranks(p, tools, depth))), fusion.weights, fusion.k_rrf) for p in lists.parts
        ]
        for t in set().union(*sums):
            scores[t] = scores.get(t, 0.0) + fusion.split * max(s.get(t, 0.0) for s in sums)

    def key(t: str) -> tuple[bool, float, int]:
        return (t not in lists.exact, -round(scores.get(t, 0.0) * 1e9), tools.position[t])

    top = sorted(scores, key=key)[:depth]
    extra = (lists.exact | tools.always_on) - set(top)
    picked = sorted([*top, *extra], key=key)
    ordered = [t for t in picked if t in tools.always_on] + [t for t in picked if t not in tools.always_on]
    n_on = sum(1 for t in ordered if t in tools.always_on)
    return ordered[: n_on + k]
