"""Routing benchmark: route() and the route statement against an in-process reference, at 1k/10k/100k tools.

    python bench/route.py [--sizes 1000,10000,100000] [--requests 500] [--quick] [--json OUT] [--explain N]
                          [--variants bench/control.sql,...] [--max-df F] [--lexical-caps 1000,...]
                          [--no-import] [--prebuild]
    python bench/route.py --catalogs 1000 [--catalogs-hnsw]     # many catalogs in one database (bench/_catalogs.py)

Catalogs come from bench/_synth.py; vectors from the shipped local model (all-MiniLM-L6-v2), cached in bench/out
(see --embed-all). Each size gets its own database (``bench_<n>_v<generator>``), reused while the migrations are
unchanged, on $TOOLSTORE_DSN's server or the embedded one under $TOOLSTORE_HOME (default bench/out/home).
All numbers of one size come from one run, requests interleaved in rotating order (in-process, statement, route()).
The issue-15 targets are printed with the measured value of this run at the end (TARGETS).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the reference runs on one thread
    os.environ.setdefault(_var, "1")

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import _synth
from _inprocess import Reference

from toolstore import Embedder, HashingEmbedder, LocalEmbedder, ToolStore, migrate
from toolstore._catalog import catalog_info
from toolstore._connect import Connector
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._rows import tool_row
from toolstore._sql import parse_blocks, query
from toolstore._text import dense_text, query_identifiers, query_text
from toolstore._vectors import ensure_indexes, write_examples, write_tool_vectors

OUT = BENCH / "out"
_sent = [0]  # statements this process sent to the server (route()'s round trips are counted with it)
_execute = psycopg.Cursor.execute


def _counting_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
    _sent[0] += 1
    return _execute(self, *args, **kwargs)


psycopg.Cursor.execute = _counting_execute  # type: ignore[method-assign]
TEST_BLOCKS = parse_blocks((BENCH.parent / "tests" / "retrievers.sql").read_text())  # each retriever alone
BATCH = 5000
CLIENTS = 8


class Precomputed(Embedder):
    """An embedder that looks vectors up: the fastest honest way to import pre-embedded tools via upsert()."""

    def __init__(self, table: dict[str, np.ndarray], model: str, dim: int) -> None:
        self.table, self.model, self.dim = table, model, dim

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def admin_dsn() -> str:
    if os.environ.get("TOOLSTORE_DSN"):
        return os.environ["TOOLSTORE_DSN"]
    os.environ.setdefault("TOOLSTORE_HOME", str(OUT / "home"))
    from toolstore._embedded import embedded_dsn

    return embedded_dsn()


def fresh_database(admin: str, name: str) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    dsn = make_conninfo(admin, dbname=name)
    migrate(dsn)
    return dsn


def schema_hash() -> str:
    """The migrations' text: a cached database is rebuilt when they change (they are edited in place)."""
    files = sorted((BENCH.parent / "migrations" / "versions").glob("*.py"))
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]


