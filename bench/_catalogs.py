"""Many catalogs in one database: ``python bench/route.py --catalogs 1000`` (1,000 catalogs of 1,000 tools).

Catalog c holds the 1,000 tools of slice c % 100 of the synthetic 100k catalog (`_synth`), with that slice's vectors
(model vectors for the first 10k tools, derived past them) plus per-catalog noise from the 101st catalog on, and 3
intent examples per tool. A second database holds only the routed catalog (the same rows). Measured, interleaved:

- route() and the statement on one catalog of the big database against the same catalog alone in its own database;
- the same while a writer keeps re-importing another catalog of the big database, against a writer doing the same
  work in a third database (the CPU it takes is the same; only sharing tables differs);
- planning time, per-backend memory and route time with a partial HNSW index per catalog against exact search (the
  default below ``HNSW_MIN_ROWS``), by building those indexes for every catalog (``--catalogs-hnsw``).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import _synth
import numpy as np
import psycopg
from _harness import OUT, fresh_database, route_ids, schema_hash, throughput
from psycopg.conninfo import make_conninfo

from toolstore import Embedder, ToolStore
from toolstore._catalog_row import catalog_info
from toolstore._connect import Connector, register_types
from toolstore._fusion import stored_fusion
from toolstore._indexes import VECTOR_TABLES, create_index_ddl, ensure_indexes, index_type
from toolstore._route import route_request, statement_params
from toolstore._rows import tool_row
from toolstore._sql import query
from toolstore._vectors import write_examples, write_tool_vectors

PER = 1000
SLICES = 100


def catalog_name(c: int) -> str:
    return f"c{c:05d}"


def slice_rows(
    full: _synth.Catalog, tv: np.ndarray, ev: np.ndarray, c: int
) -> tuple[list[Any], np.ndarray, list[Any], np.ndarray]:
    """Catalog c's tools, tool vectors, examples and example vectors."""
    s = c % SLICES
    tools = full.tools[s * PER : (s + 1) * PER]
    k = _synth.EXAMPLES_PER_TOOL
    examples = full.examples[s * PER * k : (s + 1) * PER * k]
    t, e = tv[s * PER : (s + 1) * PER], ev[s * PER * k : (s + 1) * PER * k]
    if c >= SLICES:  # a copy of a slice: the same text, slightly different vectors
        rng = np.random.default_rng(c)

        def jitter(v: np.ndarray) -> np.ndarray:
            v = v + rng.normal(0, 0.01, v.shape).astype(np.float32)
            return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

        t, e = jitter(t), jitter(e)
    return tools, t, examples, e


def load_catalog(conn: psycopg.Connection[Any], name: str, rows: tuple[Any, ...], model: str) -> int:
    """One catalog through the library's own write statements, in one transaction (no index: see ensure below)."""
    tools, tv, examples, ev = rows
    with conn.transaction():
        conn.execute(query("ensure_catalog"), {"name": name})
        cid = conn.execute("select id from catalogs where name = %s", [name]).fetchone()[0]
        conn.execute(query("upsert_tools"), {"catalog": cid, "rows": json.dumps([tool_row(t) for t in tools])})
        conn.execute(query("set_catalog_model"), {"catalog": cid, "model": model, "dim": tv.shape[1]})
        write_tool_vectors(conn, cid, [t.id for t in tools], list(tv))
        write_examples(conn, cid, [(e.tool_id, e.query, v) for e, v in zip(examples, ev)])
    return int(cid)


