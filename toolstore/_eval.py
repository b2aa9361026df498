"""evaluate(): route labelled queries through the real ``store.route()`` under several fusion configs and score them;
evaluate_sessions(): replay labelled sessions turn by turn, routing each with the conversation so far."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from ._errors import InvalidInputError
from ._fusion import DEFAULT_FUSION, DEFAULT_TURNS, SIGNALS, UNIFORM, Fusion
from ._metrics import METRICS, Judgement, LabelledSession, aggregate, score_query

if TYPE_CHECKING:
    from ._result import RouteResult
    from ._store import ToolStore


def _only(*signals: str) -> Fusion:
    return Fusion(weights={s: 1.0 if s in signals else 0.0 for s in SIGNALS}, split=0.0)


#: Built-in configs. ``default`` is route()'s fusion in a catalog never tuned; None (``tuned``) is the fusion the
#: catalog has stored, what route() uses when given no weights.
BUILTIN_CONFIGS: dict[str, Fusion | None] = {
    "name": _only("name"),
    "description": _only("description"),
    "expansion": _only("expansion"),
    "bm25": _only("name", "description", "expansion"),
    "dense": _only("dense"),
    "intent": _only("intent"),
    "uniform": UNIFORM,
    "default": DEFAULT_FUSION,
    "tuned": None,
}


def select_configs(names: Iterable[str] | None = None, *, tuned: bool = True) -> dict[str, Fusion | None]:
    """The built-in configs called ``names`` (all of them when None; ``tuned`` only if ``tuned``).

    Raises InvalidInputError naming any unknown config.
    """
    if names is None:
        return {n: f for n, f in BUILTIN_CONFIGS.items() if tuned or n != "tuned"}
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in BUILTIN_CONFIGS]
    if unknown:
        raise InvalidInputError(
            f"unknown config(s) {', '.join(map(repr, unknown))}; known: {', '.join(BUILTIN_CONFIGS)}"
        )
    return {n: BUILTIN_CONFIGS[n] for n in names}


def check_queries(store: ToolStore, queries: Sequence[tuple[str, Judgement]], what: str = "queries") -> set[str]:
    """Raise InvalidInputError unless ``queries`` are (text, Judgement) pairs naming tools of the catalog."""
    if not queries:
        raise InvalidInputError(f"no {what} given")
    known = {t.id for t in store.tools()}
    unknown: dict[str, str] = {}
    for item in queries:
        if not (
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], Judgement)
        ):
            raise InvalidInputError(f"{what} must be (query text, Judgement) pairs, got {item!r:.80}")
        for tool_id in item[1].acceptable:
            if tool_id not in known:
                unknown.setdefault(tool_id, item[1].qid)
    if unknown:
        shown = ", ".join(f"{t!r} (in {q!r})" for t, q in list(unknown.items())[:5])
        raise InvalidInputError(f"{what} name {len(unknown)} tool id(s) not in catalog {store.catalog!r}: {shown}")
    return known


def check_sessions(store: ToolStore, sessions: Sequence[LabelledSession]) -> set[str]:
    """Raise InvalidInputError unless ``sessions`` are LabelledSessions whose tools are all in the catalog."""
    if not sessions:
        raise InvalidInputError("no sessions given")
    known = {t.id for t in store.tools()}
    for session in sessions:
        if not isinstance(session, LabelledSession):
            raise InvalidInputError(f"sessions must be LabelledSession objects, got {type(session).__name__}")
        for i, turn in enumerate(session.turns):
            unknown = sorted({*turn.relevant, *turn.calls} - known)
            if unknown:
                raise InvalidInputError(
                    f"session {session.sid!r} turn {i + 1} names tool(s) not in catalog {store.catalog!r}: "
                    + ", ".join(map(repr, unknown[:5]))
                )
    return known


def _progress(items: Sequence[Any], desc: str, enabled: bool) -> Iterable[Any]:
    if not enabled or not sys.stderr.isatty():
        return items
    return tqdm(items, desc=desc, unit="q", leave=False)


def _fusion_options(fusion: Fusion | None, k: int) -> dict[str, Any]:
    """route()'s options for a config's ``fusion``: all of it, so none of the catalog's own applies (None: the
    catalog's own, no options)."""
    if fusion is None:
        return {}
    return {
        "weights": fusion.weights,
        "k_rrf": fusion.k_rrf,
        "overfetch": fusion.depth(k),
        "split": fusion.split,
        "avoid": fusion.avoid,
    }


