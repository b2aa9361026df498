"""Client-side fusion for tuning: each request's signal lists (``_lists``, fetched once) fused for any weighting
exactly as ``sql/route.sql`` fuses (the test suite holds the two equal).

Intent scores a tool by the sum of ``1 - distance`` over its nearest :data:`NEIGHBOURS_PER_TOOL` of the ``depth *
EXAMPLES_PER_CANDIDATE`` nearest examples, and ``context`` does the same from the request's vector mixed with the
earlier turns'. ``recent`` and ``transition`` are computed here from the calls looked back on and the transition counts
(:class:`Transitions`) with the statement's formulas. The fused score is ``sum_j w_j / (k_rrf + rank_j)`` summed in
signal order, plus ``split`` times the tool's best such sum over the request's sub-requests (each one's lists fetched
like the request's), and ordered (exact match, score, id); always-on tools go first as ``pack`` puts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from ._fusion import (
    DEFAULT_AVOID,
    EXAMPLES_PER_CANDIDATE,
    NEIGHBOURS_PER_TOOL,
    RECENT_CALLS,
    RECENT_DECAY,
    REQUEST_SIGNALS,
    SIGNALS,
    TRANSITION_CALLS,
    TRANSITION_SMOOTHING,
    rrf,
    top_columns,
)
from ._lists import Lists, ToolIndex
from ._metrics import CUTOFF, Judgement, discount
from ._split import MAX_PARTS


class Transitions:
    """Transition counts as the session log's triggers keep them: ``n(prev, next)``, how often ``next`` was the call
    right after ``prev`` in one session."""

    def __init__(self, counts: Mapping[tuple[str, str], int] | None = None) -> None:
        self.following: dict[str, dict[str, int]] = {}
        for (prev, nxt), n in (counts or {}).items():
            if n:
                self.following.setdefault(prev, {})[nxt] = n

    @classmethod
    def of(cls, sessions: Iterable[Sequence[str]]) -> Transitions:
        """Counts over sessions given as their calls' tool ids, oldest first."""
        counts: dict[tuple[str, str], int] = {}
        for calls in sessions:
            for pair in zip(calls, calls[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        return cls(counts)

    def pairs(self) -> dict[tuple[str, str], int]:
        return {(p, n): c for p, nxt in self.following.items() for n, c in nxt.items()}

    def minus(self, other: Transitions) -> Transitions:
        """These counts without ``other``'s (a held-out session's own pairs)."""
        counts = self.pairs()
        for pair, n in other.pairs().items():
            counts[pair] = counts.get(pair, 0) - n
        return Transitions(counts)


def _ranked(scores: Mapping[str, float], tools: ToolIndex, depth: int) -> dict[str, int]:
    """Tool id -> 1-based rank by score (compared at 1e-9), ties by id order, tools of the catalog only."""
    known = [t for t in scores if t in tools.position]
    order = sorted(known, key=lambda t: (-round(scores[t] * 1e9), tools.position[t]))
    return {t: r for r, t in enumerate(order[:depth], start=1)}


def _knn_scores(neighbours: Sequence[tuple[str, float]], depth: int) -> dict[str, float]:
    nearest: dict[str, list[float]] = {}
    for tool_id, distance in neighbours[: depth * EXAMPLES_PER_CANDIDATE]:
        nearest.setdefault(tool_id, []).append(distance)
    scores: dict[str, float] = {}
    for tool_id, distances in nearest.items():
        total = 0.0
        for d in sorted(distances)[:NEIGHBOURS_PER_TOOL]:
            total += 1 - d
        scores[tool_id] = total
    return scores


def recent_scores(history: Sequence[str]) -> dict[str, float]:
    """``recent``: the sum of RECENT_DECAY ** d over a tool's calls among the last RECENT_CALLS, d back."""
    scores: dict[str, float] = {}
    for d, tool_id in enumerate(reversed(history[-RECENT_CALLS:])):
        scores[tool_id] = scores.get(tool_id, 0.0) + RECENT_DECAY**d
    return scores


def transition_scores(history: Sequence[str], transitions: Transitions) -> dict[str, float]:
    """``transition``: over the last TRANSITION_CALLS calls A (d back), the sum of RECENT_DECAY ** d * n(A, tool) /
    (n(A) + TRANSITION_SMOOTHING)."""
    scores: dict[str, float] = {}
    for d, prev in enumerate(reversed(history[-TRANSITION_CALLS:])):
        following = transitions.following.get(prev, {})
        total = float(sum(following.values()))
        for nxt, n in following.items():
            scores[nxt] = scores.get(nxt, 0.0) + RECENT_DECAY**d * float(n) / (total + TRANSITION_SMOOTHING)
    return scores


def signal_ranks(
    lists: Lists, tools: ToolIndex, depth: int, transitions: Transitions | None = None
) -> tuple[dict[str, int], ...]:
    """Per signal (in :data:`SIGNALS` order), tool id -> 1-based rank, ranks <= ``depth``, as ``route`` ranks."""
    ranks = [{t: r for r, t in enumerate(ids[:depth], start=1)} for ids in (*lists.lexical, lists.dense)]
    ranks.append(_ranked(_knn_scores(lists.neighbours, depth), tools, depth))
    ranks.append(_ranked(recent_scores(lists.history), tools, depth))
    ranks.append(_ranked(transition_scores(lists.history, transitions or Transitions()), tools, depth))
    ranks.append(_ranked(_knn_scores(lists.context, depth), tools, depth))
    return tuple(ranks)


class CandidateTable:
    """Every request's candidates at one depth as padded arrays, for fast fusion under many weightings.

    Columns of a row are its candidate tools (any signal within ``depth`` in the request or one of its sub-requests,
    exact matches, always-on tools) sorted by id position; ``ranks[j]`` holds signal j's rank or inf, and
    ``part_ranks[p, j]`` the same for request signal j in sub-request p + 1. Fusing gives the same top ``k`` as the
    route statement orders them (:meth:`top`). ``transitions``: per row, the counts its ``transition`` list comes
    from (None: no counts).
    """

    def __init__(
        self,
        all_lists: Sequence[Lists],
        tools: ToolIndex,
        judgements: Sequence[Judgement],
        depth: int,
        transitions: Sequence[Transitions | None] | None = None,
        avoid: Sequence[Mapping[str, float]] | None = None,
    ) -> None:
        rows = []
        for i, lists in enumerate(all_lists):
            ranks = signal_ranks(lists, tools, depth, None if transitions is None else transitions[i])
            parts = [signal_ranks(p, tools, depth)[: len(REQUEST_SIGNALS)] for p in lists.parts[:MAX_PARTS]]
            found = set().union(*ranks, *(r for p in parts for r in p), lists.exact, tools.always_on)
            rows.append((sorted(found, key=tools.position.__getitem__), ranks, parts, lists.exact))
        self.candidates = [r[0] for r in rows]
        n, width = len(rows), max([1, *(len(r[0]) for r in rows)])
        n_parts = max([0, *(len(r[2]) for r in rows)])
        self.ranks = np.full((len(SIGNALS), n, width), np.inf)
        self.part_ranks = np.full((n_parts, len(REQUEST_SIGNALS), n, width), np.inf)
        self.group = np.full((n, width), -1, dtype=np.int8)  # 2 always-on + 1 exact; -1 padding
        self.position = np.full((n, width), len(tools.ids), dtype=np.int64)
        self.gain = np.zeros((n, width))
        self.avoid = np.zeros((n, width))  # the fraction of the request's lexemes in the tool's avoid-when text
        for i, ((cands, ranks, parts, exact), j) in enumerate(zip(rows, judgements)):
            relevant = set(j.relevant)
            column = {tool_id: c for c, tool_id in enumerate(cands)}
            for s, signal in enumerate(ranks):
                for tool_id, rank in signal.items():
                    self.ranks[s, i, column[tool_id]] = rank
            for p, part in enumerate(parts):
                for s, signal in enumerate(part):
                    for tool_id, rank in signal.items():
                        self.part_ranks[p, s, i, column[tool_id]] = rank
            for c, tool_id in enumerate(cands):
                self.group[i, c] = 2 * (tool_id in tools.always_on) + (tool_id in exact)
                self.position[i, c] = tools.position[tool_id]
                self.gain[i, c] = tool_id in relevant
                self.avoid[i, c] = avoid[i].get(tool_id, 0.0) if avoid else 0.0
        ideal = [sum(discount(r) for r in range(1, min(len(j.relevant), CUTOFF) + 1)) for j in judgements]
        self.ideal = np.asarray(ideal)
        #: Per row: its request was split and needs more than one tool (what the ``split`` weight is for).
        self.compound = np.isfinite(self.part_ranks).any(axis=(0, 1, 3)) & np.asarray(
            [len(j.relevant) > 1 for j in judgements], dtype=bool
        ).reshape(n)

    def subset(self, rows: np.ndarray) -> CandidateTable:
        """The same table restricted to ``rows`` (copied once, so repeated fusions skip the indexing)."""
        sub = object.__new__(CandidateTable)
        sub.candidates = [self.candidates[r] for r in rows]
        sub.ranks, sub.part_ranks = self.ranks[:, rows], self.part_ranks[:, :, rows]
        sub.group, sub.position = self.group[rows], self.position[rows]
        sub.gain, sub.ideal, sub.avoid = self.gain[rows], self.ideal[rows], self.avoid[rows]
        sub.compound = self.compound[rows]
        return sub

    def active(self) -> list[bool]:
        """Per signal: whether any row has a rank in it (a weight on an empty signal changes nothing)."""
        return [bool(np.isfinite(self.ranks[s]).any()) for s in range(len(SIGNALS))]

    def compound_splits(self) -> int:
        """How many rows' requests were split and need more than one tool."""
        return int(self.compound.sum())

    def part_scores(self, weights: Sequence[float], k_rrf: float) -> Iterator[np.ndarray]:
        """Sub-request by sub-request, its fused score of every candidate (rows x columns; 0 where none of its
        signals returned the tool): :meth:`top` adds ``split`` times a tool's best, as the statement does."""
        for part in self.part_ranks:
            score = np.zeros(self.group.shape)
            for s, w in enumerate(weights[: len(REQUEST_SIGNALS)]):
                if w > 0:
                    score += rrf(w, part[s], k_rrf)  # same operations, same order as the SQL sum
            yield score

    def top(
        self, weights: Sequence[float], k_rrf: float, k: int = CUTOFF, split: float = 0.0, avoid: float = DEFAULT_AVOID
    ) -> np.ndarray:
        """Column index of each row's top ``k`` (-1 where fewer candidates qualify); ``avoid``: the avoid-when
        penalty's weight."""
        score = np.zeros(self.group.shape)
        present = self.group > 0
        for s, w in enumerate(weights):
            if w > 0:
                score += rrf(w, self.ranks[s], k_rrf)  # same operations, same order as the SQL sum
                present |= self.ranks[s] < np.inf
        if split > 0 and len(self.part_ranks):
            for part in self.part_ranks:
                for s, w in enumerate(weights[: len(REQUEST_SIGNALS)]):
                    if w > 0:
                        present |= part[s] < np.inf
            best = np.zeros(self.group.shape)
            for part_score in self.part_scores(weights, k_rrf):
                best = np.maximum(best, part_score)
            score = score + split * best
        if avoid > 0:
            score = score - avoid * score * self.avoid  # the statement's `avoided` part
        return top_columns(np.where(present, self.group, -1), score, self.position, k)

    def top_ids(
        self, weights: Sequence[float], k_rrf: float, k: int = CUTOFF, split: float = 0.0, avoid: float = DEFAULT_AVOID
    ) -> list[list[str]]:
        """The ids of each row's top ``k`` (what :meth:`top` points at)."""
        top = self.top(weights, k_rrf, k, split, avoid)
        return [[cands[c] for c in cols if c >= 0] for cands, cols in zip(self.candidates, top)]

    def ndcg(
        self, weights: Sequence[float], k_rrf: float, split: float = 0.0, avoid: float = DEFAULT_AVOID
    ) -> np.ndarray:
        """nDCG@10 of each row under the given fusion."""
        top = self.top(weights, k_rrf, split=split, avoid=avoid)
        gain = np.where(top >= 0, np.take_along_axis(self.gain, np.maximum(top, 0), axis=1), 0.0)
        return (gain * discount(np.arange(1, top.shape[1] + 1))).sum(axis=1) / self.ideal
