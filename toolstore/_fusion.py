"""How retrievers are fused: the signals, their weights, the RRF constant, and the defaults.

The fused score of a tool is ``sum_j w_j / (k_rrf + rank_j)`` over the signals that returned it for the request,
plus ``split`` times the best such sum the tool gets in one sub-request of a compound request (``_split``). That
score is computed in one place per side: ``sql/route.sql`` (the ``fused`` part) for route(), and
:meth:`toolstore._candidates.CandidateTable.top` for tuning, which a test holds to the statement's results.

Annotations here are evaluated (no ``from __future__ import annotations``): see ``_models``.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ._errors import InvalidInputError
from ._input import MAX_OVERFETCH, MAX_WEIGHT

#: The signals, in the order the statement numbers them (1 name ... 8 context): five retrievers over the request,
#: then three over the conversation, whose lists are empty without a session or messages.
SIGNALS = ("name", "description", "expansion", "dense", "intent", "recent", "transition", "context")
#: The retrievers over the request itself: at least one must be on.
REQUEST_SIGNALS = SIGNALS[:5]
#: The RRF constant: 5 beat the classic 60 on all three shared benchmarks (docs/QUALITY.md).
DEFAULT_K_RRF = 5.0
#: Each retriever returns max(4 k, MIN_OVERFETCH) tools unless an over-fetch is given.
MIN_OVERFETCH = 40
#: Intent retrieval fetches this many nearest examples per over-fetched candidate (80 at k 10; 3 took about 8% more
#: of the 10k route statement's backend CPU for the same train quality: bench/PROFILE.md, "The intent depth") ...
EXAMPLES_PER_CANDIDATE = 2
#: ... and a tool scores the sum of ``1 - distance`` over at most this many of its own.
NEIGHBOURS_PER_TOOL = 3
#: ``recent``: the session's last RECENT_CALLS calls; a tool scores the sum of RECENT_DECAY ** d over its calls,
#: d calls back (0 = the latest).
RECENT_CALLS = 5
RECENT_DECAY = 0.6
#: ``transition``: tools that followed the last TRANSITION_CALLS calls in the catalog's logged sessions; a tool
#: scores the sum over those calls A (d back) of RECENT_DECAY ** d * n(A, tool) / (n(A) + TRANSITION_SMOOTHING).
#: Following only the latest call beat 2 and 3 on bfcl_sessions' train split.
TRANSITION_CALLS = 1
TRANSITION_SMOOTHING = 1.0
#: ``context``: intent retrieval (as ``intent``) with the request's vector mixed with the earlier turns':
#: normalize(q + CONTEXT_MIX * sum_j CONTEXT_DECAY ** j * e_j) over the last CONTEXT_TURNS earlier turns (unit
#: vectors, j = 0 the turn just before).
CONTEXT_TURNS = 3
CONTEXT_MIX = 0.5
CONTEXT_DECAY = 0.5
#: User turns of a message list route() reads by default (the request and the turns before it).
DEFAULT_TURNS = 4
#: How much a tool's best fused score in one sub-request of a compound request adds to its fused score (0: requests
#: are never split). Chosen on the train splits of seal_tools and metatool (docs/QUALITY.md); ``tune`` learns it.
DEFAULT_SPLIT = 1.0
#: Avoid-when: a tool whose ``avoid_when`` text holds a fraction f of the request's lexemes loses ``avoid * f`` of its
#: fused score (0 turns it off, 1 removes a tool whose avoid-when text holds the whole request). Relative, so it means
#: the same under any weights and k_rrf. 0.5: a request wholly about a tool's avoid-when case halves its score, about
#: what drops a tool ranked first by every retriever to the level of one ranked fifth (k_rrf 5), while one word in
#: common with a four-word request costs an eighth; ``toolstore tune`` fits it where tools have avoid-when text.
DEFAULT_AVOID = 0.5


@dataclass(frozen=True)
class Fusion:
    """How retrievers are fused: weight per signal, the RRF constant, the over-fetch per retriever, the weight of
    sub-requests (``split``) and of the avoid-when penalty (``avoid``)."""

    weights: Mapping[str, float]
    k_rrf: float = DEFAULT_K_RRF
    overfetch: int | None = None
    split: float = DEFAULT_SPLIT
    avoid: float = DEFAULT_AVOID

    def depth(self, k: int) -> int:
        """Tools each retriever returns for a route of ``k`` tools."""
        return self.overfetch if self.overfetch is not None else max(4 * k, MIN_OVERFETCH)

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "k_rrf": self.k_rrf,
            "overfetch": self.overfetch,
            "split": self.split,
            "avoid": self.avoid,
        }


#: Every signal weighted 1.
UNIFORM = Fusion(weights=dict.fromkeys(SIGNALS, 1.0), k_rrf=DEFAULT_K_RRF)
#: What route() fuses with when the catalog has no tuned fusion (``toolstore tune``): the five retrievers weighted 1;
#: transitions 1, context 0.5 and recent 0 (recent lowered nDCG@10 at every weight tried on bfcl_sessions' train
#: split; ``tune`` turns it on where it helps). Without a conversation the last three have nothing to rank, so a
#: route without one ranks as uniform weights do.
DEFAULT_FUSION = Fusion(
    weights={**dict.fromkeys(SIGNALS, 1.0), "recent": 0.0, "transition": 1.0, "context": 0.5}, k_rrf=DEFAULT_K_RRF
)


def rrf(weight: Any, rank: Any, k_rrf: float) -> Any:
    """One signal's term of a fused score, ``weight / (k_rrf + rank)`` (``sql/route.sql``'s, for a rank from 1): the one
    Python spelling, for a number or a numpy array of ranks (``inf``: not returned, 0), which tuning's fusion
    (``_candidates``), abstention's evidence (``_abstain``) and ``RouteResult.explain()`` (``_explain``) share."""
    return weight / (k_rrf + rank)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Complete (from the default) and validate a weights mapping: known signal names, finite, non-negative."""
    if not isinstance(weights, Mapping):
        raise InvalidInputError(f"weights must be a mapping of signal -> weight, got {type(weights).__name__}")
    unknown = sorted(set(weights) - set(SIGNALS))
    if unknown:
        raise InvalidInputError(f"unknown signal(s) in weights: {', '.join(unknown)}; known: {', '.join(SIGNALS)}")
    out = dict(DEFAULT_FUSION.weights)
    for name, value in weights.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_WEIGHT:
            raise InvalidInputError(
                f"weight for {name!r} must be a finite number from 0 to {MAX_WEIGHT:g}, got {value!r}"
            )
        out[name] = float(value)
    if not any(out[s] for s in REQUEST_SIGNALS):
        raise InvalidInputError(
            f"every weight of {', '.join(REQUEST_SIGNALS)} is 0: at least one retriever of the request must be on"
        )
    return out


def check_fusion(fusion: Fusion) -> Fusion:
    """``fusion`` with its weights completed (:func:`check_weights`); InvalidInputError unless ``k_rrf``,
    ``overfetch``, ``split`` and ``avoid`` are usable."""
    if not isinstance(fusion, Fusion):  # set_abstain(model, fusion={...}): an AttributeError out of it
        raise InvalidInputError(f"fusion must be a toolstore.Fusion, got {type(fusion).__name__}")
    k_rrf = fusion.k_rrf
    if isinstance(k_rrf, bool) or not isinstance(k_rrf, (int, float)) or not 0 <= k_rrf <= MAX_WEIGHT:
        raise InvalidInputError(f"k_rrf must be a finite number from 0 to {MAX_WEIGHT:g}, got {k_rrf!r}")
    overfetch = fusion.overfetch
    if overfetch is not None and (
        isinstance(overfetch, bool) or not isinstance(overfetch, int) or not 1 <= overfetch <= MAX_OVERFETCH
    ):
        raise InvalidInputError(f"overfetch must be an integer from 1 to {MAX_OVERFETCH}, got {overfetch!r}")
    split = fusion.split
    if isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 <= split <= MAX_WEIGHT:
        raise InvalidInputError(f"split must be a finite number from 0 to {MAX_WEIGHT:g}, got {split!r}")
    avoid = fusion.avoid
    if isinstance(avoid, bool) or not isinstance(avoid, (int, float)) or not 0 <= avoid <= 1:
        raise InvalidInputError(f"avoid must be a number from 0 to 1, got {avoid!r}")
    return replace(fusion, weights=check_weights(fusion.weights), split=float(split), avoid=float(avoid))


def stored_fusion(settings: Mapping[str, Any]) -> Fusion:
    """The fusion a catalog's settings hold (``toolstore tune`` stores it), or the default."""
    tuned = settings.get("fusion") if settings else None
    if not tuned:
        return DEFAULT_FUSION
    return Fusion(
        weights=check_weights(tuned.get("weights", {})),
        k_rrf=float(tuned.get("k_rrf", DEFAULT_K_RRF)),
        overfetch=tuned.get("overfetch"),
        split=float(tuned.get("split", DEFAULT_SPLIT)),
        avoid=float(tuned.get("avoid", DEFAULT_AVOID)),
    )


