"""Routing benchmark: route() and the route statement against an in-process reference, at 1k/10k/100k tools.

    python bench/route.py [--sizes 1000,10000,100000] [--requests 500] [--quick] [--json OUT] [--explain N]
                          [--variants bench/control.sql,...]
                          [--no-import] [--prebuild] [--memory-traffic MB]
    python bench/route.py --catalogs 1000 [--catalogs-hnsw]     # many catalogs in one database (bench/_catalogs.py)
    python bench/route.py --embedder static:bench/out/models/potion-base-8M ...   # another model (default local)

Catalogs come from bench/_synth.py; vectors from the shipped local model (all-MiniLM-L6-v2, or --embedder's),
cached in bench/out (see --embed-all). Each size gets its own database (``bench_<n>_v<generator>``), reused while
the migrations are unchanged, on $TOOLSTORE_DSN's server or the embedded one under $TOOLSTORE_HOME (default
bench/out/home).
All numbers of one size come from one run, requests interleaved in rotating order (in-process, statement, route()).
Each --variants file runs alternated with the statement on the same requests, each on its own session: wall time,
the server backend's CPU (/proc/PID/schedstat, a local server only) and the share of identical rows.
The issue-15 targets are printed with the measured value of this run at the end (TARGETS).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the reference runs on one thread
    os.environ.setdefault(_var, "1")

import numpy as np
import psycopg

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import _synth
from _harness import (
    CLIENTS,
    OUT,
    admin_dsn,
    backend_cpu,
    built_database,
    log,
    route_ids,
    run_meta,
    stats_ms,
    throughput,
    timed,
    timed_cpu,
)
from _inprocess import Reference
from _measure import bench_coverage, bench_filters, bench_import, bench_sessions, explain_profile, lexical_overlap
from _report import table, targets
from _traffic import MemoryTraffic

from toolstore import Embedder, HashingEmbedder, ToolStore
from toolstore._connect import Connector
from toolstore._embedders.factory import make_embedder
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import parse_blocks, query
from toolstore._text import query_identifiers, query_text

_sent = [0]  # statements this process sent to the server (route()'s round trips are counted with it)
_execute = psycopg.Cursor.execute


def _counting_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
    _sent[0] += 1
    return _execute(self, *args, **kwargs)


psycopg.Cursor.execute = _counting_execute  # type: ignore[method-assign]
TEST_BLOCKS = parse_blocks((BENCH.parent / "tests" / "retrievers.sql").read_text())  # each retriever alone
FILTER_REQUESTS = 60  # requests timed per filter (bench_filters), with and without it


def bench_size(
    admin: str,
    n: int,
    requests: int,
    embedder: Embedder,
    variants: dict[str, dict[str, str]],
    derive: bool,
    explain: int = 0,
    prebuild: bool = False,
    traffic: MemoryTraffic | None = None,
) -> dict[str, Any]:
    cat = _synth.catalog(n)

    def vectors() -> tuple[np.ndarray, np.ndarray]:
        return _synth.load_vectors(n, embedder, OUT, log=log, derive=derive)

    dsn = built_database(admin, n, cat, vectors, embedder, tag="/derived" if derive and n > _synth.CHUNK else "")
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
        # the in-process reference fuses the request alone: compare the statement without sub-requests (coverage
        # on and off are compared through route() below, bench_coverage)
        fusion = replace(stored_fusion(info.settings), split=0.0)
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

            def statement(i: int) -> list[str]:
                return route_ids(sconn, params[i])

            def inprocess(i: int) -> list[str]:
                return ref.route(lexemes[i], query_identifiers(texts[i]), qvecs[i], params[i])

            def routed(i: int) -> list[str]:
                return [c.tool.id for c in store.route(texts[i]).tools]

            conn.execute("truncate embedding_cache")  # route() must embed every timed query
            for i, q in enumerate(warmup):  # warm the buffer cache, the plans and the model
                statement(i), inprocess(i), store.route(q.text)
            times: dict[str, list[float]] = {"inprocess": [], "statement": [], "route": [], "embed": []}
            busy: dict[str, list[float]] = {"inprocess": [], "statement": [], "route": []}  # --memory-traffic
            trips = 0
            same10, overlap10, hits, targeted = 0.0, 0.0, 0, 0
            log(f"{n}: timing {requests} requests")
            runs = {"inprocess": inprocess, "statement": statement, "route": routed}
            for i, q in enumerate(queries):
                got: dict[str, list[str]] = {}
                copying = traffic is not None and i % 2 == 1  # every other request beside the copier
                if traffic is not None:
                    traffic.running(copying)
                for name in list(runs)[i % 3 :] + list(runs)[: i % 3]:  # rotate: the in-process scan evicts CPU caches
                    sent = _sent[0]
                    elapsed, got[name] = timed(runs[name], i)
                    (busy if copying else times)[name].append(elapsed)
                    trips += (_sent[0] - sent) if name == "route" else 0
                if traffic is not None:
                    traffic.running(False)
                ref_ids, sql_ids, routed = got["inprocess"], got["statement"], got["route"]
                times["embed"].append(timed(embedder.embed, texts[i])[0])
                same10 += sql_ids[:10] == ref_ids[:10]
                overlap10 += len(set(sql_ids[:10]) & set(ref_ids[:10])) / max(1, min(10, len(ref_ids)))
                if q.target is not None:
                    targeted += 1
                    hits += q.target in routed  # route() returns k=8 tools
            variant_out = {}
            for name, blocks in variants.items():
                log(f"{n}: variant {name}")
                vpool = Connector(dsn, schema="toolstore", max_size=1).pool  # its own session: `setup` may SET things
                vconn = vpool.getconn()
                if "setup" in blocks:
                    vconn.execute(blocks["setup"])
                vtext = blocks.get("route")  # None: the route statement itself, sent as route() sends it
                vparams = json.loads(blocks.get("params", "{}"))

                def variant(i: int, vconn: Any = vconn, vtext: str | None = vtext, over: Any = vparams) -> list[str]:
                    return route_ids(vconn, params[i] | over, vtext)

                for i in range(len(warmup)):
                    variant(i)
                vt, vcpu, agree, agree10, same, hit_base, hit_var = [], [], 0.0, 0.0, 0, 0, 0
                pair = ((statement, backend_cpu(sconn)), (variant, backend_cpu(vconn)))
                for i, q in enumerate(queries):
                    order = pair if i % 2 else pair[::-1]  # the 2nd runs warmer
                    ran = [timed_cpu(fn, cpu, i) for fn, cpu in order]
                    (t_base, c_base, base_ids), (t_var, c_var, var_ids) = ran if i % 2 else ran[::-1]
                    vt.append((t_base, t_var))
                    vcpu.append((c_base, c_var))
                    same += base_ids == var_ids
                    agree += len(set(base_ids[:8]) & set(var_ids[:8])) / max(1, min(8, len(base_ids)))
                    agree10 += len(set(base_ids[:10]) & set(var_ids[:10])) / max(1, min(10, len(base_ids)))
                    hit_base += q.target in base_ids[:8]
                    hit_var += q.target in var_ids[:8]
                variant_out[name] = {
                    "baseline": stats_ms([a for a, _ in vt]),
                    "variant": stats_ms([b for _, b in vt]),
                    "cpu_baseline": stats_ms([a for a, _ in vcpu]),  # the server backend's (NaN: not readable)
                    "cpu_variant": stats_ms([b for _, b in vcpu]),
                    "identical": same / requests,  # requests whose rows (ids, in order) are the baseline's
                    "top8_overlap": agree / requests,
                    "top10_overlap": agree10 / requests,
                    "lexical_top10_overlap": lexical_overlap(sconn, params, vtext or query("route"), vparams)
                    if vparams
                    else None,
                    "hit8_baseline": hit_base / max(1, targeted),
                    "hit8_variant": hit_var / max(1, targeted),
                }
                vpool.putconn(vconn)
                vpool.close()
            explained = explain_profile(sconn, params[:explain]) if explain else {}
            log(f"{n}: filtered statements")
            filtered = bench_filters(sconn, info, fusion, cat, texts[:FILTER_REQUESTS], qvecs[:FILTER_REQUESTS])
            spool.putconn(sconn)
            spool.close()

        log(f"{n}: route() with a session vs without")
        session_out = bench_sessions(store, dsn, texts, qvecs, cat)
        log(f"{n}: route() with coverage (sub-requests) on and off")
        coverage_out = bench_coverage(store, texts)

        def pooled_statement(i: int) -> None:
            with store.pool.connection() as c:
                route_ids(c, params[i % requests])

        log(f"{n}: throughput with {CLIENTS} clients")
        rps_route = throughput(lambda i: store.route(tput_texts[i]), tput)
        rps_statement = throughput(pooled_statement, tput)
    result = {k: stats_ms(v) for k, v in times.items()}
    beside = {k: stats_ms(v) for k, v in busy.items() if v}
    return {
        "tools": n,
        "examples": len(cat.examples),
        "requests": requests,
        **result,
        "ratio_statement_inprocess": result["statement"]["p50"] / result["inprocess"]["p50"],
        # --memory-traffic: the other half of the requests, timed beside the copier (the figures above: without it)
        "memory_traffic": beside and {**beside, "ratio": beside["statement"]["p50"] / beside["inprocess"]["p50"]},
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
        "coverage": coverage_out,
        "filters": filtered,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="1k and 10k tools, 200 requests")
    parser.add_argument("--json", type=Path, default=OUT / "route.json")
    parser.add_argument("--variants", default="", help="comma-separated .sql files with a `route` block to compare")
    parser.add_argument("--catalogs", type=int, help="many-catalog mode: this many catalogs of 1,000 tools")
    parser.add_argument(
        "--catalogs-hnsw", action="store_true", help="many-catalog mode: also measure a partial HNSW index per catalog"
    )
    parser.add_argument("--no-import", action="store_true", help="skip the 10k import timings")
    parser.add_argument("--import-rounds", type=int, default=1, help="precomputed imports: rounds (medians)")
    parser.add_argument("--no-model-import", action="store_true", help="imports: precomputed vectors only")
    parser.add_argument("--explain", type=int, default=0, help="EXPLAIN ANALYZE this many requests per size")
    parser.add_argument("--prebuild", action="store_true", help="only build (or check) the databases, then exit")
    parser.add_argument(
        "--memory-traffic",
        type=int,
        metavar="MB",
        help="time every other request beside a process copying MB megabytes in a loop (the others without it)",
    )
    parser.add_argument("--hashing", action="store_true", help="development: HashingEmbedder(384), not the model")
    parser.add_argument(
        "--embedder", default="local", help="the model, as --embedder takes it (e.g. static:DIR); default local"
    )
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
    admin = admin_dsn()
    embedder = HashingEmbedder(384) if args.hashing else make_embedder(args.embedder)
    if embedder is None:
        parser.error("--embedder none: the bench routes with vectors")
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
    if args.memory_traffic is not None and args.memory_traffic <= 0:
        parser.error(f"--memory-traffic takes a size in MB above 0, got {args.memory_traffic}")
    traffic = MemoryTraffic(args.memory_traffic) if args.memory_traffic and not args.prebuild else None
    try:
        results = [
            bench_size(admin, n, requests, embedder, variants, derive, args.explain, args.prebuild, traffic)
            for n in sizes
        ]
    finally:
        if traffic is not None:
            traffic.close()
    if args.prebuild:
        return
    imports = {}
    if not args.no_import:
        imports = bench_import(admin, embedder, rounds=args.import_rounds, model=not args.no_model_import)
    print(table(results, imports))
    print()
    print(targets(results, imports))
    meta = run_meta(args)
    load = " / ".join(f"{x:.1f}" for x in meta["load"])
    print(f"load average at the end: {load} on {meta['cpus']} cpus")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "sizes": results, "import": imports}, indent=2))
    log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
