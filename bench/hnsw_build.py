"""HNSW build effort: build time, recall against exact search and search time for each ef_construction and type.

    python bench/hnsw_build.py [--ef-construction 64,32] [--types halfvec,vector] [--requests 200] [--server-memory]

On bench/route.py's 10k-tool catalog (10k tool vectors, 30k intent examples; built by it if missing), each vector
table's index is rebuilt once per ef_construction value (m = 16, as toolstore builds it, with the maintenance_work_mem
toolstore gives a build; with --server-memory also once with the server's own setting) and once per --types entry
(the type the index casts the vectors to; toolstore's own is index_type()'s), then every request searches it as knn()
does (limit 40 for tools, 120 for examples, ef_search = the limit) and the result is compared with an
exact search. The catalog's indexes are left rebuilt with toolstore's own HNSW_EF_CONSTRUCTION at the end. Uses
$TOOLSTORE_DSN's server or bench/route.py's embedded one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext
from typing import Any

import _synth
import psycopg
from _harness import OUT, admin_dsn, built_database, log

from toolstore import LocalEmbedder, ToolStore
from toolstore._indexes import (
    HNSW_EF_CONSTRUCTION,
    _ddl,
    build_memory,
    create_index_ddl,
    index_name,
    index_type,
    partition_name,
)

LIMITS = {"tool_vectors": 40, "intent_examples": 120}
KEYS = {"tool_vectors": "tool_pk", "intent_examples": "pk"}
SEARCH = """
select v.{key} from {partition} v where vector_dims(v.embedding) = {dim}
order by v.embedding::{vtype}({dim}) <=> %s::vector({dim})::{vtype}({dim}) limit {limit}
"""


def statement(template: str, vtype: str, **parts: Any) -> psycopg.sql.Composed:
    return psycopg.sql.SQL(template).format(
        vtype=psycopg.sql.SQL(vtype),  # from a fixed list: --types is checked
        **{k: psycopg.sql.Identifier(v) if isinstance(v, str) else psycopg.sql.Literal(v) for k, v in parts.items()},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ef-construction", default="64,32")
    parser.add_argument("--types", default="halfvec,vector", help="the types the index casts the vectors to")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--server-memory", action="store_true", help="also build with the server's maintenance_work_mem"
    )
    args = parser.parse_args()
    types = args.types.split(",")
    if not set(types) <= {"vector", "halfvec"}:
        parser.error(f"--types: vector or halfvec, got {args.types!r}")
    n, embedder = 10_000, LocalEmbedder()
    cat = _synth.catalog(n)
    dsn = built_database(admin_dsn(), n, cat, lambda: _synth.load_vectors(n, embedder, OUT, log=log), embedder)
    qvecs = embedder.embed_many([q.text for q in _synth.queries(cat, args.requests)])
    with ToolStore(dsn, embedder=embedder, catalog="bench") as store, store.connection() as conn:
        cid, dim = store.info().id, embedder.dim

        def search(table: str, q: Any, exact: bool, vtype: str) -> list[int]:
            conn.execute(f"set enable_indexscan = {'off' if exact else 'on'}")
            conn.execute("select set_config('hnsw.ef_search', %s, false)", [str(LIMITS[table])])
            text = statement(
                SEARCH, vtype, key=KEYS[table], partition=partition_name(table, cid), dim=dim, limit=LIMITS[table]
            )
            return [r[0] for r in conn.execute(text, [q])]

        def rebuild(table: str, ef: int, vtype: str, memory: str = "toolstore's") -> float:
            start = time.perf_counter()
            with build_memory(conn, table, cid, dim) if memory == "toolstore's" else nullcontext():
                conn.execute(_ddl("drop_vector_index", name=index_name(table, cid, dim)))
                conn.execute(create_index_ddl(table, cid, dim, concurrently=False, vtype=vtype, ef_construction=ef))
            return time.perf_counter() - start

        server = conn.execute("select current_setting('maintenance_work_mem')").fetchone()[0]  # type: ignore[index]
        memories = ["toolstore's"] + ([server] if args.server_memory else [])
        own = index_type(conn, dim)
        assert own is not None, f"no HNSW index at {dim} dimensions"
        print("| table | type | ef_construction | maintenance_work_mem | build s | recall (vs exact) | search p50 ms |")
        print("|---|---|---|---|---|---|---|")
        for table, limit in LIMITS.items():
            truth = [set(search(table, q, True, "vector")) for q in qvecs]
            builds = [(vtype, int(x), m) for x in args.ef_construction.split(",") for m in memories for vtype in types]
            for vtype, ef, memory in builds:
                build = rebuild(table, ef, vtype, memory)
                times, recall = [], []
                for q, want in zip(qvecs, truth):
                    start = time.perf_counter()
                    got = search(table, q, False, vtype)
                    times.append((time.perf_counter() - start) * 1000)
                    recall.append(len(want & set(got)) / len(want))
                print(
                    f"| {table} | {vtype} | {ef} | {memory} | {build:.1f} | {statistics.mean(recall):.3f} @{limit} | "
                    f"{statistics.median(times):.2f} |",
                    flush=True,
                )
            rebuild(table, HNSW_EF_CONSTRUCTION, own)
        conn.execute("reset enable_indexscan")


if __name__ == "__main__":
    main()
