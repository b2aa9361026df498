"""Learned fusion weights: fetch each signal's ranked list once per labelled request, fuse client-side for every
candidate weighting (``_candidates``, which mirrors ``sql/route.sql`` exactly), pick the best by cross-validated
nDCG@10 and store it in the catalog.

Labelled requests are single queries (``train.jsonl``) or turns of labelled sessions (``train_sessions.jsonl``),
each turn seen as route() sees it in a conversation: the earlier turns' text and the calls made in them. Folds hold
whole sessions (turns of one session would leak into each other), intent examples from a turn's own session are
never matched, nor the lines of tools' expansions that copy them (``_lists``), and transition counts come only from
training sessions: a held-out turn's from the sessions outside its fold, a training turn's from those minus its own
session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._calibrate import calibrate, negative_requests
from ._candidates import CandidateTable, Transitions
from ._errors import InvalidInputError
from ._eval import check_queries, check_sessions
from ._fusion import DEFAULT_AVOID, DEFAULT_FUSION, DEFAULT_K_RRF, DEFAULT_TURNS, REQUEST_SIGNALS, SIGNALS, Fusion
from ._input import listed
from ._lists import ExpansionLines, Probe, ToolIndex, expansion_lines, fetch_lists, load_tool_index
from ._metrics import CUTOFF, Judgement, LabelledSession
from ._sql import query
from ._text import query_text

if TYPE_CHECKING:
    from ._store import ToolStore

WEIGHT_GRID = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
K_RRF_GRID = (5.0, 15.0, 30.0, 60.0, 100.0)
#: Up to 16: seal_tools' train fit chose 2 and 6, each the grid's edge, before it ran past them (docs/QUALITY.md).
SPLIT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
#: ``split`` is fit only on examples holding at least this many split requests that need more than one tool; with
#: fewer it keeps the default. On a request that needs one tool a split can only cost (the best weight there is 0),
#: and intent examples are mostly written one tool at a time: fit on them alone, the weight measures what false splits
#: cost and never what true ones win (metatool's train set: 489 requests split, 13 of them needing two tools).
MIN_COMPOUND_SPLITS = 50
#: The avoid-when penalty's weights tried once the others are fit (only where tools have avoid-when text).
AVOID_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_ROUNDS = 6
#: Coordinate ascent starts from the default fusion and from the best STRONG_STARTS signals alone (weight
#: 4, others off): from there, adding a little of a second signal to a dominant one is rarely a single
#: improving move.
STRONG_STARTS = 2


def session_probes(session: LabelledSession, turns: int = DEFAULT_TURNS) -> list[tuple[Probe, Judgement | None]]:
    """Each turn of ``session`` as route(messages=...) reads it with ``turns`` turns: the earlier turns' text and
    the calls made in them (within the window), never matching the session's own intent examples."""
    exclude = frozenset(t.query for t in session.turns)
    out = []
    for i, turn in enumerate(session.turns):
        window = session.turns[max(0, i - (turns - 1)) : i]
        earlier = tuple(t.query for t in window)
        probe = Probe(turn.query, earlier, tuple(c for t in window for c in t.calls), exclude)
        out.append((probe, session.judgement(i)))
    return out


