"""Concurrency soak: routers, writers of several kinds and concurrent re-imports on one database for a while, then
every invariant checked (issue 13).

    python bench/soak.py [--seconds 60] [--tools 2000] [--routers 4] [--json bench/out/soak.json]

Threads, all at once: routers on two catalogs, half of them with a session; a writer changing a few tools at a time;
a remover that takes tools away and puts them back; an examples writer; two re-importers that alternate two versions
of the main catalog with --prune (they race each other); a bulk importer into a third catalog (drops and rebuilds its
HNSW indexes); two session loggers appending calls to a few shared sessions and a pruner trimming the log; a writer
of tools with their intent examples (one transaction) and one that makes a scratch catalog and drops it.
Afterwards: BM25 statistics equal a recomputation from the stored tsvectors, transition counts equal the pairs in
the session log, no index is invalid and every tool of an embedded catalog has its vector. Exit status 1 on any
error or broken invariant.
Database: $TOOLSTORE_DSN's server, else the embedded one under $TOOLSTORE_HOME (default bench/out/home).
``--at-least NAME=N`` (repeatable, NAME as the "ok" counts name it: route, record calls...) keeps every thread going
past --seconds until each NAME succeeded N times, for at most 20 times --seconds: a test asks for the work it checks,
not for a rate a loaded machine may not reach.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH.parent / "tests")]

from toolstore import HashingEmbedder, IntentExample, Tool, ToolStore, UnknownToolError, migrate

from catalog_gen import generated_queries, generated_tools
from statistics_check import statistics_exact, transitions_exact

OUT = BENCH / "out"


def database() -> str:
    if os.environ.get("TOOLSTORE_DSN"):
        admin = os.environ["TOOLSTORE_DSN"]
    else:
        os.environ.setdefault("TOOLSTORE_HOME", str(OUT / "home"))
        from toolstore._embedded import embedded_dsn

        admin = embedded_dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("drop database if exists toolstore_soak with (force)")
        conn.execute(sql.SQL("create database {}").format(sql.Identifier("toolstore_soak")))
    dsn = make_conninfo(admin, dbname="toolstore_soak")
    migrate(dsn)
    return dsn


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.samples: list[str] = []
        self.route_ms: list[float] = []

    def run(self, name: str, call: Callable[[], Any], timed: bool = False) -> None:
        started = time.perf_counter()
        try:
            call()
        except UnknownToolError:  # a tool removed by another writer meanwhile: an expected answer, not a fault
            with self.lock:
                self.ok[name] += 1
            return
        except Exception as exc:  # noqa: BLE001 - everything else is counted and shown
            with self.lock:
                self.errors[f"{name}: {type(exc).__name__}"] += 1
                if len(self.samples) < 10:
                    self.samples.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
            return
        with self.lock:
            self.ok[name] += 1
            if timed:
                self.route_ms.append((time.perf_counter() - started) * 1000)


def versions(tools: list[Tool]) -> tuple[list[Tool], list[Tool]]:
    a = [dataclasses.replace(t, description=t.description + " version A") for t in tools]
    b = [dataclasses.replace(t, description=t.description + " version B") for t in tools[: len(tools) * 9 // 10]]
    return a, b


def _at_least(text: str) -> tuple[str, int]:
    """``NAME=N`` of ``--at-least``."""
    name, sep, count = text.rpartition("=")
    if not sep or not name or not count.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=N (a count), got {text!r}")
    return name, int(count)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--routers", type=int, default=4)
    parser.add_argument("--json", type=Path, default=OUT / "soak.json")
    parser.add_argument("--at-least", type=_at_least, action="append", default=[], metavar="NAME=N")
    args = parser.parse_args(argv)
    dsn = database()
    embedder = HashingEmbedder(64)
    base = generated_tools(args.tools, seed=1)
    other = generated_tools(args.tools // 2, seed=2)
    version_a, version_b = versions(base)
    queries = generated_queries(500, seed=3)
    with ToolStore(dsn, embedder=embedder, catalog="main") as store:
        store.upsert(base)
        store.add_examples(IntentExample(t.id, q) for t, q in zip(base[::3], generated_queries(len(base), seed=4)))
    with ToolStore(dsn, embedder=embedder, catalog="other") as store:
        store.upsert(other)

    tally = Tally()
    now = time.monotonic()
    stop, cap = now + args.seconds, now + 20 * args.seconds
    wanted = dict(args.at_least)

    def going() -> bool:
        if time.monotonic() < stop:
            return True
        with tally.lock:
            short = any(tally.ok[name] < n for name, n in wanted.items())
        return short and time.monotonic() < cap

    def loop(work: Callable[[random.Random], None], seed: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(seed)
            while going():
                work(rng)

        return run

    stores: list[ToolStore] = []

    def store(catalog: str) -> ToolStore:  # one per worker, as separate processes would have
        stores.append(ToolStore(dsn, embedder=embedder, catalog=catalog, pool_size=2))
        return stores[-1]

    sessions = [f"s{i}" for i in range(8)]

    def router(catalog: str, with_session: bool) -> Callable[[random.Random], None]:
        own = store(catalog)

        def work(rng: random.Random) -> None:
            session = rng.choice(sessions) if with_session else None
            tally.run("route", lambda: own.route(rng.choice(queries), k=8, session=session), timed=True)

        return work

    def log_calls(rng: random.Random) -> None:  # tools of version B exist whichever re-import won last
        calls = [t.id for t in rng.sample(version_b, rng.randint(1, 4))]
        tally.run("record calls", lambda: logger_store.record_calls(rng.choice(sessions), calls))

    def prune_log(rng: random.Random) -> None:
        time.sleep(0.2)
        tally.run("prune sessions", lambda: pruner.prune_sessions(session=rng.choice(sessions)))

    def small_writes(rng: random.Random) -> None:
        picked = rng.sample(base, 5)
        changed = [dataclasses.replace(t, description=t.description + f" edit {rng.randrange(10**6)}") for t in picked]
        tally.run("upsert 5", lambda: writer.upsert(changed))

    def remove_and_restore(rng: random.Random) -> None:
        tool = rng.choice(base)
        tally.run("remove", lambda: remover.remove(tool.id))
        tally.run("re-add", lambda: remover.upsert([tool]))

    def examples(rng: random.Random) -> None:
        tool = rng.choice(base)
        example = IntentExample(tool.id, f"request {rng.random()}")
        tally.run("add example", lambda: examiner.add_examples([example]))

    def with_examples(rng: random.Random) -> None:  # tools and their examples in one transaction
        picked = rng.sample(version_b, 3)
        changed = [dataclasses.replace(t, description=t.description + f" edit {rng.randrange(10**6)}") for t in picked]
        new = [IntentExample(t.id, f"please {t.name} {rng.random()}") for t in picked]
        tally.run("upsert with examples", lambda: example_writer.upsert(changed, examples=new))

    def drop_scratch(rng: random.Random) -> None:  # a catalog made and dropped: its partitions detached and dropped
        tally.run("drop catalog", lambda: (dropper.upsert(rng.sample(bulk_tools, 20)), dropper.drop_catalog()))

    def reimport(version: list[Tool]) -> Callable[[random.Random], None]:
        own = store("main")
        return lambda rng: tally.run("re-import --prune", lambda: own.upsert(version, prune=True))

    bulk_tools = generated_tools(1500, seed=5)

    def bulk(rng: random.Random) -> None:
        version = [dataclasses.replace(t, description=t.description + f" {rng.randrange(10**6)}") for t in bulk_tools]
        tally.run("bulk import (other catalog)", lambda: bulk_store.upsert(version, prune=True))

    writer, remover, examiner, bulk_store = store("main"), store("main"), store("main"), store("other")
    logger_store, pruner, example_writer, dropper = store("main"), store("main"), store("main"), store("scratch")
    workers = [loop(router(("main", "other")[i % 2], i % 4 < 2), i) for i in range(args.routers)]
    workers += [loop(small_writes, 100), loop(remove_and_restore, 101), loop(examples, 102)]
    workers += [loop(reimport(version_a), 103), loop(reimport(version_b), 104), loop(bulk, 105)]
    workers += [loop(log_calls, 106), loop(log_calls, 107), loop(prune_log, 108)]
    workers += [loop(with_examples, 109), loop(drop_scratch, 110)]
    threads = [threading.Thread(target=w) for w in workers]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    for store in stores:
        store.close()

    with ToolStore(dsn, embedder=None, catalog="main") as store, store.connection() as conn:
        catalogs = conn.execute("select id, name from catalogs order by id").fetchall()
        exact = {name: statistics_exact(conn, cid) for cid, name in catalogs}
        transitions = {name: transitions_exact(conn, cid) for cid, name in catalogs}
        logged = conn.execute("select count(*) from session_calls").fetchone()[0]
        invalid = [r[0] for r in conn.execute("select indexrelid::regclass::text from pg_index where not indisvalid")]
        missing = conn.execute(
            "select count(*) from tools t where not exists (select 1 from tool_vectors v where v.tool_pk = t.pk)"
        ).fetchone()[0]
    result = {
        "seconds": round(elapsed, 1),
        "threads": len(threads),
        "ok": dict(tally.ok),
        "errors": dict(tally.errors),
        "error_samples": tally.samples,
        "route_ms_p50": statistics.median(tally.route_ms) if tally.route_ms else None,
        "route_ms_max": max(tally.route_ms) if tally.route_ms else None,
        "statistics_exact": exact,
        "transitions_exact": transitions,
        "calls_logged_at_end": logged,
        "invalid_indexes": invalid,
        "tools_without_vectors": missing,
    }
    print(json.dumps(result, indent=2))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    failed = tally.errors or not all(exact.values()) or not all(transitions.values()) or invalid or missing
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
