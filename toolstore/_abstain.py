"""Abstention: whether any tool fits a request, decided from how the retrievers agree on the best tools.

No single cosine threshold survives a change of catalog or model, so the evidence is mostly rank-based and read off
the fused candidates (:func:`features`): over the request's retrievers that could have returned anything
(``available``: a lexical field some tool has text in, dense and intent when they searched), with their weights,

- ``agreement``: the weight of the retrievers that rank the top tool within their top :data:`AGREE_RANK`, over the
  weight of all of them;
- ``strength``: the top tool's fused score over the most it could be (first in every available retriever);
- ``margin``: the top score minus the second's, on the same scale;
- ``dense_sim`` / ``intent_sim``: the nearest tool's and the nearest intent example's cosine similarity (0 when that
  retriever did not search): bounded, and only one feature among several.

Scores are recomputed from the request retrievers' ranks (conversation signals left out), each rank counted only
within :data:`EVIDENCE_DEPTH`, so route() (from the statement's rows) and calibration (from ``_candidates`` lists)
compute the same numbers. A logistic model (:class:`AbstainModel`) turns them into the probability that the request
is served; below its threshold route(abstain=True) abstains. A request that names a tool verbatim is never
abstained on. :data:`DEFAULT_ABSTAIN` (for the shipped embedding model; :data:`EXAMPLES_ABSTAIN` when the catalog
has intent examples) and :data:`RANK_ABSTAIN` (rank features only, for any other) were fitted by
``bench/abstain.py`` on the shared sets' train splits; ``toolstore tune --negatives`` fits one per catalog
(:func:`fit`), stored in its settings (:func:`stored_abstain`).

Annotations here are evaluated (see ``_models``).
"""

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import InvalidInputError
from ._fusion import REQUEST_SIGNALS, rrf
from ._input import MAX_QUERY_CHARS, check_at, json_lines, one_document, over_lines
from ._textfile import path_name, read_text_file

FEATURES = ("agreement", "strength", "margin", "dense_sim", "intent_sim")
#: A retriever agrees on the top tool when it ranks it within this many.
AGREE_RANK = 3
#: Ranks deeper than this are left out of the evidence's scores (route's smallest default over-fetch).
EVIDENCE_DEPTH = 40


def evidence_depth(overfetch: int | None) -> int:
    """How deep the evidence reads each retriever's list under a fusion's ``overfetch``: :data:`EVIDENCE_DEPTH`, or
    the over-fetch when it is shallower (the lists end there), for route() and calibration alike."""
    return EVIDENCE_DEPTH if overfetch is None else min(EVIDENCE_DEPTH, overfetch)


#: L2 penalty of the logistic fit (on the coefficients, not the intercept).
L2 = 1e-3
SETTINGS_KEY = "abstain"


@dataclass(frozen=True)
class AbstainModel:
    """P(served) = sigmoid(intercept + coef . features); abstain below ``threshold``. ``source``: ``default`` or
    ``default-rank``, ``default-examples`` (the shipped ones) or ``calibrated`` (fitted for the catalog by ``tune``)."""

    coef: tuple[float, ...]
    intercept: float
    threshold: float
    source: str = "default"

    def probability(self, values: Sequence[float]) -> float:
        z = self.intercept + sum(c * v for c, v in zip(self.coef, values))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def as_dict(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "coef": [round(c, 6) for c in self.coef],
            "intercept": round(self.intercept, 6),
            "threshold": round(self.threshold, 6),
            "source": self.source,
        }


