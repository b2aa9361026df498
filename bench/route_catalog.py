"""route() latency on a real catalog: import TOOLS (and TRAIN as intent examples), route QUERIES, print timings.

    python bench/route_catalog.py ../shared/bench/seal_tools [--requests 500] [--embedder local]

Prints median and p95 of route() end to end (query embedding included) and of the SQL statement alone
(query vector precomputed), in one run. Uses $TOOLSTORE_DSN or the embedded server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from toolstore import ToolStore, load_examples, load_tools_file
from toolstore._embedders.factory import make_embedder
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._steps import Fetch, fetch_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a ../shared/bench/<set> folder")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    embedder = make_embedder(args.embedder)
    catalog = f"bench_{args.folder.name}"
    with ToolStore(embedder=embedder, catalog=catalog) as store:
        t0 = time.perf_counter()
        report = store.upsert(load_tools_file(args.folder / "tools.jsonl"))
        if embedder is not None and (args.folder / "train.jsonl").exists():
            store.add_examples(load_examples(args.folder / "train.jsonl"))
        load_s = time.perf_counter() - t0
        queries = [json.loads(line)["query"] for line in (args.folder / "queries.jsonl").open()][: args.requests]
        info = store.info()
        for q in queries[:20]:  # warm-up: connections, caches, plans
            store.route(q, k=args.k)
        end_to_end = []
        for q in queries:
            t = time.perf_counter()
            store.route(q, k=args.k)
            end_to_end.append((time.perf_counter() - t) * 1000)
        fusion = stored_fusion(info.settings)
        vectors = [embedder.embed(q) if embedder is not None else None for q in queries]
        sql_only = []
        with store.pool.connection() as conn:
            for q, v in zip(queries, vectors):
                params = statement_params(info, route_request(q, fusion, k=args.k), v)
                t = time.perf_counter()
                fetch_rows(conn, Fetch("route", params))  # as route() sends it
                sql_only.append((time.perf_counter() - t) * 1000)
    print(f"catalog {catalog}: {info.n_tools} tools, {info.n_examples} intent examples, model {info.embed_model}")
    print(f"import: {report.as_dict()} in {load_s:.1f} s")
    print(f"{'measure':<28} {'p50 ms':>8} {'p95 ms':>8}  (n={len(queries)})")
    for name, values in (("route() end to end", end_to_end), ("SQL statement alone", sql_only)):
        print(f"{name:<28} {statistics.median(values):8.2f} {np.percentile(values, 95):8.2f}")


if __name__ == "__main__":
    main()
