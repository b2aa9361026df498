"""Calibrating abstention for one catalog: the evidence (``_abstain.features``) of requests the catalog serves and of
requests it does not, from each retriever's list fetched once per request (``_candidates``, a request's own intent
example never matched), and the logistic model fitted on them (``_abstain.fit``). ``tune(negatives=...)`` runs it
after choosing the fusion, so the evidence is read under the fusion route() will use.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._abstain import FEATURES, AbstainModel, error_rates, evidence_depth, features, fit, load_negatives
from ._candidates import signal_ranks
from ._errors import InvalidInputError
from ._fusion import REQUEST_SIGNALS, Fusion
from ._lists import ExpansionLines, ToolIndex, fetch_lists, load_tool_index
from ._sql import query
from ._text import check_query

if TYPE_CHECKING:
    from ._store import ToolStore

#: Folds of the cross-validated error rates a calibration reports.
FOLDS = 5


def evidence(
    store: ToolStore,
    requests: Sequence[str],
    fusion: Fusion,
    tools: ToolIndex | None = None,
    lines: ExpansionLines | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each request's :data:`FEATURES` as route(abstain=True) computes them under ``fusion`` (one row per request),
    and whether it names a tool verbatim (never abstained on); ``lines``: the expansions' lines that copy requests
    (:func:`_lists.expansion_lines`), when already read."""
    tools = tools or load_tool_index(store)
    with store.connection() as conn:
        fields = [r[0] for r in conn.execute(query("eval_abstain_fields"), {"catalog": store.info().id})]
    lexical = [REQUEST_SIGNALS[f - 1] for f in fields]
    rows, exact = [], []
    depth = evidence_depth(fusion.overfetch)
    for lists in fetch_lists(store, list(requests), depth=depth, tools=tools, lines=lines):
        ranks = signal_ranks(lists, tools, depth)[: len(REQUEST_SIGNALS)]
        candidates = sorted(set().union(*ranks))
        ranked = [(t, {s: r.get(t) for s, r in zip(REQUEST_SIGNALS, ranks)}) for t in candidates]
        # as the statement: a retriever weighted 0 does not search
        on = fusion.weights
        dense = None if lists.dense_distance is None or not on["dense"] else 1 - lists.dense_distance
        intent = 1 - lists.neighbours[0][1] if lists.neighbours and on["intent"] else None
        available = lexical + [s for s, sim in (("dense", dense), ("intent", intent)) if sim is not None]
        _, values = features(ranked, fusion.weights, fusion.k_rrf, available, dense, intent)
        rows.append([values[f] for f in FEATURES])
        exact.append(bool(lists.exact))
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)), np.asarray(exact, dtype=bool)


def negative_requests(
    negatives: str | os.PathLike[str] | Sequence[str], known: set[str], served: Sequence[str]
) -> list[str]:
    """The unserved requests of a negatives file (``_abstain.load_negatives``) or list; InvalidInputError when one
    names a tool of this catalog as relevant, is also a served request, or is not a usable request."""
    if isinstance(negatives, (str, os.PathLike)):
        loaded = load_negatives(negatives)  # each said by its file and line
    elif isinstance(negatives, (list, tuple)) and all(isinstance(n, str) for n in negatives):
        loaded = [(n, (), f"negative request #{i}") for i, n in enumerate(negatives, start=1)]
    else:
        raise InvalidInputError("negatives must be a file path or a list of request strings")
    texts = []
    both = set(served)
    for text, named, where in loaded:
        check_query(text, where)
        mine = [t for t in named if t in known]
        if mine:
            raise InvalidInputError(
                f"{where} ({text[:60]!r}) names tool(s) of this catalog as relevant ({', '.join(mine)}):"
                " negatives must be requests no tool of the catalog fits"
            )
        if text in both:
            raise InvalidInputError(f"{where} ({text[:60]!r}) is also one of the served examples")
        texts.append(text)
    return texts


def calibrate(
    store: ToolStore,
    served: Sequence[str],
    unserved: Sequence[str],
    fusion: Fusion,
    *,
    seed: int = 0,
    lines: ExpansionLines | None = None,
) -> tuple[AbstainModel, dict[str, Any]]:
    """The catalog's abstention model fitted on ``served`` and ``unserved`` requests (those naming a tool verbatim
    left out: route() never abstains on them), and a report: counts, error rates on these requests and under
    :data:`FOLDS`-fold cross-validation. ``lines``: as :func:`evidence`'s, for both."""
    tools = load_tool_index(store)
    pos, pos_exact = evidence(store, served, fusion, tools, lines)
    neg, neg_exact = evidence(store, unserved, fusion, tools, lines)
    pos, neg = pos[~pos_exact], neg[~neg_exact]
    model = fit(pos, neg)
    rng = np.random.default_rng(seed)
    pos_fold, neg_fold = rng.permutation(len(pos)) % FOLDS, rng.permutation(len(neg)) % FOLDS
    wrong = {"false_abstain": 0.0, "false_accept": 0.0}
    if min(len(pos), len(neg)) >= 2 * FOLDS:
        for f in range(FOLDS):
            held = fit(pos[pos_fold != f], neg[neg_fold != f])
            rates = error_rates(held, pos[pos_fold == f], neg[neg_fold == f])
            wrong["false_abstain"] += rates["false_abstain"] * np.sum(pos_fold == f) / len(pos)
            wrong["false_accept"] += rates["false_accept"] * np.sum(neg_fold == f) / len(neg)
    report = {
        "model": model.as_dict(),
        "n_served": int(len(pos)),
        "n_unserved": int(len(neg)),
        "named_a_tool": int(pos_exact.sum() + neg_exact.sum()),
        "train": {k: round(v, 4) for k, v in error_rates(model, pos, neg).items()},
        "cv": {k: round(float(v), 4) for k, v in wrong.items()} if min(len(pos), len(neg)) >= 2 * FOLDS else None,
    }
    return model, report