#: The embedding model whose similarities :data:`DEFAULT_ABSTAIN` was fitted with (the shipped local model).
DEFAULT_EMBED_MODEL = "local/all-MiniLM-L6-v2"
#: Fitted by ``PYTHONPATH=. python bench/abstain.py`` on the train splits of metatool, seal_tools and gorilla_torch
#: (each catalog without intent examples, embedded with :data:`DEFAULT_EMBED_MODEL`; positives: a set's train
#: requests in its own catalog, negatives: the other sets' train requests in it). Its error rates on queries.jsonl,
#: held out set by set: README (Abstention). The three defaults were fitted on 2026-11-24, before the local model's
#: MatMuls were quantized to int8; a fresh run prints constants a little off them, and off the last run: seal_tools'
#: dense lists come from an HNSW graph pgvector builds at random.
DEFAULT_ABSTAIN = AbstainModel(coef=(1.4358, -0.4702, 0.0866, 5.9271, 0.0000), intercept=-2.9913, threshold=0.4418)
#: The same fit with each catalog holding its train split as intent examples (``bench/abstain.py --examples``, a
#: request never matching its own example): the default for a catalog with intent examples (the nearest example's
#: similarity is then the strongest evidence), embedded with :data:`DEFAULT_EMBED_MODEL`.
EXAMPLES_ABSTAIN = AbstainModel(
    coef=(1.7624, 1.4296, -0.4088, 2.6755, 9.1817), intercept=-7.6705, threshold=0.4810, source="default-examples"
)
#: The same fit on the rank features alone: the default for any other embedder, without one, and whenever dense
#: retrieval is down for a route (similarities mean nothing across models, and are 0 without a query vector).
RANK_ABSTAIN = AbstainModel(
    coef=(1.7177, 1.7032, -0.4333, 0.0000, 0.0000), intercept=-2.1599, threshold=0.4942, source="default-rank"
)


@dataclass(frozen=True)
class Abstention:
    """The evidence behind route(abstain=True)'s decision: the features, the probability that the request is served
    and the threshold it was held to, the tool the evidence is about (``top``), which model decided (its
    ``AbstainModel.source``: a shipped default, ``default``, ``default-examples`` or ``default-rank``, or
    ``calibrated``, the catalog's from ``tune(negatives=...)``) and, when the model was not asked, why (``reason``)."""

    abstained: bool
    probability: float
    threshold: float
    features: Mapping[str, float]
    top: str | None = None
    model: str = "default"
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "abstained": self.abstained,
            "probability": round(self.probability, 6),
            "threshold": round(self.threshold, 6),
            "features": {k: round(v, 6) for k, v in self.features.items()},
            "top": self.top,
            "model": self.model,
            "reason": self.reason,
        }


def features(
    candidates: Sequence[tuple[str, Mapping[str, int | None]]],
    weights: Mapping[str, float],
    k_rrf: float,
    available: Sequence[str],
    dense_sim: float | None,
    intent_sim: float | None,
) -> tuple[str | None, dict[str, float]]:
    """The top tool (None without any candidate) and the evidence :data:`FEATURES`, from each candidate's rank in the
    request's retrievers (``candidates``: tool id, signal -> rank or None) and the retrievers that could have returned
    anything (``available``)."""
    used = [s for s in REQUEST_SIGNALS if s in available and weights.get(s, 0.0) > 0]
    total = sum(weights[s] for s in used)
    best = rrf(total, 1, k_rrf) if total else 0.0  # first in every retriever used

    def score(ranks: Mapping[str, int | None]) -> float:
        out = 0.0
        for s in used:
            rank = ranks.get(s)
            if rank is not None and rank <= EVIDENCE_DEPTH:
                out += rrf(weights[s], rank, k_rrf)
        return out

    scored = sorted(((round(score(r) * 1e9), tool_id, r) for tool_id, r in candidates), key=lambda x: (-x[0], x[1]))
    scored = [x for x in scored if x[0] > 0]
    values = dict.fromkeys(FEATURES, 0.0)
    values["dense_sim"] = float(dense_sim) if dense_sim is not None else 0.0
    values["intent_sim"] = float(intent_sim) if intent_sim is not None else 0.0
    if not scored or not best:
        return None, values
    first, top, ranks = scored[0]
    second = scored[1][0] if len(scored) > 1 else 0
    agree = sum(weights[s] for s in used if (ranks.get(s) or AGREE_RANK + 1) <= AGREE_RANK)
    values["agreement"] = agree / total
    values["strength"] = first / 1e9 / best
    values["margin"] = (first - second) / 1e9 / best
    return top, values


