"""k-NN recall and time of the vector searches route() runs, against exact search, per catalog.

    python bench/knn_recall.py [--sets metatool,seal_tools,...] [--synthetic 1000,10000] [--requests 300]
                               [--ef 100,200,400] [--builds 2] [--fresh]

For each catalog and each vector table (tool_vectors: the dense retriever's 40 rows; intent_examples: the intent
retriever's 80, 120 before stop 50) every request is searched, in rotating order: exactly (``exact``: every vector's
full-precision cosine distance, ties by pk, what knn() does without an index since migration 0027), by a scan sorted by
the HNSW index's halfvec expression (``scan``: what knn() did without an index before), and through the partition's HNSW
index at knn()'s ``ef_search`` (the limit, at least 40) and each larger ``--ef``. Prints, per search, recall@limit
against exact search (a row counts when its distance is within the exact list's last: ties at the cut are all right),
``same`` (the share of requests whose rows are the exact search's) and the median time. A partition without an HNSW
index (fewer than HNSW_MIN_ROWS rows) gets one built for the measurement and dropped after. ``--builds 2`` loads each
shared benchmark twice (HNSW is randomised) and counts the requests whose rows differ between the builds.

Catalogs: the shared benchmarks (``$TOOLSTORE_BENCH``, else ``shared/bench`` beside the checkout: tools.jsonl,
train.jsonl or train_sessions.jsonl as intent examples, queries.jsonl or sessions.jsonl as requests), loaded with the
shipped local model into database ``knn_recall`` (kept for the next run; ``--fresh`` loads them again); the synthetic
ones are the ``bench_<n>_v1`` databases ``bench/route.py`` builds (run it first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import _synth
import numpy as np
import psycopg
from _harness import admin_dsn, fresh_database, log
from psycopg.conninfo import make_conninfo

from toolstore import IntentExample, LocalEmbedder, ToolStore, load_tools_file
from toolstore._connect import Connector
from toolstore._examples import load_examples, session_examples
from toolstore._fusion import EXAMPLES_PER_CANDIDATE, MIN_OVERFETCH
from toolstore._indexes import create_index_ddl, index_name
from toolstore._metrics import load_judgements, load_sessions

LIMITS = {"tool_vectors": MIN_OVERFETCH, "intent_examples": MIN_OVERFETCH * EXAMPLES_PER_CANDIDATE}  # route()'s, k = 10
ROW = {"tool_vectors": "v.tool_pk", "intent_examples": "v.pk"}
KEYS = {
    "tool_vectors": "select pk, id from tools where catalog_id = %s",
    "intent_examples": "select e.pk, t.id || chr(31) || e.query from intent_examples e "
    "join tools t on t.catalog_id = e.catalog_id and t.pk = e.tool_pk where e.catalog_id = %s",
}


def search_sql(table: str, cid: int, dim: int, order: str) -> str:
    """knn()'s unfiltered statement (migration 0016), ordered by ``order``, with the row's pk."""
    return (
        f"select {ROW[table]}, (v.embedding::vector({dim}) <=> %(q)s::vector({dim}))::double precision "
        f"from {table} v where v.catalog_id = {cid} and vector_dims(v.embedding) = {dim} "
        f"order by {order} limit {LIMITS[table]}"
    )


def methods_of(table: str, cid: int, dim: int, efs: list[int]) -> dict[str, tuple[str, dict[str, str]]]:
    """Each search measured: its statement and the settings it runs under (local to its transaction)."""
    half = f"v.embedding::halfvec({dim}) <=> %(q)s::halfvec({dim})"
    today = max(LIMITS[table], 40)  # knn()'s ef_search
    out = {
        "exact": (search_sql(table, cid, dim, f"2, {ROW[table]}"), {}),
        # knn() without an index: its order, spelled so that no index serves it (enable_indexscan = off did not
        # keep the planner off the HNSW index)
        "scan": (search_sql(table, cid, dim, f"({half}) + 0"), {}),
    }
    for ef in [today] + [e for e in efs if e > today]:
        out[f"ef{ef}"] = (search_sql(table, cid, dim, half), {"hnsw.ef_search": str(ef)})
    return out


def measure(conn: psycopg.Connection[Any], cid: int, qvecs: np.ndarray, efs: list[int]) -> dict[str, Any]:
    """Per table: rows, recall@limit and median ms of exact search, of knn()'s scan without an index and of HNSW
    at knn()'s ef_search (at least the limit, and 40) and each larger ``efs``. Recall counts a row as found when its
    distance is within the exact list's last (ties at the cut are all right); ``same`` is the share of requests
    whose rows are exactly the exact search's."""
    dim = qvecs.shape[1]
    out: dict[str, Any] = {}
    for table, limit in LIMITS.items():
        rows = conn.execute(f"select count(*) from {table} where catalog_id = {cid}").fetchone()[0]
        name = index_name(table, cid, dim)
        built = not conn.execute("select 1 from pg_class where relname = %s", [name]).fetchone()
        if built:
            conn.execute(create_index_ddl(table, cid, dim, concurrently=False, vtype="halfvec"))
        conn.execute(f"analyze {table}_c{cid}")
        methods = methods_of(table, cid, dim, efs)
        times: dict[str, list[float]] = {m: [] for m in methods}
        found: dict[str, list[list[tuple[int, float]]]] = {m: [] for m in methods}
        for i, q in enumerate(qvecs):
            order = list(methods)[i % len(methods) :] + list(methods)[: i % len(methods)]
            for m in order:
                statement, settings = methods[m]
                with conn.transaction():
                    for key, value in settings.items():
                        conn.execute("select set_config(%s, %s, true)", [key, value])
                    start = time.perf_counter()
                    got = conn.execute(statement, {"q": q}).fetchall()
                    times[m].append(time.perf_counter() - start)
                found[m].append(got)
        if built:
            conn.execute(f"drop index {name}")
        keys = dict(conn.execute(KEYS[table], [cid]).fetchall())  # pks differ between builds; keys do not
        exact = found["exact"]
        recall = {
            m: statistics.fmean(
                sum(d <= e[-1][1] + 1e-9 for _, d in a) / max(1, len(e)) if e else 1.0 for a, e in zip(lists, exact)
            )
            for m, lists in found.items()
        }
        same = {
            m: statistics.fmean({r[0] for r in a} == {r[0] for r in e} for a, e in zip(lists, exact))
            for m, lists in found.items()
        }
        out[table] = {
            "rows": rows,
            "limit": limit,
            "index_in_use": not built,
            "recall": recall,
            "same": same,
            "ms_p50": {m: 1000 * statistics.median(t) for m, t in times.items()},
            "found": {m: [[keys[r[0]] for r in a] for a in lists] for m, lists in found.items()},
        }
    return out