def built_database(
    admin: str,
    n: int,
    cat: _synth.Catalog,
    vectors: Callable[[], tuple[np.ndarray, np.ndarray]],
    model: str,
    tag: str = "",
) -> str:
    """The size-n database, built unless a complete one of this generator version and model exists."""
    name = f"bench_{n}_v{_synth.GENERATOR_VERSION}" + ("" if model == LocalEmbedder.model else "_" + model[:12])
    dsn = make_conninfo(admin, dbname=name)
    schema = schema_hash() + tag
    try:
        with psycopg.connect(dsn) as conn:
            if conn.execute("select 1 from public.bench_meta where schema = %s", [schema]).fetchone():
                return dsn
    except psycopg.Error:
        pass
    log(f"building {name}: {n} tools, {len(cat.examples)} examples")
    started = time.perf_counter()
    dsn = fresh_database(admin, name)
    ToolStore(dsn, embedder=None, catalog="bench").close()  # migrates
    pool = Connector(dsn, schema="toolstore", max_size=1).pool
    # The library's own write statements, batched, with the HNSW indexes built once at the end.
    with pool.connection() as conn:
        conn.execute(query("ensure_catalog"), {"name": "bench"})
        catalog = conn.execute("select id from catalogs where name = 'bench'").fetchone()[0]
        conn.execute("set maintenance_work_mem = '1GB'")
        conn.execute("set max_parallel_maintenance_workers = 2")
        for start in range(0, n, BATCH):
            rows = json.dumps([tool_row(t) for t in cat.tools[start : start + BATCH]], ensure_ascii=False)
            conn.execute(query("upsert_tools"), {"catalog": catalog, "rows": rows})
        tv, ev = vectors()  # may still be being embedded: the tools go in meanwhile
        conn.execute(query("set_catalog_model"), {"catalog": catalog, "model": model, "dim": tv.shape[1]})
        for start in range(0, n, BATCH):
            with conn.transaction():
                ids, vecs = [t.id for t in cat.tools[start : start + BATCH]], list(tv[start : start + BATCH])
                write_tool_vectors(conn, catalog, ids, vecs)
        for start in range(0, len(cat.examples), 4 * BATCH):
            ex = zip(cat.examples[start : start + 4 * BATCH], ev[start : start + 4 * BATCH])
            with conn.transaction():
                write_examples(conn, catalog, [(e.tool_id, e.query, v) for e, v in ex])
        ensure_indexes(conn, catalog_info(conn, "bench"))
    pool.close()
    with ToolStore(dsn, embedder=None, catalog="bench") as store:  # a session log: the library's own write path
        logs = _synth.sessions(cat, max(1000, n // 2))
        for start in range(0, len(logs), 500):
            store.import_sessions(logs[start : start + 500])
    pool = Connector(dsn, schema="toolstore", max_size=1).pool
    with pool.connection() as conn:
        conn.execute("vacuum analyze")
        conn.execute("create table public.bench_meta as select %s::text as schema", [schema])
    pool.close()
    log(f"built {name} in {time.perf_counter() - started:.0f} s")
    return dsn


def stats_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50": statistics.median(ms),
        "p95": ms[min(len(ms) - 1, int(0.95 * len(ms)))],
        "mean": statistics.fmean(ms),
    }


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def throughput(work: Callable[[int], None], items: int, clients: int = CLIENTS) -> float:
    """Items per second with ``clients`` threads splitting ``items`` calls of ``work(i)``."""

    def run(c: int) -> None:
        for i in range(c, items, clients):
            work(i)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return items / (time.perf_counter() - start)


def bench_size(
    admin: str,
    n: int,
    requests: int,
    embedder: Embedder,
    variants: dict[str, dict[str, str]],
    derive: bool,
    explain: int = 0,
    prebuild: bool = False,
) -> dict[str, Any]:
    cat = _synth.catalog(n)

    def vectors() -> tuple[np.ndarray, np.ndarray]:
        return _synth.load_vectors(n, embedder, OUT, log=log, derive=derive)

    dsn = built_database(admin, n, cat, vectors, embedder.model, tag="/derived" if derive and n > _synth.CHUNK else "")
    if prebuild:
        return {}
    tv, ev = vectors()
    warm, tput = 30, max(requests, 400)
    every = _synth.queries(cat, warm + requests + tput)  # distinct texts: route() caches query vectors
    queries, warmup, tput_texts = (
        every[warm : warm + requests],
        every[:warm],
        [q.text for q in every[warm + requests :]],
    )
    texts = [q.text for q in queries]
    qvecs = embedder.embed_many(texts)
    with ToolStore(dsn, embedder=embedder, catalog="bench", pool_size=CLIENTS) as store:
        info = store.info()
        fusion = stored_fusion(info.settings)
        params = [statement_params(info, route_request(t, fusion, k=8), v) for t, v in zip(texts, qvecs)]
        with store.pool.connection() as conn:
            lexemes = [
                [r[0] for r in conn.execute(TEST_BLOCKS["query_lexemes"], {"query_text": query_text(t)})] for t in texts
            ]
            log(f"{n}: loading the in-process reference")
            ref = Reference(
                conn, info.id, dict(zip((t.id for t in cat.tools), tv)), ev, [e.tool_id for e in cat.examples]
            )
            touched = [
                sum(len(f.index[x].tools) for f in ref.fields.values() for x in q if x in f.index) for q in lexemes
            ]

            # a fresh session: see PROFILE.md on the A/A control
            spool = Connector(dsn, schema="toolstore", max_size=1).pool
            sconn = spool.getconn()

            def statement(i: int, text: str = query("route")) -> list[str]:
                return [r[0] for r in sconn.execute(text, params[i]).fetchall()]

            def inprocess(i: int) -> list[str]:
                return ref.route(lexemes[i], query_identifiers(texts[i]), qvecs[i], params[i])

            def routed(i: int) -> list[str]:
                return [c.tool.id for c in store.route(texts[i]).tools]

            conn.execute("truncate embedding_cache")  # route() must embed every timed query
            for i, q in enumerate(warmup):  # warm the buffer cache, the plans and the model
                statement(i), inprocess(i), store.route(q.text)
            times: dict[str, list[float]] = {"inprocess": [], "statement": [], "route": [], "embed": []}
            trips = 0
            same10, overlap10, hits, targeted = 0.0, 0.0, 0, 0
            log(f"{n}: timing {requests} requests")
            runs = {"inprocess": inprocess, "statement": statement, "route": routed}
            for i, q in enumerate(queries):
                got: dict[str, list[str]] = {}
                for name in list(runs)[i % 3 :] + list(runs)[: i % 3]:  # rotate: the in-process scan evicts CPU caches
                    sent = _sent[0]
                    elapsed, got[name] = timed(runs[name], i)
                    times[name].append(elapsed)
                    trips += (_sent[0] - sent) if name == "route" else 0
                ref_ids, sql_ids, route_ids = got["inprocess"], got["statement"], got["route"]
                times["embed"].append(timed(embedder.embed, texts[i])[0])
                same10 += sql_ids[:10] == ref_ids[:10]
                overlap10 += len(set(sql_ids[:10]) & set(ref_ids[:10])) / max(1, min(10, len(ref_ids)))
                if q.target is not None:
                    targeted += 1
                    hits += q.target in route_ids  # route() returns k=8 tools
            variant_out = {}
            for name, blocks in variants.items():
                log(f"{n}: variant {name}")
                vpool = Connector(dsn, schema="toolstore", max_size=1).pool  # its own session: `setup` may SET things
                vconn = vpool.getconn()
                if "setup" in blocks:
                    vconn.execute(blocks["setup"])
                vtext = blocks.get("route", query("route"))
                vparams = json.loads(blocks.get("params", "{}"))

                def variant(i: int, vconn: Any = vconn, vtext: str = vtext, over: Any = vparams) -> list[str]:
                    return [r[0] for r in vconn.execute(vtext, params[i] | over).fetchall()]

                for i in range(len(warmup)):
                    variant(i)
                vt, agree, agree10, hit_base, hit_var = [], 0.0, 0.0, 0, 0
                for i, q in enumerate(queries):
                    first, second = (statement, variant) if i % 2 else (variant, statement)  # the 2nd runs warmer
                    (t_a, ids_a), (t_b, ids_b) = timed(first, i), timed(second, i)
                    (t_base, base_ids), (t_var, var_ids) = (
                        ((t_a, ids_a), (t_b, ids_b)) if i % 2 else ((t_b, ids_b), (t_a, ids_a))
                    )
                    vt.append((t_base, t_var))
                    agree += len(set(base_ids[:8]) & set(var_ids[:8])) / max(1, min(8, len(base_ids)))
                    agree10 += len(set(base_ids[:10]) & set(var_ids[:10])) / max(1, min(10, len(base_ids)))
                    hit_base += q.target in base_ids[:8]
                    hit_var += q.target in var_ids[:8]
                variant_out[name] = {
                    "baseline": stats_ms([a for a, _ in vt]),
                    "variant": stats_ms([b for _, b in vt]),
                    "top8_overlap": agree / requests,
                    "top10_overlap": agree10 / requests,
                    "lexical_top10_overlap": lexical_overlap(sconn, params, vtext, vparams) if vparams else None,
                    "hit8_baseline": hit_base / max(1, targeted),
                    "hit8_variant": hit_var / max(1, targeted),
                }
                vpool.putconn(vconn)
                vpool.close()
            explained = explain_profile(sconn, params[:explain]) if explain else {}
            spool.putconn(sconn)
            spool.close()

        log(f"{n}: route() with a session vs without")
        session_out = bench_sessions(store, dsn, texts, qvecs, cat)

        def pooled_statement(i: int) -> None:
            with store.pool.connection() as c:
                c.execute(query("route"), params[i % requests]).fetchall()

        log(f"{n}: throughput with {CLIENTS} clients")
        rps_route = throughput(lambda i: store.route(tput_texts[i]), tput)
        rps_statement = throughput(pooled_statement, tput)
    result = {k: stats_ms(v) for k, v in times.items()}
    return {
        "tools": n,
        "examples": len(cat.examples),
        "requests": requests,
        **result,
        "ratio_statement_inprocess": result["statement"]["p50"] / result["inprocess"]["p50"],
        "round_trips_per_route": trips / requests,
        "top10_identical": same10 / requests,
        "top10_overlap": overlap10 / requests,
        "route_hit8_targeted": hits / max(1, targeted),
        "postings_rows": ref.postings_rows,
        "postings_touched_mean": statistics.fmean(touched),
        "query_lexemes_mean": statistics.fmean(len(x) for x in lexemes),
        "routes_per_s": rps_route,
        "statements_per_s": rps_statement,
        "variants": variant_out,
        "explain": explained,
        "sessions": session_out,
    }


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
            statement[name].append(timed(lambda p=params[name]: sconn.execute(query("route"), p).fetchall())[0])
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


def bench_import(admin: str, embedder: Embedder, n: int = 10_000) -> dict[str, float]:
    """ToolStore.upsert of n new tools: with precomputed vectors, then embedded by the local model (and the model
    alone on the same texts, in the same run)."""
    cat = _synth.catalog(n)
    tv, ev = _synth.load_vectors(n, embedder, OUT, log=log)
    table = {dense_text(t): v for t, v in zip(cat.tools, tv)} | {e.query: v for e, v in zip(cat.examples, ev)}
    stub = Precomputed(table, embedder.model, embedder.dim)
    out: dict[str, float] = {}
    log(f"the model alone on the {n} tools' texts")
    out["model_alone_s"], _ = timed(lambda: embedder.embed_many([dense_text(t) for t in cat.tools]))
    for label, emb in (("precomputed", stub), ("local_model", embedder)):
        dsn = fresh_database(admin, "bench_import")
        with ToolStore(dsn, embedder=emb, catalog="bench") as store:
            log(f"import {n} tools ({label})")
            out[f"upsert_{label}_s"], _ = timed(lambda: store.upsert(cat.tools))
            if label == "precomputed":
                out["add_examples_precomputed_s"], _ = timed(lambda: store.add_examples(cat.examples))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("drop database if exists bench_import with (force)")
    out["local_model_vs_model_alone"] = out["upsert_local_model_s"] / out["model_alone_s"]
    return out


#: The issue's targets: (label, size or None for imports, key, bound, True when the value must be at most the bound).
TARGETS = [
    ("route() p50 ms at 10k (embedding included)", 10_000, ("route", "p50"), 10.0, True),
    ("route() p50 ms at 100k", 100_000, ("route", "p50"), 30.0, True),
    ("statement / in-process p50 at 10k", 10_000, ("ratio_statement_inprocess",), 1.5, True),
    ("statement / in-process p50 at 100k", 100_000, ("ratio_statement_inprocess",), 1.0, True),
    ("route() per s, 8 clients, at 10k", 10_000, ("routes_per_s",), 250.0, False),
    ("round trips per route()", 10_000, ("round_trips_per_route",), 1.0, True),
    ("import 10k tools, precomputed, s", None, ("upsert_precomputed_s",), 5.0, True),
    ("import 30k intent examples, precomputed, s", None, ("add_examples_precomputed_s",), 10.0, True),
    ("import through the local model / model alone", None, ("local_model_vs_model_alone",), 1.2, True),
]


def targets(results: list[dict[str, Any]], imports: dict[str, float]) -> str:
    """Each target with this run's value (targets whose size was not run are left out)."""
    lines = ["| target | bound | measured | met |", "|---|---|---|---|"]
    by_size = {r["tools"]: r for r in results}
    for label, size, path, bound, at_most in TARGETS:
        source: Any = imports if size is None else by_size.get(size)
        if not source:
            continue
        for key in path:
            source = source[key]
        met = source <= bound if at_most else source >= bound
        lines.append(f"| {label} | {'<=' if at_most else '>='} {bound:g} | {source:.2f} | {'yes' if met else 'NO'} |")
    return "\n".join(lines)


def table(results: list[dict[str, Any]], imports: dict[str, float]) -> str:
    rows = [
        ("route() p50 / p95 ms", lambda r: f"{r['route']['p50']:.1f} / {r['route']['p95']:.1f}"),
        ("  round trips per route()", lambda r: f"{r['round_trips_per_route']:.2f}"),
        ("  query embedding alone p50 ms", lambda r: f"{r['embed']['p50']:.1f}"),
        ("statement p50 / p95 ms", lambda r: f"{r['statement']['p50']:.1f} / {r['statement']['p95']:.1f}"),
        ("in-process p50 / p95 ms", lambda r: f"{r['inprocess']['p50']:.2f} / {r['inprocess']['p95']:.2f}"),
        ("statement / in-process (p50)", lambda r: f"{r['ratio_statement_inprocess']:.2f}x"),
        ("top-10 identical / overlap", lambda r: f"{r['top10_identical']:.2f} / {r['top10_overlap']:.3f}"),
        ("route() hit@8 (targeted queries)", lambda r: f"{r['route_hit8_targeted']:.2f}"),
        (f"route() /s, {CLIENTS} clients", lambda r: f"{r['routes_per_s']:.0f}"),
        (f"statement /s, {CLIENTS} clients", lambda r: f"{r['statements_per_s']:.0f}"),
        (
            "route() p50 ms: plain / session / messages",
            lambda r: " / ".join(f"{r['sessions'][f'route_{x}']['p50']:.1f}" for x in ("plain", "session", "messages")),
        ),
        (
            "  session - plain, p50 ms (statement alone)",
            lambda r: (
                f"{r['sessions']['route_session']['p50'] - r['sessions']['route_plain']['p50']:+.2f} "
                f"({r['sessions']['statement_session']['p50'] - r['sessions']['statement_plain']['p50']:+.2f})"
            ),
        ),
        (
            "  log: calls / transition rows",
            lambda r: f"{r['sessions']['logged_calls']:,} / {r['sessions']['transition_rows']:,}",
        ),
        ("postings rows / touched per query", lambda r: f"{r['postings_rows']} / {r['postings_touched_mean']:.0f}"),
    ]
    for name in results[0]["variants"] if results else []:
        rows.append(
            (
                f"{name}: p50 ms vs base, top-10 overlap (route, lexical), hit@8 vs base",
                lambda r, v=name: (
                    f"{r['variants'][v]['variant']['p50']:.1f} vs {r['variants'][v]['baseline']['p50']:.1f}, "
                    f"{r['variants'][v]['top10_overlap']:.3f}, "
                    f"{r['variants'][v]['lexical_top10_overlap'] or float('nan'):.3f}, "
                    f"{r['variants'][v]['hit8_variant']:.2f} vs {r['variants'][v]['hit8_baseline']:.2f}"
                ),
            )
        )
    head = "| | " + " | ".join(f"{r['tools']:,} tools" for r in results) + " |"
    lines = [head, "|---" * (len(results) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(fmt(r) for r in results) + " |" for label, fmt in rows]
    for key in results[0]["explain"] if results else []:
        lines.append(
            f"| explain: {key} (median) | " + " | ".join(f"{r['explain'].get(key, 0):.1f}" for r in results) + " |"
        )
    for key, value in imports.items():
        lines.append(f"| import 10k: {key} | {value:.1f} |" + " |" * (len(results) - 1))
    return "\n".join(lines)


def git_state() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=BENCH.parent, capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", "sql", "migrations", "toolstore")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes to core files" if dirty else "")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="1k and 10k tools, 200 requests")
    parser.add_argument("--json", type=Path, default=OUT / "route.json")
    parser.add_argument("--variants", default="", help="comma-separated .sql files with a `route` block to compare")
    parser.add_argument(
        "--max-df",
        type=float,
        help="also compare the route statement with query lexemes whose "
        "df exceeds this fraction of the field's tools dropped (the pruning lever)",
    )
    parser.add_argument(
        "--lexical-caps",
        default="",
        help="comma-separated postings caps per query term to compare with exact BM25 (route's lexical_cap)",
    )
    parser.add_argument("--catalogs", type=int, help="many-catalog mode: this many catalogs of 1,000 tools")
    parser.add_argument(
        "--catalogs-hnsw", action="store_true", help="many-catalog mode: also measure a partial HNSW index per catalog"
    )
    parser.add_argument("--no-import", action="store_true", help="skip the 10k import timings")
    parser.add_argument("--explain", type=int, default=0, help="EXPLAIN ANALYZE this many requests per size")
    parser.add_argument("--prebuild", action="store_true", help="only build (or check) the databases, then exit")
    parser.add_argument("--hashing", action="store_true", help="development: HashingEmbedder(384), not the model")
    parser.add_argument(
        "--embed-all",
        action="store_true",
        help="embed every tool and example with the model (default: the first 10k; the rest are "
        "recombined from those vectors, see _synth.derived_chunk)",
    )
    args = parser.parse_args(argv)
    sizes = [1000, 10_000] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    requests = 200 if args.quick else args.requests
    variants = {Path(p).stem: parse_blocks(Path(p).read_text()) for p in args.variants.split(",") if p}
    if args.max_df is not None:
        variants[f"max_df_{args.max_df:g}"] = {"route": pruned_route(args.max_df)}
    for cap in (int(c) for c in args.lexical_caps.split(",") if c):
        variants[f"lexical_cap_{cap}"] = {"params": json.dumps({"lexical_cap": cap})}
    admin = admin_dsn()
    embedder: Embedder = HashingEmbedder(384) if args.hashing else LocalEmbedder()
    if args.catalogs:
        import _catalogs

        many = _catalogs.run(admin, args.catalogs, requests, embedder, log, args.catalogs_hnsw)
        print(json.dumps(many, indent=2))
        path = args.json if args.json != OUT / "route.json" else OUT / f"catalogs_{args.catalogs}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"meta": run_meta(args), "catalogs": many}, indent=2))
        log(f"wrote {path}")
        return
    derive = not args.embed_all
    results = [bench_size(admin, n, requests, embedder, variants, derive, args.explain, args.prebuild) for n in sizes]
    if args.prebuild:
        return
    imports = {} if args.no_import else bench_import(admin, embedder)
    print(table(results, imports))
    print()
    print(targets(results, imports))
    meta = run_meta(args)
    load = " / ".join(f"{x:.1f}" for x in meta["load"])
    print(f"load average at the end: {load} on {meta['cpus']} cpus")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "sizes": results, "import": imports}, indent=2))
    log(f"wrote {args.json}")


def run_meta(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "generator": _synth.GENERATOR_VERSION,
        "vectors": "model" if args.embed_all else "first 10k model, rest derived",
        "git": git_state(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "command": " ".join(sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def pruned_route(max_df: float) -> str:
    """The current route statement with lexemes above ``max_df`` x N dropped before the postings join."""
    join = "d.field = f.field and d.lexeme = q.lexeme"
    statement = query("route")
    assert statement.count(join) == 1, "the bm25 join of sql/route.sql changed: update pruned_route"
    return statement.replace(join, f"{join} and d.df <= {float(max_df)!r} * st.n")  # bench-only variant


if __name__ == "__main__":
    main()