def decide(model: AbstainModel, top: str | None, values: Mapping[str, float], *, exact: bool) -> Abstention:
    """The decision for one request (``exact``: it names a tool verbatim, so it is served whatever the evidence)."""
    p = model.probability([values[f] for f in FEATURES])
    if exact:
        return Abstention(False, p, model.threshold, dict(values), top, model.source, "the request names a tool")
    reason = None if top is not None else "no retriever returned a tool"
    return Abstention(p < model.threshold, p, model.threshold, dict(values), top, model.source, reason)


def check_model(model: AbstainModel) -> AbstainModel:
    """``model`` when it can decide (one finite coefficient per feature, a threshold from 0 to 1), else
    InvalidInputError."""
    if not isinstance(model, AbstainModel):
        raise InvalidInputError(f"abstain model must be an AbstainModel, got {type(model).__name__}")
    numbers = (*model.coef, model.intercept, model.threshold)
    if len(model.coef) != len(FEATURES) or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in numbers):
        raise InvalidInputError(f"abstain model needs {len(FEATURES)} finite coefficients ({', '.join(FEATURES)})")
    if not 0 <= model.threshold <= 1:
        raise InvalidInputError(f"abstain model's threshold must be from 0 to 1, got {model.threshold!r}")
    return model


def from_rows(
    model: AbstainModel,
    weights: Mapping[str, float],
    k_rrf: float,
    rows: Sequence[Mapping[str, Any]],
    *,
    dense_used: bool = True,
) -> Abstention:
    """The decision from the route statement's rows: their ``exact`` column, and the evidence columns every row
    carries (``evidence_fields``: lexical fields numbered from 1, ``evidence_dense``, ``evidence_intent``, and
    ``evidence_candidates``: [id, rank in each of :data:`REQUEST_SIGNALS`] of every tool at most
    :data:`EVIDENCE_DEPTH` deep in one of them, the candidates calibration ranks too). Without a query vector
    (``dense_used`` False) a model that weighs similarities gives way to :data:`RANK_ABSTAIN`;
    :data:`DEFAULT_ABSTAIN` gives way to :data:`EXAMPLES_ABSTAIN` when intent examples were searched."""
    if not dense_used and uses_similarity(model):
        model = RANK_ABSTAIN
    fields = (rows[0]["evidence_fields"] or []) if rows else []
    dense = rows[0]["evidence_dense"] if rows else None
    intent = rows[0]["evidence_intent"] if rows else None
    if model is DEFAULT_ABSTAIN and intent is not None:
        model = EXAMPLES_ABSTAIN
    available = [REQUEST_SIGNALS[f - 1] for f in fields]
    available += [s for s, sim in (("dense", dense), ("intent", intent)) if sim is not None]
    candidates = (rows[0]["evidence_candidates"] or []) if rows else []
    ranked = [(c[0], dict(zip(REQUEST_SIGNALS, c[1:]))) for c in candidates]
    top, values = features(ranked, weights, k_rrf, available, dense, intent)
    return decide(model, top, values, exact=any(r["exact"] for r in rows))


def uses_similarity(model: AbstainModel) -> bool:
    return any(model.coef[FEATURES.index(f)] for f in ("dense_sim", "intent_sim"))


def stored_abstain(settings: Mapping[str, Any], embed_model: str | None = DEFAULT_EMBED_MODEL) -> AbstainModel:
    """The catalog's calibrated model (``tune --negatives`` stores it), else :data:`DEFAULT_ABSTAIN` for a catalog
    embedded with :data:`DEFAULT_EMBED_MODEL` and :data:`RANK_ABSTAIN` for any other (or none)."""
    data = settings.get(SETTINGS_KEY) if settings else None
    if not data:
        return DEFAULT_ABSTAIN if embed_model == DEFAULT_EMBED_MODEL else RANK_ABSTAIN
    if list(data.get("features", ())) != list(FEATURES) or len(data.get("coef", ())) != len(FEATURES):
        raise InvalidInputError(
            f"the catalog's stored abstention model uses features {data.get('features')!r}, this toolstore "
            f"{list(FEATURES)!r}: run `toolstore tune --negatives` again"
        )
    return AbstainModel(
        coef=tuple(float(c) for c in data["coef"]),
        intercept=float(data["intercept"]),
        threshold=float(data["threshold"]),
        source=str(data.get("source", "calibrated")),
    )


