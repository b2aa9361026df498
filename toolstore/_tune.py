"""Learned fusion weights: fetch each retriever's ranked list once per example, fuse client-side for every
candidate weighting, pick the best by cross-validated nDCG@10 and store it in the catalog.

The client-side fusion (:class:`CandidateTable`) mirrors ``sql/route.sql`` exactly (the test suite checks ids
against ``route()``): BM25 and intent ranks come from the same rounding and id tie-break, intent scores a tool by
the sum of ``1 - distance`` over its nearest :data:`NEIGHBOURS_PER_TOOL` of the ``depth * EXAMPLES_PER_CANDIDATE``
nearest examples, the fused score is ``sum_j w_j / (k_rrf + rank_j)`` summed in signal order and ordered
(exact match, score, id), and always-on tools go first as ``pack`` puts them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.rows import dict_row

from ._errors import InvalidInputError
from ._eval import check_queries
from ._fusion import (
    DEFAULT_FUSION,
    DEFAULT_K_RRF,
    EXAMPLES_PER_CANDIDATE,
    NEIGHBOURS_PER_TOOL,
    SIGNALS,
    Fusion,
)
from ._metrics import CUTOFF, Judgement
from ._models import CatalogInfo
from ._sql import query
from ._text import query_identifiers, query_text
from ._vectors import embed_cached

if TYPE_CHECKING:
    import psycopg

    from ._store import ToolStore

WEIGHT_GRID = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
K_RRF_GRID = (5.0, 15.0, 30.0, 60.0, 100.0)
MAX_ROUNDS = 6
FETCH_THREADS = 2  # connections fetching retriever lists in parallel (the server does the work)
#: Coordinate ascent starts from uniform weights and from the best STRONG_STARTS retrievers alone (weight
#: 4, others off): from uniform, adding a little of a second retriever to a dominant one is rarely a single
#: improving move.
STRONG_STARTS = 2


@dataclass(frozen=True)
class ToolIndex:
    """The catalog's tools in ``route``'s tie-break order (position = rank of ``t.id`` in ``order by id``)."""

    ids: tuple[str, ...]
    position: Mapping[str, int]
    by_identifier: Mapping[str, frozenset[str]]  # lower-cased id or name -> tool ids
    always_on: frozenset[str]

    def exact(self, raw_query: str) -> frozenset[str]:
        """Tools the query names verbatim (id or name), as ``route``'s ``exact`` part finds them."""
        found: set[str] = set()
        for ident in query_identifiers(raw_query):
            found |= self.by_identifier.get(ident, frozenset())
        return frozenset(found)


@dataclass(frozen=True)
class Lists:
    """One query's retriever outputs, each ranked best first and at least ``depth`` deep."""

    query: str
    lexical: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # name, description, expansion
    dense: tuple[str, ...]
    neighbours: tuple[tuple[str, float], ...]  # (tool id, distance), nearest first, own examples dropped
    exact: frozenset[str]


def load_tool_index(store: ToolStore) -> ToolIndex:
    """Every tool of ``store``'s catalog, in the database's id order."""
    info = store.info()
    with store.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("eval_tools"), {"catalog": info.id}).fetchall()
    by_identifier: dict[str, set[str]] = {}
    for r in rows:
        by_identifier.setdefault(r["id_lower"], set()).add(r["id"])
        by_identifier.setdefault(r["name_lower"], set()).add(r["id"])
    ids = tuple(r["id"] for r in rows)
    always_on = frozenset(r["id"] for r in rows if r["always_on"])
    exact = {k: frozenset(v) for k, v in by_identifier.items()}
    return ToolIndex(ids=ids, position={t: i for i, t in enumerate(ids)}, by_identifier=exact, always_on=always_on)


