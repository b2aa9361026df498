"""Retrieval metrics for the tool-routing benchmarks in ``bench/`` (see its README).

Every metric is computed per query over the top :data:`CUTOFF` (10) tools of a
ranking and then averaged over the queries it applies to:

``R@K``
    fraction of the ``relevant`` tools found in the top K (K = 1, 5, 10).
``MRR@10``
    1 / rank of the first relevant tool, 0 if none is in the top 10.
``nDCG@10``
    binary gains over ``relevant``, discount ``1 / log2(rank + 1)``; the ideal
    DCG puts ``min(|relevant|, 10)`` relevant tools at ranks 1, 2, ...
``multi R@10`` / ``multi comp@10``
    only for queries with more than one relevant tool: R@10, and 1 if every
    relevant tool is in the top 10 (else 0).  ``None`` for other queries.
``single hit@K`` / ``lenient hit@K`` (K = 1, 10)
    only for queries with exactly one relevant tool: 1 if that tool (strict) or
    any ``acceptable`` tool (lenient) is in the top K.  ``None`` otherwise.
``comp@5`` / ``comp@10``
    1 if every relevant tool is in the top 5 / 10, else 0 (all queries).

Duplicates in a ranking count once, at their first occurrence: the ranking is
de-duplicated first and the top 10 are taken from what remains, so a repeated
id neither scores twice nor occupies a rank.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import InvalidInputError, InvalidTypeError
from ._input import MAX_ID_CHARS, MAX_QUERY_CHARS, check_at, json_lines
from ._textfile import read_text_file

__all__ = [
    "CUTOFF",
    "METRICS",
    "Judgement",
    "LabelledSession",
    "SessionTurn",
    "aggregate",
    "load_judgements",
    "load_sessions",
    "score_query",
]

#: Number of returned tools every metric looks at.
CUTOFF = 10

#: Metric names, in report order.
METRICS: tuple[str, ...] = (
    "R@1",
    "R@5",
    "R@10",
    "MRR@10",
    "nDCG@10",
    "multi R@10",
    "multi comp@10",
    "single hit@1",
    "single hit@10",
    "lenient hit@1",
    "lenient hit@10",
    "comp@5",
    "comp@10",
)


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    """``ids`` without repeats, keeping first occurrences in order."""
    return tuple(dict.fromkeys(ids))


def _check_ids(qid: str, field: str, ids: object) -> None:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InvalidTypeError(f"judgement {qid!r}: {field} must be a sequence of tool ids, got {type(ids).__name__}")


@dataclass(frozen=True)
class Judgement:
    """The ground truth of one query.

    ``relevant`` are all the tools the query needs; ``acceptable`` are the tools
    that would also do (always a superset of ``relevant``).  On construction both
    are turned into tuples without duplicates, and any relevant id missing from
    ``acceptable`` is added to it (relevant ids first, then the other acceptable
    ids in their given order).  ``relevant`` must not be empty.  Bad input is an
    :class:`~toolstore.InvalidInputError` naming the judgement and what is wrong
    (:class:`~toolstore.InvalidTypeError`, a TypeError too, for a value of the wrong type).
    """

    qid: str
    relevant: tuple[str, ...]
    acceptable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_ids(self.qid, "relevant", self.relevant)
        _check_ids(self.qid, "acceptable", self.acceptable)
        given, also = tuple(self.relevant), tuple(self.acceptable)  # read once: either may be an iterator
        for tool_id in (*given, *also):  # before any is hashed: a list is no tool id either
            if not isinstance(tool_id, str):
                raise InvalidTypeError(f"judgement {self.qid!r}: tool ids must be str, got {type(tool_id).__name__}")
        relevant = _unique(given)
        if not relevant:
            raise InvalidInputError(f"judgement {self.qid!r} has no relevant tool")
        object.__setattr__(self, "relevant", relevant)
        object.__setattr__(self, "acceptable", _unique((*relevant, *also)))


def _top(ranked: Sequence[str]) -> list[str]:
    """First :data:`CUTOFF` distinct ids of ``ranked``."""
    if isinstance(ranked, (str, bytes)):
        # A bare string would otherwise be scored character by character.
        raise TypeError("ranked must be a sequence of tool ids, not a single string")
    top: list[str] = []
    seen: set[str] = set()
    for tool_id in ranked:
        if tool_id in seen:
            continue
        seen.add(tool_id)
        top.append(tool_id)
        if len(top) == CUTOFF:
            break
    return top


def discount(rank: Any) -> Any:
    """nDCG's discount of a hit at 1-based ``rank``, ``1 / log2(rank + 1)``, for a rank or a numpy array of them: the
    one spelling that evaluation (:func:`score_query`) and tuning's objective (``_candidates.CandidateTable.ndcg``)
    share."""
    return 1.0 / np.log2(rank + 1)


def _dcg(hit_ranks: Iterable[int]) -> float:
    return math.fsum(float(discount(rank)) for rank in hit_ranks)


def score_query(ranked: Sequence[str], j: Judgement) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` for one query.

    ``ranked`` is the system's answer, best first; only its first 10 distinct ids
    count.  Metrics that do not apply to the query (``multi ...`` for a
    single-tool query, ``single``/``lenient ...`` for a multi-tool one) are None.
    """
    top = _top(ranked)
    relevant = set(j.relevant)
    n_rel = len(relevant)
    hit_ranks = [rank for rank, tool_id in enumerate(top, start=1) if tool_id in relevant]

    def recall(k: int) -> float:
        return sum(1 for rank in hit_ranks if rank <= k) / n_rel

    scores: dict[str, float | None] = dict.fromkeys(METRICS)
    scores["R@1"] = recall(1)
    scores["R@5"] = recall(5)
    scores["R@10"] = recall(CUTOFF)
    scores["MRR@10"] = 1.0 / hit_ranks[0] if hit_ranks else 0.0
    ideal = _dcg(range(1, min(n_rel, CUTOFF) + 1))
    scores["nDCG@10"] = _dcg(hit_ranks) / ideal

    scores["comp@5"] = 1.0 if sum(1 for rank in hit_ranks if rank <= 5) == n_rel else 0.0
    scores["comp@10"] = 1.0 if len(hit_ranks) == n_rel else 0.0
    if n_rel > 1:
        scores["multi R@10"] = scores["R@10"]
        scores["multi comp@10"] = 1.0 if len(hit_ranks) == n_rel else 0.0
    else:
        acceptable = set(j.acceptable)
        first_ok = next((rank for rank, tool_id in enumerate(top, start=1) if tool_id in acceptable), None)
        first_hit = hit_ranks[0] if hit_ranks else None
        scores["single hit@1"] = 1.0 if first_hit == 1 else 0.0
        scores["single hit@10"] = 1.0 if first_hit is not None else 0.0
        scores["lenient hit@1"] = 1.0 if first_ok == 1 else 0.0
        scores["lenient hit@10"] = 1.0 if first_ok is not None else 0.0
    return scores


