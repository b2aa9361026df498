"""What the benchmarks share: where they put things, the database they build on, timing helpers, run metadata."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _synth
import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from toolstore import Embedder, LocalEmbedder, ToolStore, migrate
from toolstore._catalog_row import catalog_info
from toolstore._connect import Connector
from toolstore._indexes import ensure_indexes
from toolstore._rows import tool_row
from toolstore._sql import number_placeholders, query
from toolstore._steps import Fetch, fetch_rows
from toolstore._vectors import write_examples, write_tool_vectors

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
CLIENTS = 8
BATCH = 5000


class Precomputed(Embedder):
    """An embedder that looks vectors up: the fastest honest way to import pre-embedded tools via upsert()."""

    def __init__(self, table: dict[str, np.ndarray], model: str, dim: int) -> None:
        self.table, self.model, self.dim = table, model, dim

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


_numbered = functools.cache(number_placeholders)


def route_ids(conn: psycopg.Connection[Any], params: dict[str, Any], text: str | None = None) -> list[str]:
    """The tool ids the route statement returns for ``params``, sent as route() sends it (``fetch_rows``: its raw form
    on a raw cursor), or a variant's ``text`` sent the same way (placeholders numbered once)."""
    if text is None:
        return [r["id"] for r in fetch_rows(conn, Fetch("route", params))]
    raw, names = _numbered(text)
    with psycopg.RawCursor(conn) as cur:
        return [r[0] for r in cur.execute(raw, [params[n] for n in names]).fetchall()]


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
    embedder: Embedder,
    tag: str = "",
) -> str:
    """The size-n database, built unless a complete one of this generator version and embedder's vectors exists (its
    ``cache_key`` where that is more than its model: the shipped local model's names its build)."""
    model = embedder.model
    name = f"bench_{n}_v{_synth.GENERATOR_VERSION}" + ("" if model == LocalEmbedder.model else "_" + model[:12])
    dsn = make_conninfo(admin, dbname=name)
    schema = schema_hash() + tag + ("" if embedder.cache_key == model else f"/{embedder.cache_key}")
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


def backend_cpu(conn: psycopg.Connection[Any]) -> Callable[[], float]:
    """The CPU time (s) the server process behind ``conn`` has used so far: /proc/PID/schedstat's nanoseconds (not the
    10 ms ticks of /proc/PID/stat); NaN where that is not a local Postgres process (a server on another machine).

    On the shared 2-core machine a statement's wall time includes its waits for a core: an A/A pair of connections
    running the same statement differed by 9% in wall p50 and by 0.3% in backend CPU (bench/PROFILE.md, perf48)."""
    pid = conn.info.backend_pid
    try:
        local = Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"
    except OSError:
        local = False

    def read() -> float:
        try:
            return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9 if local else math.nan
        except (OSError, ValueError, IndexError):
            return math.nan

    return read


def timed_cpu(fn: Callable[[int], Any], cpu: Callable[[], float], i: int) -> tuple[float, float, Any]:
    """``fn(i)``'s wall time, the CPU time ``cpu`` counted meanwhile (:func:`backend_cpu`), and its result."""
    before = cpu()
    elapsed, result = timed(fn, i)
    return elapsed, cpu() - before, result


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


def git_state() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=BENCH.parent, capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", "sql", "migrations", "toolstore")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes to core files" if dirty else "")


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
