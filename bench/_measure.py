"""Measurements beside route()'s own: a variant statement's lexical rankings against the statement's, routes with a
session and with messages, an EXPLAIN ANALYZE profile, bulk imports, and filtered statements."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import _synth
import numpy as np
import psycopg
from _harness import OUT, Precomputed, fresh_database, log, route_ids, stats_ms, timed

from toolstore import Embedder, ToolStore
from toolstore._connect import Connector
from toolstore._fusion import Fusion, stored_fusion
from toolstore._models import CatalogInfo
from toolstore._route import route_request, statement_params
from toolstore._sql import query
from toolstore._text import dense_text


def lexical_overlap(
    conn: psycopg.Connection[Any], params: Sequence[dict[str, Any]], text: str, over: dict[str, Any]
) -> float:
    """Mean top-10 overlap of each BM25 field's own ranking, variant vs exact: the statement run with that field's
    weight alone (its fused order is the field's order), at the over-fetch depth."""
    total, count = 0.0, 0
    for p in params:
        for field in ("w_name", "w_description", "w_expansion"):
            alone = p | {w: 0.0 for w in p if w.startswith("w_")}
            alone |= {field: 1.0, "limit": 10, "identifiers": []}
            base = [r[0] for r in conn.execute(query("route"), alone).fetchall()]
            var = [r[0] for r in conn.execute(text, alone | over).fetchall()]
            if base:
                total += len(set(base) & set(var)) / len(base)
                count += 1
    return total / max(1, count)


def bench_sessions(
    store: ToolStore, dsn: str, texts: Sequence[str], qvecs: np.ndarray, cat: _synth.Catalog
) -> dict[str, Any]:
    """route() without a conversation, with a session (its logged calls: recent and transition), and with messages
    (an earlier turn and calls: context too), on the same requests, interleaved in rotating order, every query
    vector already in route()'s cache; then the statement alone with and without the session on one connection."""
    sids = [sid for sid, _ in _synth.sessions(cat, max(1000, len(cat.tools) // 2))]
    calls = dict(_synth.sessions(cat, max(1000, len(cat.tools) // 2)))
    earlier = texts[-1]

    def messages(i: int) -> list[dict[str, Any]]:
        made = [
            {"id": f"c{j}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
            for j, tool in enumerate(calls[sids[i % len(sids)]][-5:])
        ]
        return [
            {"role": "user", "content": earlier},
            {"role": "assistant", "content": None, "tool_calls": made},
            {"role": "user", "content": texts[i]},
        ]

    runs: dict[str, Callable[[int], Any]] = {
        "plain": lambda i: store.route(texts[i]),
        "session": lambda i: store.route(texts[i], session=sids[i % len(sids)]),
        "messages": lambda i: store.route(messages=messages(i)),
    }
    for i in range(len(texts)):  # warm: every text embedded once, so no timed call embeds
        runs["plain"](i), runs["messages"](i)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(len(texts)):
        order = list(runs)[i % 3 :] + list(runs)[: i % 3]
        for name in order:
            times[name].append(timed(runs[name], i)[0])
    info = store.info()
    fusion = stored_fusion(info.settings)
    spool = Connector(dsn, schema="toolstore", max_size=1).pool
    sconn = spool.getconn()
    statement: dict[str, list[float]] = {"plain": [], "session": []}
    for i, (text, qvec) in enumerate(zip(texts, qvecs)):
        params = {
            "plain": statement_params(info, route_request(text, fusion, k=8), qvec),
            "session": statement_params(info, route_request(text, fusion, k=8, session=sids[i % len(sids)]), qvec),
        }
        for name in ("plain", "session") if i % 2 else ("session", "plain"):
            statement[name].append(timed(lambda p=params[name]: route_ids(sconn, p))[0])
    spool.putconn(sconn)
    spool.close()
    out = {f"route_{name}": stats_ms(t) for name, t in times.items()}
    out.update({f"statement_{name}": stats_ms(t) for name, t in statement.items()})
    out["logged_calls"] = sum(len(c) for c in calls.values())
    out["transition_rows"] = len(store.transitions(limit=10**7))
    return out


def explain_profile(conn: psycopg.Connection[Any], params: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Medians over EXPLAIN (ANALYZE, BUFFERS) runs: planning, execution, per-CTE times and rows touched."""
    samples: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    for p in params:
        doc = conn.execute("explain (analyze, buffers, format json) " + query("route"), p).fetchone()[0][0]
        add("planning_ms", doc["Planning Time"])
        add("execution_ms", doc["Execution Time"])
        per: dict[str, float] = {}
        stack = [doc["Plan"]]
        while stack:
            node = stack.pop()
            stack += node.get("Plans", [])
            total = node.get("Actual Total Time", 0.0) * node.get("Actual Loops", 1)
            rows = node.get("Actual Rows", 0.0) * node.get("Actual Loops", 1)
            label = node.get("Subplan Name") or (node.get("Alias") if node["Node Type"] == "Subquery Scan" else None)
            if label in ("CTE dense", "CTE neighbours", "CTE top", "lexical", "intent"):
                per[f"{label.replace('CTE ', '')}_ms"] = total
            if node["Node Type"] == "Function Scan" and node.get("Function Name") == "knn":
                per[f"knn_{node.get('Alias')}_ms"] = total
            if node.get("Relation Name") == "postings":
                per["postings_rows"] = per.get("postings_rows", 0) + rows
            if node.get("Relation Name") == "tools" and "Index" in node["Node Type"]:
                per["tools_index_lookups"] = per.get("tools_index_lookups", 0) + node.get("Actual Loops", 1)
            per["shared_hit_blocks"] = per.get("shared_hit_blocks", 0) + (
                node.get("Shared Hit Blocks", 0) if node is doc["Plan"] else 0
            )
        for key, value in per.items():
            add(key, value)
    return {k: statistics.median(v) for k, v in sorted(samples.items())}


def bench_import(
    admin: str, embedder: Embedder, n: int = 10_000, *, rounds: int = 1, model: bool = True
) -> dict[str, float]:
    """ToolStore.upsert of n new tools into a fresh database: with precomputed vectors (then their intent examples),
    ``rounds`` times (medians; each round's figures too when several), then, with ``model``, embedded by the model
    (and the model alone on the same texts, in the same run)."""
    cat = _synth.catalog(n)
    tv, ev = _synth.load_vectors(n, embedder, OUT, log=log)
    table = {dense_text(t): v for t, v in zip(cat.tools, tv)} | {e.query: v for e, v in zip(cat.examples, ev)}
    stub = Precomputed(table, embedder.model, embedder.dim)
    out: dict[str, float] = {}
    runs: dict[str, list[float]] = {"upsert_precomputed_s": [], "add_examples_precomputed_s": []}
    for i in range(rounds):
        with ToolStore(fresh_database(admin, "bench_import"), embedder=stub, catalog="bench") as store:
            log(f"import {n} tools and {len(cat.examples)} examples, precomputed (round {i + 1} of {rounds})")
            runs["upsert_precomputed_s"].append(timed(lambda: store.upsert(cat.tools))[0])
            runs["add_examples_precomputed_s"].append(timed(lambda: store.add_examples(cat.examples))[0])
    for key, values in runs.items():
        out[key] = statistics.median(values)
        out |= {f"{key[:-2]}_round{i + 1}_s": v for i, v in enumerate(values) if rounds > 1}
    if model:
        log(f"the model alone on the {n} tools' texts")
        out["model_alone_s"], _ = timed(lambda: embedder.embed_many([dense_text(t) for t in cat.tools]))
        with ToolStore(fresh_database(admin, "bench_import"), embedder=embedder, catalog="bench") as store:
            log(f"import {n} tools (local_model)")
            out["upsert_local_model_s"], _ = timed(lambda: store.upsert(cat.tools))
        out["local_model_vs_model_alone"] = out["upsert_local_model_s"] / out["model_alone_s"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("drop database if exists bench_import with (force)")
    return out


def bench_coverage(store: ToolStore, texts: Sequence[str]) -> dict[str, Any]:
    """route() with the catalog's ``split`` (compound requests retrieved clause by clause) and with ``split=0``, on
    the same requests, interleaved in alternating order, each call with route()'s query-vector cache emptied first
    (so a split request embeds its clauses, as a new request would)."""
    vectors = store._query_vectors  # bench only: empty the in-process cache before each timed call

    def cold(i: int, split: float | None) -> Any:
        vectors._lru.clear()
        return store.route(texts[i], split=split)

    times: dict[str, list[float]] = {"on": [], "off": []}
    split_rows, parts = [], []
    for i in range(len(texts)):
        order = [("on", None), ("off", 0.0)] if i % 2 else [("off", 0.0), ("on", None)]
        for name, split in order:
            elapsed, result = timed(cold, i, split)
            times[name].append(elapsed)
            if name == "on" and result.sub_requests:
                split_rows.append(i)
                parts.append(len(result.sub_requests))
    out: dict[str, Any] = {f"route_{k}": stats_ms(v) for k, v in times.items()}
    out["split_share"] = len(split_rows) / max(1, len(texts))
    out["parts_mean"] = statistics.fmean(parts) if parts else 0.0
    for name in times:
        out[f"split_only_{name}"] = stats_ms([times[name][i] for i in split_rows]) if split_rows else None
    return out


def filter_cases(cat: _synth.Catalog) -> dict[str, dict[str, list[str]]]:
    """route() filters of several sizes on the synthetic catalog: its most common providers, and an id glob."""
    providers = [p for p, _ in Counter(t.provider for t in cat.tools).most_common()]
    return {
        "1 provider": {"providers": providers[:1]},
        "30 providers": {"providers": providers[:30]},
        "200 providers": {"providers": providers[:200]},
        "allow a*": {"allow": ["a*"]},
        "block a*": {"block": ["a*"]},
    }


def bench_filters(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    fusion: Fusion,
    cat: _synth.Catalog,
    texts: Sequence[str],
    qvecs: np.ndarray,
) -> dict[str, Any]:
    """The route statement with each filter of filter_cases() and without, on the same requests (query vectors
    precomputed), interleaved in alternating order; and how many tools each filter keeps."""
    out: dict[str, Any] = {}
    plain = [statement_params(info, route_request(t, fusion, k=8), v) for t, v in zip(texts, qvecs)]
    for name, case in filter_cases(cat).items():
        filtered = [statement_params(info, route_request(t, fusion, k=8, **case), v) for t, v in zip(texts, qvecs)]
        times: dict[str, list[float]] = {"filtered": [], "unfiltered": []}
        for i in range(len(texts)):
            order = [("filtered", filtered), ("unfiltered", plain)]
            for label, params in order if i % 2 else order[::-1]:
                elapsed, _ = timed(lambda p: route_ids(conn, p), params[i])
                times[label].append(elapsed)
        p = filtered[0]
        kept = conn.execute(  # route_kept() lists the smaller of the kept and the dropped tools (migration 0016)
            "select case when k.dropped then (select count(*) from tools t where t.catalog_id = %s) - "
            "cardinality(k.pks) else cardinality(k.pks) end from route_kept(%s, %s, %s, %s, %s, %s) k",
            [info.id, info.id, p["allow"], p["block"], p["categories"], p["providers"], p["tags"]],
        ).fetchone()
        out[name] = {"kept": kept[0] if kept else None, **{k: stats_ms(v) for k, v in times.items()}}
    return out
