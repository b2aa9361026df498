"""What exploration, a reranker and explain() cost on top of a plain route(), side by side in one run.

    python bench/shaping.py [--tools 10000] [--requests 200]

A synthetic catalog (bench/_synth.py) imported with the library's own write path and ``HashingEmbedder(384)`` (no
model download; the statement's shape, not the embedder, is measured) into a fresh database on $TOOLSTORE_DSN's
server or the embedded one under $TOOLSTORE_HOME. Per request, in rotating order: route(k=8); with explore=True;
with an identity reranker (scores = minus the fused rank, so the order is unchanged and only the hook's cost shows)
at the default depth 3 and at depth 10; and result.explain() of the plain route. p50 / p95 in ms, and each p50 as a
ratio of the plain route's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import _synth
from _harness import admin_dsn, fresh_database, log, stats_ms

from toolstore import HashingEmbedder, ToolStore


def identity(query: str, candidates: list[Any]) -> list[float]:
    return [-float(c.fused_rank) for c in candidates]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    cat = _synth.catalog(args.tools)
    dsn = fresh_database(admin_dsn(), f"bench_shaping_{args.tools}")
    with ToolStore(dsn, embedder=HashingEmbedder(384), catalog="bench") as store:
        started = time.perf_counter()
        store.upsert(cat.tools)
        store.add_examples(cat.examples)
        log(f"imported {args.tools} tools, {len(cat.examples)} examples in {time.perf_counter() - started:.0f} s")
        requests = [q.text for q in _synth.queries(cat, args.requests)]
        variants: dict[str, Any] = {
            "route": lambda q, i: store.route(q, k=8),
            "explore": lambda q, i: store.route(q, k=8, explore=True, seed=i),
            "rerank depth 3": lambda q, i: store.route(q, k=8, reranker=identity),
            "rerank depth 10": lambda q, i: store.route(q, k=8, reranker=identity, rerank_depth=10),
        }
        for q in requests[:20]:  # warm the plan cache and the embedding cache alike for every variant
            for fn in variants.values():
                fn(q, 0)
        times: dict[str, list[float]] = {name: [] for name in [*variants, "explain()"]}
        names = list(variants)
        for i, q in enumerate(requests):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                result = variants[name](q, i)
                times[name].append(time.perf_counter() - start)
                if name == "route":
                    start = time.perf_counter()
                    result.explain()
                    times["explain()"].append(time.perf_counter() - start)
    base = stats_ms(times["route"])["p50"]
    print(f"{args.tools:,} tools, {args.requests} requests, k=8 (ms)")
    print(f"{'variant':<18} {'p50':>8} {'p95':>8} {'p50 / route':>12}")
    for name, seconds in times.items():
        s = stats_ms(seconds)
        print(f"{name:<18} {s['p50']:8.2f} {s['p95']:8.2f} {s['p50'] / base:12.2f}")


if __name__ == "__main__":
    main()