def routed_scores(result: RouteResult, judgement: Judgement) -> dict[str, float | None] | None:
    """:func:`score_query` of a route's routed tools, in order: always-on tools are offered on every turn whatever the
    router does (and packed first, where they would take the first ranks), so they are left out of the ranking, and
    the relevant ones the route offered out of the judgement. None (not scored) when the request needs nothing else:
    nothing of it was the router's to find."""
    offered = {r.tool.id for r in result.tools if r.always_on}
    relevant = [i for i in judgement.relevant if i not in offered]
    if not relevant:
        return None
    routed = Judgement(judgement.qid, tuple(relevant), tuple(i for i in judgement.acceptable if i not in offered))
    return score_query([r.tool.id for r in result.tools if not r.always_on], routed)


def _config_row(scores: Sequence[dict[str, Any]], latencies: Sequence[float]) -> dict[str, Any]:
    """A config's row of a report: the metrics averaged over ``scores`` (:func:`score_query`'s) and the latencies'
    median and 95th percentile, in milliseconds."""
    summary = aggregate(scores)
    row: dict[str, Any] = {m: summary[m] for m in METRICS}
    row["latency_ms_p50"] = float(np.percentile(latencies, 50))
    row["latency_ms_p95"] = float(np.percentile(latencies, 95))
    return row


def degraded(reasons: Sequence[str | None]) -> dict[str, Any] | None:
    """A report's ``degraded``: how many of its routes answered without all they were asked for (``routes``, each
    with a ``degraded_reason``: the embedder down or missing, so lexically only), of how many (``of``), and the first
    one's ``reason``; None when every route was whole."""
    said = [reason for reason in reasons if reason]
    return {"routes": len(said), "of": len(reasons), "reason": said[0]} if said else None


def evaluate(
    store: ToolStore,
    queries: Sequence[tuple[str, Judgement]],
    *,
    configs: Mapping[str, Fusion | None] | None = None,
    k: int = 10,
    progress: bool = False,
) -> dict[str, Any]:
    """Route every query through ``store.route(query, k=k)`` under each config and average the metrics of its
    routed tools (:func:`routed_scores`: always-on tools left out).

    ``queries``: (text, Judgement) pairs, e.g. from :func:`toolstore._metrics.load_judgements`.
    ``configs``: name -> Fusion (weights, k_rrf, over-fetch passed explicitly) or None (the catalog's
    own fusion, i.e. tuned weights when stored); default: every built-in config. ``progress``: a tqdm
    bar on stderr when it is a terminal.

    Returns ``{"configs": {name: {metric: value, ..., "latency_ms_p50", "latency_ms_p95"}},
    "n_queries": int, "n_tools": int, "degraded": ...}`` with metric names as in :data:`toolstore._metrics.METRICS`;
    ``degraded`` (:func:`degraded`) says how many routes answered lexically only and why, None when none did: a
    config's numbers are then not its signals' (dense scored on lexical routes).
    """
    configs = dict(BUILTIN_CONFIGS if configs is None else configs)
    if not configs:
        raise InvalidInputError("no configs to evaluate")
    known = check_queries(store, list(queries))
    results: dict[str, dict[str, Any]] = {}
    reasons: list[str | None] = []
    for name, fusion in configs.items():
        if fusion is not None and not isinstance(fusion, Fusion):
            raise InvalidInputError(f"config {name!r} must be a Fusion or None, got {type(fusion).__name__}")
        per_query, latencies = [], []
        for text, judgement in _progress(queries, name, progress):
            started = time.perf_counter()
            result = store.route(text, k=k, **_fusion_options(fusion, k))
            latencies.append((time.perf_counter() - started) * 1000)
            if (scores := routed_scores(result, judgement)) is not None:
                per_query.append(scores)
            reasons.append(result.degraded_reason)
        results[name] = _config_row(per_query, latencies)
    return {"configs": results, "n_queries": len(queries), "n_tools": len(known), "degraded": degraded(reasons)}


