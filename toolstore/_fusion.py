"""How retrievers are fused: the signals, their weights, the RRF constant, and the defaults.

The fused score of a tool is ``sum_j w_j / (k_rrf + rank_j)`` over the signals that returned it. That sum is
computed in one place per side: ``sql/route.sql`` (the ``fused`` part) for route(), and
:meth:`toolstore._tune.CandidateTable.top` for tuning, which a test holds to the statement's results.

Annotations here are evaluated (no ``from __future__ import annotations``): see ``_models``.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import InvalidInputError
from ._input import MAX_OVERFETCH, MAX_WEIGHT

#: The retrievers, in the order the statement numbers them (1 name ... 5 intent).
SIGNALS = ("name", "description", "expansion", "dense", "intent")
#: The RRF constant: 5 beat the classic 60 on all three shared benchmarks (README, Quality).
DEFAULT_K_RRF = 5.0
#: Each retriever returns max(4 k, MIN_OVERFETCH) tools unless an over-fetch is given.
MIN_OVERFETCH = 40
#: Intent retrieval fetches this many nearest examples per over-fetched candidate ...
EXAMPLES_PER_CANDIDATE = 3
#: ... and a tool scores the sum of ``1 - distance`` over at most this many of its own.
NEIGHBOURS_PER_TOOL = 3


@dataclass(frozen=True)
class Fusion:
    """How retrievers are fused: weight per signal, the RRF constant and the over-fetch per retriever."""

    weights: Mapping[str, float]
    k_rrf: float = DEFAULT_K_RRF
    overfetch: int | None = None

    def depth(self, k: int) -> int:
        """Tools each retriever returns for a route of ``k`` tools."""
        return self.overfetch if self.overfetch is not None else max(4 * k, MIN_OVERFETCH)

    def as_dict(self) -> dict[str, Any]:
        return {"weights": dict(self.weights), "k_rrf": self.k_rrf, "overfetch": self.overfetch}


#: Every signal weighted 1.
UNIFORM = Fusion(weights=dict.fromkeys(SIGNALS, 1.0), k_rrf=DEFAULT_K_RRF)
#: What route() fuses with when the catalog has no tuned fusion (``toolstore tune``).
DEFAULT_FUSION = UNIFORM


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
    if not any(out.values()):
        raise InvalidInputError("every weight is 0: at least one retriever must be on")
    return out


def check_fusion(fusion: Fusion) -> Fusion:
    """Raise InvalidInputError unless ``k_rrf`` and ``overfetch`` are usable."""
    k_rrf = fusion.k_rrf
    if isinstance(k_rrf, bool) or not isinstance(k_rrf, (int, float)) or not 0 <= k_rrf <= MAX_WEIGHT:
        raise InvalidInputError(f"k_rrf must be a finite number from 0 to {MAX_WEIGHT:g}, got {k_rrf!r}")
    overfetch = fusion.overfetch
    if overfetch is not None and (
        isinstance(overfetch, bool) or not isinstance(overfetch, int) or not 1 <= overfetch <= MAX_OVERFETCH
    ):
        raise InvalidInputError(f"overfetch must be an integer from 1 to {MAX_OVERFETCH}, got {overfetch!r}")
    return fusion


def stored_fusion(settings: Mapping[str, Any]) -> Fusion:
    """The fusion a catalog's settings hold (``toolstore tune`` stores it), or the default."""
    tuned = settings.get("fusion") if settings else None
    if not tuned:
        return DEFAULT_FUSION
    return Fusion(
        weights=check_weights(tuned.get("weights", {})),
        k_rrf=float(tuned.get("k_rrf", DEFAULT_K_RRF)),
        overfetch=tuned.get("overfetch"),
    )