def top_columns(group: np.ndarray, score: np.ndarray, position: np.ndarray, k: int) -> np.ndarray:
    """Column index of each row's first ``k`` candidates in the route statement's order (client-side fusion,
    ``_candidates``): ``group`` first (exact matches, always-on tools; -1: absent, returned as -1), then the score at
    1e-9, then the id (``position``: its rank among the ids). Exactly among a preselection of ``k + 6`` columns by a
    float key where that cannot change the answer (scores under 8, no tie at the cut), else among all of them."""
    n, pre = score.shape[1], min(score.shape[1], k + 6)

    def exact(cols: np.ndarray) -> np.ndarray:
        g, sc, pos = (np.take_along_axis(a, cols, axis=1) for a in (group, score, position))
        return np.take_along_axis(cols, np.lexsort((pos, -np.round(sc * 1e9), -g), axis=1)[:, :k], axis=1)

    top = None
    if pre < n and score.max(initial=0.0) < 8.0:  # under 8 the key orders the groups first
        rough = group * 16.0 + np.round(score * 1e9) / 1e9
        part = np.argpartition(-rough, pre, axis=1)
        top = exact(part[:, :pre])
        last = top[:, -1:]
        tied = np.take_along_axis(rough, part[:, pre : pre + 1], axis=1) >= np.take_along_axis(rough, last, axis=1)
        if (tied & (np.take_along_axis(group, last, axis=1) >= 0)).any():
            top = None  # a tie at the cut left out a column that its id may put in
    if top is None:
        top = exact(np.indices(score.shape)[1])
    return np.where(np.take_along_axis(group, top, axis=1) >= 0, top, -1)


def override(
    fusion: Fusion,
    *,
    weights: Mapping[str, float] | None = None,
    k_rrf: float | None = None,
    overfetch: int | None = None,
    split: float | None = None,
    avoid: float | None = None,
) -> Fusion:
    """``fusion`` with the given parts replaced (None keeps a part)."""
    return replace(
        fusion,
        weights=fusion.weights if weights is None else check_weights(weights),
        k_rrf=fusion.k_rrf if k_rrf is None else k_rrf,
        overfetch=fusion.overfetch if overfetch is None else overfetch,
        split=fusion.split if split is None else split,
        avoid=fusion.avoid if avoid is None else avoid,
    )