def fetch_lists(
    store: ToolStore, queries: Sequence[str], *, depth: int, leave_one_out: bool = True, tools: ToolIndex | None = None
) -> list[Lists]:
    """Each retriever's ranked list for every query, ``depth`` deep (intent: ``depth * EXAMPLES_PER_CANDIDATE``
    neighbours).

    ``leave_one_out`` drops the stored intent examples whose text equals the query, so a training query
    is never matched to itself. Dense and intent lists are empty when the store has no embedder or the
    catalog no embeddings.
    """
    info = store.info()
    tools = tools or load_tool_index(store)
    vectors = None
    if store.embedder is not None and info.embed_model is not None:
        with store.connection() as conn:
            vectors = embed_cached(conn, store.embedder, list(queries))

    def chunk(part: int) -> list[Lists]:  # every FETCH_THREADS-th query, on its own connection
        with store.connection() as conn:
            return [
                _fetch_one(conn, info, queries[i], None if vectors is None else vectors[i], depth, leave_one_out, tools)
                for i in range(part, len(queries), FETCH_THREADS)
            ]

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        parts = list(pool.map(chunk, range(FETCH_THREADS)))
    return [parts[i % FETCH_THREADS][i // FETCH_THREADS] for i in range(len(queries))]


def _fetch_one(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    raw: str,
    qvec: np.ndarray | None,
    depth: int,
    leave_one_out: bool,
    tools: ToolIndex,
) -> Lists:
    params: dict[str, Any] = {"catalog": info.id, "dim": info.embed_dim, "query_text": query_text(raw), "n": depth}
    lexical: list[list[str]] = [[], [], []]
    for fld, tool_id, _rank in conn.execute(query("eval_lexical"), params):
        lexical[fld - 1].append(tool_id)
    dense: tuple[str, ...] = ()
    neighbours: list[tuple[str, float]] = []
    n_examples = depth * EXAMPLES_PER_CANDIDATE
    if qvec is not None:
        params["qvec"] = qvec
        dense = tuple(r[0] for r in conn.execute(query("eval_dense"), params))
        params.update(limit=n_examples, query=raw)
        for tool_id, text, distance in conn.execute(query("eval_neighbours"), params):
            if not (leave_one_out and text == raw):
                neighbours.append((tool_id, float(distance)))
    lex = (tuple(lexical[0]), tuple(lexical[1]), tuple(lexical[2]))
    return Lists(query=raw, lexical=lex, dense=dense, neighbours=tuple(neighbours[:n_examples]), exact=tools.exact(raw))


def signal_ranks(lists: Lists, tools: ToolIndex, depth: int) -> tuple[dict[str, int], ...]:
    """Per signal (in :data:`SIGNALS` order), tool id -> 1-based rank, ranks <= ``depth``, as ``route`` ranks."""
    ranks = [{t: r for r, t in enumerate(ids[:depth], start=1)} for ids in (*lists.lexical, lists.dense)]
    nearest: dict[str, list[float]] = {}
    for tool_id, distance in lists.neighbours[: depth * EXAMPLES_PER_CANDIDATE]:
        nearest.setdefault(tool_id, []).append(distance)
    scores: dict[str, float] = {}
    for tool_id, distances in nearest.items():
        total = 0.0
        for d in sorted(distances)[:NEIGHBOURS_PER_TOOL]:
            total += 1 - d
        scores[tool_id] = total
    order = sorted(scores, key=lambda t: (-round(scores[t] * 1e9), tools.position[t]))
    ranks.append({t: r for r, t in enumerate(order[:depth], start=1)})
    return tuple(ranks)


class CandidateTable:
    """Every example's candidates at one depth as padded arrays, for fast fusion under many weightings.

    Columns of a row are its candidate tools (any signal within ``depth``, exact matches, always-on
    tools) sorted by id position; ``ranks[j]`` holds signal j's rank or inf. Fusing gives the same top
    ``k`` as the route statement orders them (:meth:`top`).
    """

    def __init__(
        self, all_lists: Sequence[Lists], tools: ToolIndex, judgements: Sequence[Judgement], depth: int
    ) -> None:
        rows = []
        for lists in all_lists:
            ranks = signal_ranks(lists, tools, depth)
            cands = set().union(*ranks, lists.exact, tools.always_on)
            rows.append((sorted(cands, key=tools.position.__getitem__), ranks, lists.exact))
        self.candidates = [r[0] for r in rows]
        n, width = len(rows), max([1, *(len(r[0]) for r in rows)])
        self.ranks = np.full((len(SIGNALS), n, width), np.inf)
        self.group = np.full((n, width), -1, dtype=np.int8)  # 2 always-on + 1 exact; -1 padding
        self.position = np.full((n, width), len(tools.ids), dtype=np.int64)
        self.gain = np.zeros((n, width))
        for i, ((cands, ranks, exact), j) in enumerate(zip(rows, judgements)):
            relevant = set(j.relevant)
            for c, tool_id in enumerate(cands):
                for s, signal in enumerate(ranks):
                    if tool_id in signal:
                        self.ranks[s, i, c] = signal[tool_id]
                self.group[i, c] = 2 * (tool_id in tools.always_on) + (tool_id in exact)
                self.position[i, c] = tools.position[tool_id]
                self.gain[i, c] = tool_id in relevant
        ideal = [sum(1 / np.log2(r + 2) for r in range(min(len(j.relevant), CUTOFF))) for j in judgements]
        self.ideal = np.asarray(ideal)

    def subset(self, rows: np.ndarray) -> CandidateTable:
        """The same table restricted to ``rows`` (copied once, so repeated fusions skip the indexing)."""
        sub = object.__new__(CandidateTable)
        sub.candidates = [self.candidates[r] for r in rows]
        sub.ranks, sub.group, sub.position = self.ranks[:, rows], self.group[rows], self.position[rows]
        sub.gain, sub.ideal = self.gain[rows], self.ideal[rows]
        return sub

    def top(self, weights: Sequence[float], k_rrf: float, k: int = CUTOFF) -> np.ndarray:
        """Column index of each row's top ``k`` (-1 where fewer candidates qualify)."""
        score = np.zeros(self.group.shape)
        present = self.group > 0
        for s, w in enumerate(weights):
            if w > 0:
                score += w / (k_rrf + self.ranks[s])  # same operations, same order as the SQL sum
                present |= self.ranks[s] < np.inf
        group = np.where(present, self.group, -1)
        # preselect by a float key, then order exactly by (group, score, id) among the preselected
        pre = min(score.shape[1], k + 6)
        rough = group * 16.0 + score
        cols = np.argpartition(-rough, pre - 1, axis=1)[:, :pre] if pre < score.shape[1] else np.indices(score.shape)[1]
        g, sc, pos = (np.take_along_axis(a, cols, axis=1) for a in (group, score, self.position))
        order = np.lexsort((pos, -np.round(sc * 1e9), -g), axis=1)[:, :k]
        top = np.take_along_axis(cols, order, axis=1)
        return np.where(np.take_along_axis(g, order, axis=1) >= 0, top, -1)

    def top_ids(self, weights: Sequence[float], k_rrf: float, k: int = CUTOFF) -> list[list[str]]:
        """The ids of each row's top ``k`` (what :meth:`top` points at)."""
        top = self.top(weights, k_rrf, k)
        return [[cands[c] for c in cols if c >= 0] for cands, cols in zip(self.candidates, top)]

    def ndcg(self, weights: Sequence[float], k_rrf: float) -> np.ndarray:
        """nDCG@10 of each row under the given fusion."""
        top = self.top(weights, k_rrf)
        gain = np.where(top >= 0, np.take_along_axis(self.gain, np.maximum(top, 0), axis=1), 0.0)
        discount = 1 / np.log2(np.arange(2, top.shape[1] + 2))
        return (gain * discount).sum(axis=1) / self.ideal


@dataclass(frozen=True)
class TuneReport:
    """What :func:`tune` found and stored.

    ``cv_ndcg_*``: mean nDCG@10 over held-out folds (weights chosen on the other folds; uniform needs no
    choosing). ``fusion`` is what was stored: ``tuned`` (fit on all examples) unless its CV score did not
    beat uniform weights', then uniform (``fell_back``).
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "fusion": self.fusion.as_dict(),
            "tuned": self.tuned.as_dict(),
            "cv_ndcg_uniform": round(self.cv_ndcg_uniform, 4),
            "cv_ndcg_tuned": round(self.cv_ndcg_tuned, 4),
            "train_ndcg": round(self.train_ndcg, 4),
            "fell_back": self.fell_back,
            "n_examples": self.n_examples,
            "folds": self.folds,
            "seed": self.seed,
            "seconds": round(self.seconds, 2),
            "fetch_seconds": round(self.fetch_seconds, 2),
            "fold_fusions": [x.as_dict() for x in self.fold_fusions],
        }


def _fit(table: CandidateTable, rows: np.ndarray) -> tuple[Fusion, float]:
    """Coordinate ascent over :data:`WEIGHT_GRID` and :data:`K_RRF_GRID` from several starts (the default fusion
    and the :data:`STRONG_STARTS` best retrievers alone): the best fusion on ``rows`` and its mean nDCG."""
    memo: dict[tuple[tuple[float, ...], float], float] = {}
    table = table.subset(rows)

    def score(weights: tuple[float, ...], k_rrf: float) -> float:
        if (weights, k_rrf) not in memo:
            memo[weights, k_rrf] = float(table.ndcg(weights, k_rrf).mean()) if any(weights) else -1.0
        return memo[weights, k_rrf]

    alone = [tuple(4.0 * (s == one) for s in SIGNALS) for one in SIGNALS]
    strong = sorted(alone, key=lambda w: -score(w, DEFAULT_K_RRF))[:STRONG_STARTS]
    found = []
    for start in [tuple(DEFAULT_FUSION.weights[s] for s in SIGNALS), *strong]:
        best = (start, DEFAULT_K_RRF)
        best_score = score(*best)
        for _ in range(MAX_ROUNDS):
            before = best
            for axis in range(len(SIGNALS) + 1):
                for value in WEIGHT_GRID if axis < len(SIGNALS) else K_RRF_GRID:
                    w, kr = best
                    if axis < len(SIGNALS):
                        w = w[:axis] + (value,) + w[axis + 1 :]
                    else:
                        kr = value
                    if score(w, kr) > best_score + 1e-12:
                        best, best_score = (w, kr), score(w, kr)
            if best == before:
                break
        found.append((best_score, best))
    best_score, (weights, k_rrf) = max(found, key=lambda f: f[0])  # first start wins ties
    return Fusion(weights=dict(zip(SIGNALS, weights)), k_rrf=k_rrf), best_score


def _folds(n: int, folds: int, seed: int) -> np.ndarray:
    """Fold number of each example: a seeded permutation dealt round-robin."""
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % folds
    return fold


def tune(
    store: ToolStore,
    examples: Sequence[tuple[str, Judgement]],
    *,
    seed: int = 0,
    folds: int = 5,
    k: int = CUTOFF,
    save: bool = True,
) -> TuneReport:
    """Fit fusion weights and ``k_rrf`` on labelled ``examples``; store them unless ``save=False``.

    Each example's retriever lists are fetched once (leave-one-out: its own stored intent examples are
    dropped), then coordinate ascent over :data:`WEIGHT_GRID` x :data:`K_RRF_GRID` maximises mean nDCG@k.
    ``folds``-fold cross-validation (folds dealt by ``seed``) scores the procedure on held-out examples; the
    stored weights are fit on all examples, or the default fusion (uniform weights) when tuning did not beat it
    under cross-validation. Deterministic for a given catalog, examples and seed.
    """
    started = time.perf_counter()
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidInputError(f"folds must be an integer >= 2, got {folds!r}")
    examples = list(examples)
    check_queries(store, examples, "examples")
    tools = load_tool_index(store)
    if len(examples) < 2:
        raise InvalidInputError(f"tuning needs at least 2 examples, got {len(examples)}")
    folds = min(folds, len(examples))
    depth = DEFAULT_FUSION.depth(k)
    lists = fetch_lists(store, [q for q, _ in examples], depth=depth, tools=tools)
    fetched = time.perf_counter()
    table = CandidateTable(lists, tools, [j for _, j in examples], depth)
    fold = _folds(len(examples), folds, seed)
    held_tuned = np.zeros(len(examples))
    fold_fusions = []
    for f in range(folds):
        fusion, _ = _fit(table, np.flatnonzero(fold != f))
        fold_fusions.append(fusion)
        test = np.flatnonzero(fold == f)
        held_tuned[test] = table.subset(test).ndcg([fusion.weights[s] for s in SIGNALS], fusion.k_rrf)
    default = table.ndcg([DEFAULT_FUSION.weights[s] for s in SIGNALS], DEFAULT_FUSION.k_rrf)
    tuned, train = _fit(table, np.arange(len(examples)))
    cv_tuned, cv_default = float(held_tuned.mean()), float(default.mean())
    fell_back = not cv_tuned > cv_default
    chosen = DEFAULT_FUSION if fell_back else tuned
    if save:
        store.set_fusion(weights=chosen.weights, k_rrf=chosen.k_rrf, overfetch=chosen.overfetch)
    return TuneReport(
        fusion=chosen,
        tuned=tuned,
        cv_ndcg_uniform=cv_default,
        cv_ndcg_tuned=cv_tuned,
        train_ndcg=train,
        fell_back=fell_back,
        n_examples=len(examples),
        folds=folds,
        seed=seed,
        seconds=time.perf_counter() - started,
        fetch_seconds=fetched - started,
        fold_fusions=fold_fusions,
    )