def exists(admin: str, name: str) -> bool:
    with psycopg.connect(admin) as conn:
        return conn.execute("select 1 from pg_database where datname = %s", [name]).fetchone() is not None


def shared_requests(folder: Path) -> tuple[list[Any], list[IntentExample], list[str]]:
    tools = load_tools_file(folder / "tools.jsonl")
    if (folder / "sessions.jsonl").exists():
        examples = session_examples(load_sessions(folder / "train_sessions.jsonl"))
        texts = [t.query for s in load_sessions(folder / "sessions.jsonl") for t in s.turns]
    else:
        examples = load_examples(folder / "train.jsonl")
        texts = [q for q, _ in load_judgements(folder / "queries.jsonl")]
    return tools, examples, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="metatool,seal_tools,gorilla_torch,bfcl_sessions")
    parser.add_argument("--synthetic", default="")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--ef", default="100,200,400")
    parser.add_argument("--builds", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="load the shared benchmarks again (a new database)")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent / "out" / "knn_recall.json")
    args = parser.parse_args()
    efs = [int(x) for x in args.ef.split(",")]
    bench = Path(os.environ.get("TOOLSTORE_BENCH", Path(__file__).resolve().parents[2] / "shared" / "bench"))
    admin = admin_dsn()
    embedder = LocalEmbedder()
    results: dict[str, Any] = {}
    sets = [s for s in args.sets.split(",") if s]
    if sets:
        dsn = make_conninfo(admin, dbname="knn_recall")
        if args.fresh or not exists(admin, "knn_recall"):
            dsn = fresh_database(admin, "knn_recall")
        for name in sets:
            tools, examples, texts = shared_requests(bench / name)
            texts = texts[: args.requests]
            qvecs = embedder.embed_many(texts)
            for b in range(args.builds):
                catalog = f"{name}-{b}"
                log(f"{catalog}: {len(tools)} tools, {len(examples)} examples, {len(texts)} requests")
                with ToolStore(dsn, embedder=embedder, catalog=catalog) as store:
                    if catalog not in {c["name"] for c in store.catalogs()}:  # else loaded by an earlier run
                        store.upsert(tools)
                        store.add_examples(examples)
                    cid = store.info().id
                pool = Connector(dsn, schema="toolstore", max_size=1).pool
                with pool.connection() as conn:
                    results[catalog] = measure(conn, cid, qvecs, efs)
                pool.close()
    for n in (int(x) for x in args.synthetic.split(",") if x):
        cat = _synth.catalog(n)
        texts = [q.text for q in _synth.queries(cat, args.requests)]
        qvecs = embedder.embed_many(texts)
        pool = Connector(make_conninfo(admin, dbname=f"bench_{n}_v{_synth.GENERATOR_VERSION}"), schema="toolstore").pool
        with pool.connection() as conn:
            cid = conn.execute("select id from catalogs where name = 'bench'").fetchone()[0]
            log(f"synthetic {n}")
            results[f"synthetic-{n}"] = measure(conn, cid, qvecs, efs)
        pool.close()
    summary(results, efs)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {k: {t: {x: y for x, y in v.items() if x != "found"} for t, v in r.items()} for k, r in results.items()},
            indent=1,
        )
    )


def summary(results: dict[str, Any], efs: list[int]) -> None:
    for name, r in results.items():
        for table, t in r.items():
            cells = " ".join(
                f"{m} R {t['recall'][m]:.4f} same {t['same'][m]:.3f} {t['ms_p50'][m]:.2f} ms" for m in t["recall"]
            )
            print(f"{name:<20} {table:<16} {t['rows']:>6} rows, index {'yes' if t['index_in_use'] else 'no '}: {cells}")
    builds: dict[str, list[Any]] = {}
    for name, r in results.items():
        base, _, b = name.rpartition("-")
        if b.isdigit() and not base.startswith("synthetic"):
            builds.setdefault(base, []).append(r)
    for base, rs in builds.items():
        if len(rs) < 2:
            continue
        for table in LIMITS:
            cells = []
            for m in rs[0][table]["found"]:
                a, b = rs[0][table]["found"][m], rs[1][table]["found"][m]
                cells.append(f"{m} {sum(set(x) != set(y) for x, y in zip(a, b))}/{len(a)}")
            print(f"{base:<20} {table:<16} requests whose rows differ between two builds: {', '.join(cells)}")


if __name__ == "__main__":
    main()