def aggregate(per_query: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """Average per-query scores (as returned by :func:`score_query`).

    Each metric is the mean over the queries where it is not None, or None when
    no query qualifies.  Also returns the counts ``n_queries``, ``n_multi``
    (queries with ``multi R@10`` set) and ``n_single`` (queries with
    ``single hit@1`` set).  Every dict must contain every name of :data:`METRICS`.
    """
    values: dict[str, list[float]] = {name: [] for name in METRICS}
    n_queries = 0
    for index, scores in enumerate(per_query):
        missing = [name for name in METRICS if name not in scores]
        if missing:
            raise ValueError(f"per-query scores #{index} lack metric(s) {', '.join(missing)}")
        n_queries += 1
        for name in METRICS:
            value = scores[name]
            if value is not None:
                values[name].append(float(value))

    result: dict[str, float | None] = {
        name: (math.fsum(vals) / len(vals) if vals else None) for name, vals in values.items()
    }
    result["n_queries"] = n_queries
    result["n_multi"] = len(values["multi R@10"])
    result["n_single"] = len(values["single hit@1"])
    return result


def _id_list(where: str, record: dict[str, Any], field: str) -> list[str]:
    value = record[field]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInputError(f"{where}: {field!r} must be a list of non-empty strings")
    for v in value:
        check_at(where, v, f"{field!r} value", max_chars=MAX_ID_CHARS)
    return value


def _records(path: str | os.PathLike[str], what: str) -> Iterator[tuple[int, str, Any]]:
    """Each non-blank line of the labelled file ``path`` (``what`` names it): :func:`_input.json_lines`."""
    return json_lines(read_text_file(path, what), os.fspath(path))


def load_judgements(path: str | os.PathLike[str]) -> list[tuple[str, Judgement]]:
    """Read ``(query text, Judgement)`` pairs from a ``queries.jsonl``/``train.jsonl`` file.

    Each non-blank line is a JSON object with ``qid`` and ``query`` (strings),
    ``relevant`` (a non-empty list of tool ids) and ``acceptable`` (a list of tool
    ids; optional, defaults to ``relevant``).  Raises :class:`~toolstore.InvalidInputError` (a ValueError) naming
    the file and line on malformed input or a repeated ``qid``.
    """
    pairs: list[tuple[str, Judgement]] = []
    first_line: dict[str, int] = {}
    for lineno, where, record in _records(path, "queries file"):
        if not isinstance(record, dict):
            raise InvalidInputError(f"{where}: expected a JSON object")
        missing = [key for key in ("qid", "query", "relevant") if key not in record]
        if missing:
            raise InvalidInputError(f"{where}: missing field(s) {', '.join(missing)}")
        qid, query = record["qid"], record["query"]
        if not isinstance(qid, str) or not qid:
            raise InvalidInputError(f"{where}: 'qid' must be a non-empty string")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError(f"{where}: 'query' must be a non-empty string")
        check_at(where, qid, "'qid'", max_chars=MAX_ID_CHARS)
        check_at(where, query, "'query'", max_chars=MAX_QUERY_CHARS)
        relevant = _id_list(where, record, "relevant")
        if not relevant:
            raise InvalidInputError(f"{where}: 'relevant' is empty")
        acceptable = _id_list(where, record, "acceptable") if "acceptable" in record else []
        if qid in first_line:
            raise InvalidInputError(f"{where}: qid {qid!r} already used on line {first_line[qid]}")
        first_line[qid] = lineno
        pairs.append((query, Judgement(qid, tuple(relevant), tuple(acceptable))))
    return pairs


@dataclass(frozen=True)
class SessionTurn:
    """One user turn of a labelled session: the request, the tools it needs (may be empty: a turn that calls
    nothing is not scored) and the calls made for it, in order, repeats kept."""

    query: str
    relevant: tuple[str, ...]
    calls: tuple[str, ...]


@dataclass(frozen=True)
class LabelledSession:
    """A conversation for evaluating or tuning routing with context (``bfcl_sessions`` format)."""

    sid: str
    turns: tuple[SessionTurn, ...]

    @property
    def calls(self) -> list[str]:
        """Every call of the session, in order (what its log holds)."""
        return [c for turn in self.turns for c in turn.calls]

    def judgement(self, index: int) -> Judgement | None:
        """The judgement of turn ``index`` (0-based), None when the turn needs no tool."""
        turn = self.turns[index]
        return Judgement(f"{self.sid}#{index + 1}", turn.relevant) if turn.relevant else None


def load_sessions(path: str | os.PathLike[str]) -> list[LabelledSession]:
    """Read labelled sessions: one JSON object per line, ``{"sid", "turns": [{"query", "relevant": [ids],
    "calls": [ids in call order]}, ...]}`` (``calls`` defaults to ``relevant``). Raises InvalidInputError naming
    the file, line and field on malformed input or a repeated ``sid``."""
    sessions: list[LabelledSession] = []
    first_line: dict[str, int] = {}
    for lineno, where, record in _records(path, "sessions file"):
        if not isinstance(record, dict) or not isinstance(record.get("turns"), list) or not record["turns"]:
            raise InvalidInputError(f"{where}: expected an object with 'sid' and a non-empty 'turns' list")
        sid = check_at(where, record.get("sid"), "'sid'", max_chars=MAX_ID_CHARS)
        if sid in first_line:
            raise InvalidInputError(f"{where}: sid {sid!r} already used on line {first_line[sid]}")
        first_line[sid] = lineno
        turns = []
        for i, turn in enumerate(record["turns"]):
            at = f"{where}, turn {i + 1}"
            if not isinstance(turn, dict):
                raise InvalidInputError(f"{at}: expected an object")
            query = check_at(at, turn.get("query"), "'query'", max_chars=MAX_QUERY_CHARS)
            relevant = _id_list(at, {"relevant": turn.get("relevant", [])}, "relevant")
            calls = _id_list(at, {"calls": turn.get("calls", relevant)}, "calls")
            turns.append(SessionTurn(query, tuple(dict.fromkeys(relevant)), tuple(calls)))
        sessions.append(LabelledSession(sid, tuple(turns)))
    return sessions