@dataclass(frozen=True)
class TuneReport:
    """What :func:`tune` found and stored.

    ``cv_ndcg_*``: mean nDCG@10 over held-out folds (weights chosen on the other folds; the default fusion needs no
    choosing: ``cv_ndcg_uniform`` is its score, named when it was uniform over the five request retrievers). ``fusion``
    is what was stored: ``tuned`` (fit on all examples) unless its CV score did not beat the default's, then the default
    (``fell_back``). ``n_examples`` counts scored requests (queries and session turns), ``n_sessions`` the sessions
    among them. ``abstain``: with negatives, the abstention calibration (``_calibrate.calibrate``'s report: the model,
    counts, error rates).
    """

    fusion: Fusion
    tuned: Fusion
    cv_ndcg_uniform: float
    cv_ndcg_tuned: float
    train_ndcg: float
    fell_back: bool
    n_examples: int
    folds: int
    seed: int
    seconds: float
    fetch_seconds: float
    fold_fusions: list[Fusion] = field(default_factory=list)
    n_sessions: int = 0
    abstain: dict[str, object] | None = None
    #: Labelled requests that a tool's expansion holds verbatim (read without those lines, as without their own intent
    #: examples: ``_lists.fetch_lists``).
    expansion_copies: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "fusion": self.fusion.as_dict(),
            "tuned": self.tuned.as_dict(),
            "cv_ndcg_uniform": round(self.cv_ndcg_uniform, 4),
            "cv_ndcg_tuned": round(self.cv_ndcg_tuned, 4),
            "train_ndcg": round(self.train_ndcg, 4),
            "fell_back": self.fell_back,
            "n_examples": self.n_examples,
            "n_sessions": self.n_sessions,
            "folds": self.folds,
            "seed": self.seed,
            "seconds": round(self.seconds, 2),
            "fetch_seconds": round(self.fetch_seconds, 2),
            "fold_fusions": [x.as_dict() for x in self.fold_fusions],
            "abstain": self.abstain,
            "expansion_copies": self.expansion_copies,
        }


def expansion_copies(lines: ExpansionLines, requests: Sequence[str]) -> int:
    """How many of ``requests`` are a line of some tool's expansion (``toolstore expand --offline`` copies intent
    examples there; ``lines`` read for them): each one's lists leave those lines out of the expansion field and the
    tool's vector."""
    return sum(r in lines.lines for r in requests)


def avoid_fractions(store: ToolStore, probes: Sequence[Probe], tools: ToolIndex) -> list[dict[str, float]]:
    """Per request, the fraction of its lexemes in each tool's avoid-when text (tools with none left out), as the
    route statement's ``avoided`` part counts them; empty dicts when no tool has avoid-when text."""
    if not tools.avoid:
        return [{} for _ in probes]
    texts = [query_text(p.query) for p in probes]
    with store.connection() as conn:
        rows = conn.execute(query("eval_request_lexemes"), {"texts": texts}).fetchall()
    out = []
    for (lexemes,) in rows:
        terms = set(lexemes)
        out.append({t: len(terms & a) / len(terms) for t, a in tools.avoid.items() if terms & a})
    return out


def _fit(table: CandidateTable, rows: np.ndarray) -> tuple[Fusion, float]:
    """Coordinate ascent over :data:`WEIGHT_GRID`, :data:`K_RRF_GRID` and (when at least
    :data:`MIN_COMPOUND_SPLITS` split requests need more than one tool) :data:`SPLIT_GRID` from several starts (the
    default fusion and the :data:`STRONG_STARTS` best retrievers alone): the best fusion on ``rows`` and its mean
    nDCG."""
    Point = tuple[tuple[float, ...], float, float]  # weights, k_rrf, split
    memo: dict[Point, float] = {}
    table = table.subset(rows)

    def score(point: Point) -> float:
        if point not in memo:
            weights, k_rrf, split = point
            on = any(weights[: len(REQUEST_SIGNALS)])  # check_weights refuses a fusion without a request retriever
            memo[point] = float(table.ndcg(weights, k_rrf, split).mean()) if on else -1.0
        return memo[point]

    def moves(point: Point, axis: int) -> list[Point]:
        weights, k_rrf, split = point
        if axis < len(SIGNALS):
            return [(weights[:axis] + (v,) + weights[axis + 1 :], k_rrf, split) for v in WEIGHT_GRID]
        if axis == len(SIGNALS):
            return [(weights, v, split) for v in K_RRF_GRID]
        return [(weights, k_rrf, v) for v in SPLIT_GRID]

    active = table.active()  # a weight on a signal with no ranks changes nothing: it keeps its default
    axes = [a for a in range(len(SIGNALS)) if active[a]] + [len(SIGNALS)]
    if table.compound_splits() >= MIN_COMPOUND_SPLITS:
        axes.append(len(SIGNALS) + 1)
    split = DEFAULT_FUSION.split
    alone = [tuple(4.0 * (s == one) for s in SIGNALS) for one in SIGNALS if active[SIGNALS.index(one)]]
    strong = sorted(alone, key=lambda w: -score((w, DEFAULT_K_RRF, split)))[:STRONG_STARTS]
    found = []
    default = tuple(DEFAULT_FUSION.weights[s] for s in SIGNALS)
    for start in [default, *(tuple(w if active[i] else default[i] for i, w in enumerate(x)) for x in strong)]:
        best: Point = (start, DEFAULT_K_RRF, split)
        best_score = score(best)
        for _ in range(MAX_ROUNDS):
            before = best
            for axis in axes:
                for point in moves(best, axis):
                    if score(point) > best_score + 1e-12:
                        best, best_score = point, score(point)
            if best == before:
                break
        found.append((best_score, best))
    best_score, (weights, k_rrf, split) = max(found, key=lambda f: f[0])  # first start wins ties
    avoid = DEFAULT_AVOID
    if table.avoid.any():  # then the avoid-when weight, the default winning ties
        for value in AVOID_GRID:
            trial = float(table.ndcg(weights, k_rrf, split, value).mean())
            if trial > best_score + 1e-12:
                avoid, best_score = value, trial
    return Fusion(weights=dict(zip(SIGNALS, weights)), k_rrf=k_rrf, split=split, avoid=avoid), best_score