#: Session configs: (fusion, with the conversation). ``turn`` routes each turn alone with the default fusion (what
#: route() did before conversations), ``session`` with the conversation so far and the default fusion, ``tuned``
#: with the conversation and the catalog's stored fusion.
SESSION_CONFIGS: dict[str, tuple[Fusion | None, bool]] = {
    "turn": (DEFAULT_FUSION, False),
    "session": (DEFAULT_FUSION, True),
    "tuned": (None, True),
}


def replay_messages(session: LabelledSession, index: int) -> list[dict[str, Any]]:
    """The OpenAI Chat Completions messages of ``session`` up to turn ``index`` (0-based; its request last): each
    earlier request followed by the assistant's calls of that turn's tools (by id) and their results."""
    messages: list[dict[str, Any]] = []
    for i, turn in enumerate(session.turns[:index]):
        messages.append({"role": "user", "content": turn.query})
        if turn.calls:
            calls = [
                {"id": f"call_{i}_{j}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
                for j, tool in enumerate(turn.calls)
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
        messages.append({"role": "assistant", "content": "Done."})
    messages.append({"role": "user", "content": session.turns[index].query})
    return messages


def evaluate_sessions(
    store: ToolStore,
    sessions: Sequence[LabelledSession],
    *,
    configs: Sequence[str] = tuple(SESSION_CONFIGS),
    k: int = 10,
    turns: int = DEFAULT_TURNS,
    progress: bool = False,
) -> dict[str, Any]:
    """Replay every session through the real ``store.route()``: turn i is routed with the conversation so far (the
    earlier requests and the calls that followed them, as messages; nothing is written to the session log, so
    transitions come only from what the catalog logged before), under each of ``configs`` (see
    :data:`SESSION_CONFIGS`). Turns that need no tool are context but not scored.

    Returns ``{"configs": {name: {metric: value, ..., "latency_ms_p50", "latency_ms_p95"}}, "n_sessions",
    "n_turns", "n_tools", "degraded"}`` (``degraded``: as :func:`evaluate`'s).
    """
    unknown = [c for c in configs if c not in SESSION_CONFIGS]
    if unknown or not configs:
        raise InvalidInputError(f"unknown session config(s) {unknown!r}; known: {', '.join(SESSION_CONFIGS)}")
    sessions = list(sessions)
    known = check_sessions(store, sessions)
    turns_to_score = [(s, i) for s in sessions for i in range(len(s.turns)) if s.turns[i].relevant]
    if not turns_to_score:
        raise InvalidInputError("no turn of the sessions names a relevant tool: nothing to score")
    results: dict[str, dict[str, Any]] = {}
    reasons: list[str | None] = []
    for name in configs:
        fusion, with_context = SESSION_CONFIGS[name]
        options: dict[str, Any] = {"k": k, **_fusion_options(fusion, k)}
        per_turn, latencies = [], []
        for session, i in _progress(turns_to_score, name, progress):
            started = time.perf_counter()
            if with_context:
                result = store.route(messages=replay_messages(session, i), turns=turns, **options)
            else:
                result = store.route(session.turns[i].query, **options)
            latencies.append((time.perf_counter() - started) * 1000)
            judgement = session.judgement(i)
            assert judgement is not None
            if (scores := routed_scores(result, judgement)) is not None:
                per_turn.append(scores)
            reasons.append(result.degraded_reason)
        results[name] = _config_row(per_turn, latencies)
    counts = {"n_sessions": len(sessions), "n_turns": len(turns_to_score), "n_tools": len(known)}
    return {"configs": results, **counts, "degraded": degraded(reasons)}


TABLE_COLUMNS = ("R@1", "R@10", "MRR@10", "nDCG@10", "multi R@10", "multi comp@10", "latency_ms_p50", "latency_ms_p95")


def format_table(report: Mapping[str, Any], columns: Sequence[str] = TABLE_COLUMNS, *, markdown: bool = False) -> str:
    """The configs of an :func:`evaluate` report as a plain-text (or markdown) table."""
    heads = [
        "config",
        *("p50 ms" if c == "latency_ms_p50" else "p95 ms" if c == "latency_ms_p95" else c for c in columns),
    ]

    def cell(value: Any, column: str) -> str:
        if value is None:
            return "-"
        return f"{value:.1f}" if column.startswith("latency") else f"{value:.3f}"

    rows = [[name, *(cell(cfg.get(c), c) for c in columns)] for name, cfg in report["configs"].items()]
    if markdown:
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(heads), *(fmt(r) for r in rows)])