def fit(positives: np.ndarray, negatives: np.ndarray, *, source: str = "calibrated") -> AbstainModel:
    """A class-balanced L2 logistic regression (Newton's method) of served (``positives``) against not served
    (``negatives``), rows of :data:`FEATURES`; the threshold is the one that minimises the mean of the two error rates
    on these rows."""
    if len(positives) < 2 or len(negatives) < 2:
        raise InvalidInputError(
            f"calibration needs at least 2 served and 2 unserved requests, got {len(positives)} and {len(negatives)}"
        )
    x = np.vstack([positives, negatives]).astype(np.float64)
    y = np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))])
    sample = np.where(y == 1, 0.5 / len(positives), 0.5 / len(negatives))
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], L2)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(design @ beta, -60, 60)))
        grad = design.T @ (sample * (p - y)) + penalty * beta
        hess = (design * (sample * p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    model = AbstainModel(tuple(float(b) for b in beta[1:]), float(beta[0]), 0.5, source)
    return AbstainModel(model.coef, model.intercept, best_threshold(model, positives, negatives), source)


def best_threshold(model: AbstainModel, positives: np.ndarray, negatives: np.ndarray) -> float:
    """The threshold minimising the mean of the false-abstention and false-acceptance rates (midpoints between
    probabilities; the lowest of equals)."""
    pos = np.sort([model.probability(r) for r in positives])
    neg = np.sort([model.probability(r) for r in negatives])
    values = np.unique(np.concatenate([pos, neg]))
    cuts = np.concatenate([[0.0], (values[1:] + values[:-1]) / 2, [1.0]])
    false_abstain = np.searchsorted(pos, cuts, side="left") / len(pos)
    false_accept = 1 - np.searchsorted(neg, cuts, side="left") / len(neg)
    return float(cuts[int(np.argmin(false_abstain + false_accept))])


def error_rates(model: AbstainModel, positives: np.ndarray, negatives: np.ndarray) -> dict[str, float]:
    """The share of served requests abstained on and of unserved ones not abstained on."""
    return {
        "false_abstain": float(np.mean([model.probability(r) < model.threshold for r in positives])),
        "false_accept": float(np.mean([model.probability(r) >= model.threshold for r in negatives])),
    }


def load_negatives(path: str | os.PathLike[str]) -> list[tuple[str, tuple[str, ...], str]]:
    """Requests no tool of the catalog fits, with the tool ids each line names (to be checked against the catalog) and
    where it is (``FILE line N``, for what is said of it later).

    A JSON Lines file (the first non-blank line starts with ``{``): each line an object with a non-empty ``query``;
    ``relevant``/``acceptable``, if there (another benchmark's labels), are returned to be checked. Otherwise plain
    text: each non-blank line is one request. InvalidInputError names the file and line of anything else (a request
    route() would refuse too: over :data:`MAX_QUERY_CHARS` characters, a NUL byte).
    """
    name = path_name(path, "negatives file")
    text = read_text_file(path, "negatives file")
    filled = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not filled:
        raise InvalidInputError(f"{name}: no requests found")
    if not filled[0][1].lstrip().startswith("{"):
        if one_document(text):  # a JSON array of requests, over several lines: no plain text
            raise InvalidInputError(over_lines(name, filled[0][0]))
        return [
            (
                check_at(f"{name} line {n}", line.strip(), "the request", max_chars=MAX_QUERY_CHARS),
                (),
                f"{name} line {n}",
            )
            for n, line in filled
        ]
    out = []
    for _, where, record in json_lines(text, name):
        if not isinstance(record, dict):
            raise InvalidInputError(f"{where}: expected a JSON object")
        query = record.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError(f"{where}: 'query' must be a non-empty string")
        check_at(where, query, "'query'", max_chars=MAX_QUERY_CHARS)
        named = []
        for key in ("relevant", "acceptable"):
            ids = record.get(key, [])
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise InvalidInputError(f"{where}: {key!r} must be a list of tool ids")
            named += ids
        out.append((query, tuple(dict.fromkeys(named)), where))
    return out