def _folds(n: int, folds: int, seed: int) -> np.ndarray:
    """Fold number of each unit (an example or a session): a seeded permutation dealt round-robin."""
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    return fold


def tune(
    store: ToolStore,
    examples: Sequence[tuple[str, Judgement]] = (),
    *,
    sessions: Sequence[LabelledSession] = (),
    seed: int = 0,
    folds: int = 5,
    k: int = CUTOFF,
    save: bool = True,
    negatives: str | os.PathLike[str] | Sequence[str] | None = None,
) -> TuneReport:
    """Fit fusion weights and ``k_rrf`` on labelled ``examples`` and/or ``sessions``; store them unless
    ``save=False``.

    Each request's lists are fetched once (its own intent examples, and its session's, never matched), then
    coordinate ascent over :data:`WEIGHT_GRID` x :data:`K_RRF_GRID` maximises mean nDCG@k. ``folds``-fold
    cross-validation (folds dealt by ``seed``, a session's turns all in one fold) scores the procedure on held-out
    requests; the stored weights are fit on all of them, or the default fusion when tuning did not beat it under
    cross-validation. Deterministic for a given catalog, labels and seed.

    ``negatives`` (requests no tool fits): abstention is calibrated too (``_calibrate``), under the chosen fusion,
    on ``examples``' requests against them, and stored with the fusion in one write.
    """
    started = time.perf_counter()
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidInputError(f"folds must be an integer >= 2, got {folds!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidInputError(f"seed must be an integer >= 0, got {seed!r}")
    examples, sessions = listed(examples, "examples"), listed(sessions, "sessions")  # a single one: named
    if negatives is not None and not examples:
        raise InvalidInputError("calibrating abstention (negatives) needs examples: requests the catalog serves")
    if not examples and not sessions:
        raise InvalidInputError("no examples given")
    unserved: list[str] = []
    if examples:
        known = check_queries(store, examples, "examples")
        unserved = [] if negatives is None else negative_requests(negatives, known, [q for q, _ in examples])
    if sessions:
        check_sessions(store, sessions)
    probes: list[Probe] = [Probe(q) for q, _ in examples]
    judgements: list[Judgement] = [j for _, j in examples]
    unit: list[int] = list(range(len(examples)))  # rows of one unit share a fold
    owner: list[int | None] = [None] * len(examples)  # the session of each row
    for s, session in enumerate(sessions):
        for probe, judgement in session_probes(session):
            if judgement is not None:
                probes.append(probe)
                judgements.append(judgement)
                unit.append(len(examples) + s)
                owner.append(s)
    if len(probes) < 2:
        together = " (the examples and the sessions' labelled turns together)" if examples and sessions else ""
        raise InvalidInputError(f"tuning needs at least 2 labelled requests{together}, got {len(probes)}")
    if len(examples) + len(sessions) < 2:  # cross-validation deals examples and whole sessions into folds
        raise InvalidInputError("tuning needs at least 2 examples or sessions to cross-validate, got one session")
    folds = min(folds, len(examples) + len(sessions))
    # the lines of tools' expansions that copy a request (its lists are read without them), read once for the lists,
    # the count and the negatives' lists
    texts = [text for p in probes for text in (p.query, *p.exclude)] + unserved
    lines = expansion_lines(store, store.info(), texts)
    copies = expansion_copies(lines, [p.query for p in probes])
    depth = DEFAULT_FUSION.depth(k)
    tools = load_tool_index(store)
    lists = fetch_lists(store, probes, depth=depth, tools=tools, lines=lines)
    avoid = avoid_fractions(store, probes, tools)
    fetched = time.perf_counter()
    unit_fold = _folds(len(examples) + len(sessions), folds, seed)
    fold = unit_fold[np.asarray(unit)]
    calls = [session.calls for session in sessions]
    own = [Transitions.of([c]) for c in calls]

    def table(counts: Transitions | None, held: int | None = None) -> CandidateTable:
        """Rows' transitions from ``counts`` (all sessions, or those outside fold ``held``), minus their own
        session's for training rows."""
        if counts is None:
            return CandidateTable(lists, tools, judgements, depth, avoid=avoid)
        per_row = [
            None if s is None else counts if fold[i] == held else counts.minus(own[s]) for i, s in enumerate(owner)
        ]
        return CandidateTable(lists, tools, judgements, depth, per_row, avoid)

    shared = None if sessions else table(None)
    held_tuned, held_default = np.zeros(len(probes)), np.zeros(len(probes))
    default = [DEFAULT_FUSION.weights[s] for s in SIGNALS]
    fold_fusions = []
    for f in range(folds):
        outside = [c for c, g in zip(calls, unit_fold[len(examples) :]) if g != f]
        fold_table = shared or table(Transitions.of(outside), held=f)
        fusion, _ = _fit(fold_table, np.flatnonzero(fold != f))
        fold_fusions.append(fusion)
        test = np.flatnonzero(fold == f)
        weights = [fusion.weights[s] for s in SIGNALS]
        held_tuned[test] = fold_table.subset(test).ndcg(weights, fusion.k_rrf, fusion.split, fusion.avoid)
        held_default[test] = fold_table.subset(test).ndcg(default, DEFAULT_FUSION.k_rrf, DEFAULT_FUSION.split)
    tuned, train = _fit(shared or table(Transitions.of(calls)), np.arange(len(probes)))
    cv_tuned, cv_default = float(held_tuned.mean()), float(held_default.mean())
    fell_back = not cv_tuned > cv_default
    chosen = DEFAULT_FUSION if fell_back else tuned
    model, abstain = None, None
    if negatives is not None:
        model, abstain = calibrate(store, [q for q, _ in examples], unserved, chosen, seed=seed, lines=lines)
    if save and model is not None:
        store.set_abstain(model, fusion=chosen)
    elif save:
        store.set_fusion(
            weights=chosen.weights,
            k_rrf=chosen.k_rrf,
            overfetch=chosen.overfetch,
            split=chosen.split,
            avoid=chosen.avoid,
        )
    return TuneReport(
        fusion=chosen,
        tuned=tuned,
        cv_ndcg_uniform=cv_default,
        cv_ndcg_tuned=cv_tuned,
        train_ndcg=train,
        fell_back=fell_back,
        n_examples=len(probes),
        folds=folds,
        seed=seed,
        seconds=time.perf_counter() - started,
        fetch_seconds=fetched - started,
        fold_fusions=fold_fusions,
        n_sessions=len(sessions),
        abstain=abstain,
        expansion_copies=copies,
    )