def build(
    admin: str, dsn_for: Callable[[str], str], n: int, embedder: Embedder, full: _synth.Catalog, vectors: Any, log: Any
) -> tuple[str, str, str]:
    """(the n-catalog database, the one-catalog database, a spare database for the control writer), built unless a
    complete one of this schema exists."""

    schema = schema_hash() + f"/many{n}x{PER}"
    names = (f"bench_many_{n}", "bench_many_one", "bench_many_spare")
    dsns = tuple(dsn_for(x) for x in names)
    try:
        with psycopg.connect(dsns[0]) as conn, psycopg.connect(dsns[1]) as one:
            done = conn.execute("select 1 from public.bench_meta where schema = %s", [schema]).fetchone()
            if done and one.execute("select 1 from public.bench_meta where schema = %s", [schema]).fetchone():
                return dsns  # type: ignore[return-value]
    except psycopg.Error:
        pass
    tv, ev = vectors
    for name, count in zip(names, (n, 1, 1)):
        log(f"building {name}: {count} catalogs of {PER} tools")
        started = time.perf_counter()
        dsn = fresh_database(admin, name)
        ToolStore(dsn, embedder=None, catalog="x").close()
        pool = Connector(dsn, schema="toolstore", max_size=1).pool
        with pool.connection() as conn:
            for c in range(count):
                cid = load_catalog(conn, catalog_name(c), slice_rows(full, tv, ev, c), embedder.model)
                ensure_indexes(conn, catalog_info(conn, catalog_name(c)))  # type: ignore[arg-type]
                if c % 50 == 49:
                    log(f"{name}: {c + 1} catalogs ({time.perf_counter() - started:.0f} s), last id {cid}")
            conn.execute("vacuum analyze")
            conn.execute("create table public.bench_meta as select %s::text as schema", [schema])
        pool.close()
        log(f"built {name} in {time.perf_counter() - started:.0f} s")
    return dsns  # type: ignore[return-value]


