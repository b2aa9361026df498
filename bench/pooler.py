"""route() latency behind PgBouncer in transaction pooling mode against a direct connection, side by side in one run.

    python bench/pooler.py ../shared/bench/seal_tools [--requests 300] [--embedder hashing]

Starts a PgBouncer (``pool_mode = transaction``, on loopback; the ``pgbouncer`` binary on PATH) in front of
$TOOLSTORE_DSN's server or the embedded one, imports TOOLS once, then routes each of QUERIES on three stores in turn:
``direct`` (the route statement prepared at its first run), ``direct, transaction_pooling`` (nothing prepared, the
session set in each route's pipeline) and ``pgbouncer, transaction_pooling`` (the same, through the pooler). Prints
each one's p50 and p95 of route() end to end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from toolstore import ToolStore, load_tools_file
from toolstore._dsn import resolve_dsn
from toolstore._embedders.factory import make_embedder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pgbouncer import pgbouncer, through  # noqa: E402  (the tests' PgBouncer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a ../shared/bench/<set> folder")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    embedder = make_embedder(args.embedder)
    catalog = f"bench_pooler_{args.folder.name}"
    direct = resolve_dsn(None)
    queries = [json.loads(line)["query"] for line in (args.folder / "queries.jsonl").open()][: args.requests]
    with ToolStore(direct, embedder=embedder, catalog=catalog) as loader:
        loader.upsert(load_tools_file(args.folder / "tools.jsonl"), prune=True)
        n_tools = loader.info().n_tools
    with pgbouncer(direct) as address:
        pooled = through(direct, address)
        stores = {
            "direct": ToolStore(direct, embedder=embedder, catalog=catalog, pool_size=1),
            "direct, transaction_pooling": ToolStore(
                direct, embedder=embedder, catalog=catalog, pool_size=1, transaction_pooling=True
            ),
            "pgbouncer, transaction_pooling": ToolStore(
                pooled, embedder=embedder, catalog=catalog, pool_size=1, transaction_pooling=True
            ),
        }
        try:
            for store in stores.values():
                for q in queries[:20]:  # warm-up: connections, caches, the prepared statement
                    store.route(q, k=args.k)
            times: dict[str, list[float]] = {name: [] for name in stores}
            for q in queries:
                for name, store in stores.items():
                    t = time.perf_counter()
                    store.route(q, k=args.k)
                    times[name].append((time.perf_counter() - t) * 1000)
        finally:
            for store in stores.values():
                store.close()
    print(f"catalog {catalog}: {n_tools} tools, embedder {args.embedder}, k={args.k}")
    print(f"{'route() end to end':<32} {'p50 ms':>8} {'p95 ms':>8}  (n={len(queries)} each, interleaved)")
    for name, values in times.items():
        print(f"{name:<32} {statistics.median(values):8.2f} {np.percentile(values, 95):8.2f}")


if __name__ == "__main__":
    main()