def stats(ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"p50": statistics.median(ordered), "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


class Writer(threading.Thread):
    """Re-imports one catalog over and over (alternating two versions of 200 of its tools: updates with re-embedding
    from precomputed vectors, statistics, vectors) until stopped; counts the imports."""

    def __init__(self, dsn: str, catalog: str, rows: tuple[Any, ...], embedder: Embedder) -> None:
        super().__init__(daemon=True)
        tools, tv, _, _ = rows
        self.versions = [
            list(tools[:200]),
            [dataclasses.replace(t, description=t.description + " v2") for t in tools[:200]],
        ]
        from toolstore._text import dense_text

        table = {dense_text(t): v for ver in self.versions for t, v in zip(ver, tv[:200])}

        class Pre(Embedder):
            model, dim = embedder.model, embedder.dim

            def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
                return np.stack([table[t] for t in texts])

        self.store = ToolStore(dsn, embedder=Pre(), catalog=catalog, pool_size=1)
        self.running = threading.Event()
        self.stopped = threading.Event()
        self.imports = 0

    def run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            if not self.running.wait(0.05):
                continue
            self.store.upsert(self.versions[i % 2])
            self.imports += 1
            i += 1

    def close(self) -> None:
        self.stopped.set()
        self.join()
        self.store.close()


def hnsw_everywhere(dsn: str, n: int, dim: int, log: Any) -> int:
    """Build an HNSW index on every catalog's partitions (both tables), as toolstore does from HNSW_MIN_ROWS rows on;
    returns how many exist."""
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        vtype = index_type(conn, dim)
        assert vtype is not None, f"no HNSW index at {dim} dimensions"
        for c in range(n):
            cid = conn.execute("select id from catalogs where name = %s", [catalog_name(c)]).fetchone()[0]
            for table in VECTOR_TABLES:
                conn.execute(create_index_ddl(table, cid, dim, concurrently=False, vtype=vtype))
            if c % 100 == 99:
                log(f"hnsw for {c + 1} catalogs ({time.perf_counter() - started:.0f} s)")
        conn.execute("analyze tool_vectors, intent_examples")
        return int(conn.execute("select count(*) from pg_indexes where indexname like '%%_hnsw_%%'").fetchone()[0])


def backend_memory(dsn: str, route: Callable[[psycopg.Connection[Any]], None]) -> float:
    """MB of memory contexts of a fresh backend after one route (relation cache of the vector tables' indexes)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        from pgvector.psycopg import register_vector

        register_vector(conn)
        route(conn)
        total = conn.execute("select sum(total_bytes) from pg_backend_memory_contexts").fetchone()[0]
        return float(total) / 2**20


def knn_planning_ms(conn: psycopg.Connection[Any], cid: int, dim: int, qvec: np.ndarray) -> float:
    """Median planning time of knn()'s unfiltered intent statement for catalog ``cid`` (as knn() spells it)."""
    vtype = index_type(conn, dim) or "vector"  # no index past 4,000 dimensions: knn() orders by the vector
    text = (
        f"explain (analyze, format json) select v.tool_pk, (v.embedding::vector({dim}) <=> %s)::double precision "
        f"from intent_examples v where v.catalog_id = {cid} and vector_dims(v.embedding) = {dim} "
        f"order by v.embedding::{vtype}({dim}) <=> %s::{vtype}({dim}) limit 120"
    )
    times = [conn.execute(text, [qvec, qvec]).fetchone()[0][0]["Planning Time"] for _ in range(20)]
    return statistics.median(times)


def run(admin: str, n: int, requests: int, embedder: Embedder, log: Any, hnsw: bool) -> dict[str, Any]:
    """The --catalogs mode: returns the measurements (JSON-able)."""

    full = _synth.catalog(SLICES * PER)
    tv, ev = _synth.load_vectors(SLICES * PER, embedder, OUT, log=log, derive=True)
    many, one, spare = build(admin, lambda name: make_conninfo(admin, dbname=name), n, embedder, full, (tv, ev), log)
    name = catalog_name(0)  # slice 0, identical in both databases
    first = _synth.Catalog(full.tools[:PER], full.examples[: PER * _synth.EXAMPLES_PER_TOOL], full.seeds[:PER])
    texts = [q.text for q in _synth.queries(first, 30 + 2 * requests)]
    warm, timed, tput = texts[:30], texts[30 : 30 + requests], texts[30 + requests :]
    out: dict[str, Any] = {"catalogs": n, "tools_per_catalog": PER, "requests": requests}
    with (
        ToolStore(many, embedder=embedder, catalog=name) as s_many,
        ToolStore(one, embedder=embedder, catalog=name) as s_one,
        psycopg.connect(many, autocommit=True) as c_many,
        psycopg.connect(one, autocommit=True) as c_one,
    ):
        for conn in (c_many, c_one):
            conn.execute("set search_path = toolstore, public")
            from pgvector.psycopg import register_vector

            register_vector(conn)
            register_types(conn)  # as the pool's connections: a VectorArray in binary
        with c_many.cursor() as cur:
            cur.execute("select count(*), pg_size_pretty(pg_database_size(current_database())) from tools")
            out["tools_in_database"], out["database_size"] = cur.fetchone()
            out["hnsw_indexes"] = cur.execute(
                "select count(*) from pg_indexes where indexname like '%%\\_hnsw\\_%%'"
            ).fetchone()[0]
        qvecs = {t: embedder.embed(t) for t in warm + timed}

        def params(store: ToolStore, text: str) -> dict[str, Any]:
            info = store.info(counts=False)
            return statement_params(info, route_request(text, stored_fusion(info.settings), k=8), qvecs[text])

        p_many = {t: params(s_many, t) for t in warm + timed}
        p_one = {t: params(s_one, t) for t in warm + timed}

        def statement(conn: psycopg.Connection[Any], p: dict[str, Any]) -> list[str]:
            return route_ids(conn, p)

        for t in warm:
            s_many.route(t), s_one.route(t), statement(c_many, p_many[t]), statement(c_one, p_one[t])
        times: dict[str, list[float]] = {"route_many": [], "route_one": [], "statement_many": [], "statement_one": []}
        same = 0
        log(f"catalogs: timing {requests} requests, {n} catalogs vs 1")
        for i, t in enumerate(timed):
            runs = [
                ("route_many", lambda t=t: s_many.route(t).ids),
                ("route_one", lambda t=t: s_one.route(t).ids),
                ("statement_many", lambda t=t: statement(c_many, p_many[t])),
                ("statement_one", lambda t=t: statement(c_one, p_one[t])),
            ]
            got = {}
            for key, fn in runs[i % 4 :] + runs[: i % 4]:
                start = time.perf_counter()
                got[key] = fn()
                times[key].append((time.perf_counter() - start) * 1000)
            same += got["statement_many"] == got["statement_one"]
        out.update({k: stats(v) for k, v in times.items()})
        out["ratio_route_many_one"] = out["route_many"]["p50"] / out["route_one"]["p50"]
        out["ratio_statement_many_one"] = out["statement_many"]["p50"] / out["statement_one"]["p50"]
        out["identical_results"] = same / requests
        out["routes_per_s_many"] = throughput(lambda i: s_many.route(tput[i % len(tput)]), 200)
        out["routes_per_s_one"] = throughput(lambda i: s_one.route(tput[i % len(tput)]), 200)

        # Writes to another catalog of the same database vs the same writes in another database.
        log("catalogs: routes while another catalog is written")
        other = catalog_name(1)
        rows = slice_rows(full, tv, ev, 1)
        writers = {
            "same_db": Writer(many, other, rows, embedder),
            "other_db": Writer(spare, catalog_name(0), slice_rows(full, tv, ev, 0), embedder),
        }
        for w in writers.values():
            w.start()
        modes = ("none", "same_db", "other_db")
        under: dict[str, list[float]] = {m: [] for m in modes}
        block = 20
        for b in range(max(3, 3 * (requests // (3 * block)))):
            mode = modes[b % 3]
            for w in writers.values():
                w.running.clear()
            if mode != "none":
                writers[mode].running.set()
                time.sleep(0.3)  # the writer is under way
            for t in timed[(b * block) % len(timed) :][:block]:
                start = time.perf_counter()
                s_many.route(t)
                under[mode].append((time.perf_counter() - start) * 1000)
        for w in writers.values():
            w.running.clear()
        out["imports_during"] = {m: w.imports for m, w in writers.items()}
        for w in writers.values():
            w.close()
        out["route_under_writes"] = {m: stats(v) for m, v in under.items()}

        cid = s_many.info(counts=False).id
        dim = embedder.dim

        def one_route(conn: psycopg.Connection[Any]) -> None:
            statement(conn, p_many[timed[0]])

        out["knn_planning_ms"] = knn_planning_ms(c_many, cid, dim, qvecs[timed[0]])
        out["backend_memory_mb"] = backend_memory(many, one_route)
        if hnsw:
            log(f"catalogs: building HNSW indexes for all {n} catalogs")
            out["hnsw_everywhere"] = {"indexes": hnsw_everywhere(many, n, dim, log)}
            h = out["hnsw_everywhere"]
            h["knn_planning_ms"] = knn_planning_ms(c_many, cid, dim, qvecs[timed[0]])
            h["backend_memory_mb"] = backend_memory(many, one_route)
            exact_ms, hnsw_ms = [], []
            with psycopg.connect(many, autocommit=True) as fresh:
                fresh.execute("set search_path = toolstore, public")
                from pgvector.psycopg import register_vector

                register_vector(fresh)
                for t in timed:
                    start = time.perf_counter()
                    statement(fresh, p_many[t])
                    hnsw_ms.append((time.perf_counter() - start) * 1000)
                    start = time.perf_counter()
                    statement(c_one, p_one[t])
                    exact_ms.append((time.perf_counter() - start) * 1000)
            h["statement_many_hnsw"] = stats(hnsw_ms)
            h["statement_one_exact"] = stats(exact_ms)
            log("catalogs: dropping them again")
            with psycopg.connect(many, autocommit=True) as conn:
                conn.execute("set search_path = toolstore, public")
                for (idx,) in conn.execute(
                    "select indexname from pg_indexes where indexname like '%%\\_hnsw\\_%%'"
                ).fetchall():
                    conn.execute(f'drop index "{idx}"')
    return out
