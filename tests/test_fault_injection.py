"""Faults injected at random points of an import: the server terminating the importing backend, and the importing
client killed with SIGKILL. Afterwards the catalog holds the old version or the new one (never a mix, never an
empty catalog), its BM25 statistics are exact, every tool has its vector, and the next import repairs the indexes.

N rounds of each in the `slow` test; a few always run."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from toolstore import DatabaseError, HashingEmbedder, Tool, ToolStore, export_catalog, load_tools_file

from catalog_gen import generated_tools
from statistics_check import statistics_exact

N_TOOLS = 1100  # above the bulk threshold: indexes are dropped before the load and built after it


def state(dsn: str, catalog: str) -> set[tuple[str, str]] | None:
    """The catalog's (id, content hash) pairs, or None when the catalog does not exist; checks its invariants."""
    with ToolStore(dsn, embedder=None, catalog=catalog, create=False) as store, store.connection() as conn:
        row = conn.execute("select id, embed_model from catalogs where name = %s", [catalog]).fetchone()
        if row is None:
            return None
        catalog_id, model = row
        assert statistics_exact(conn, catalog_id), "BM25 statistics drifted"
        without = conn.execute(
            "select count(*) from tools t where t.catalog_id = %s "
            "and not exists (select 1 from tool_vectors v where v.tool_pk = t.pk)",
            [catalog_id],
        ).fetchone()
        assert model is None or without == (0,), f"{without} tools without a vector"
        return {(t.id, t.content_hash()) for t in store.tools()}


def invalid_indexes(dsn: str) -> list[str]:
    with ToolStore(dsn, embedder=None, catalog="x", create=False) as store, store.connection() as conn:
        rows = conn.execute("select indexrelid::regclass::text from pg_index where not indisvalid").fetchall()
        return [r[0] for r in rows]


def hashes(tools: list[Tool]) -> set[tuple[str, str]]:
    return {(t.id, t.content_hash()) for t in tools}


def versions(seed: int) -> tuple[list[Tool], list[Tool]]:
    old = generated_tools(N_TOOLS, seed=seed)
    new = [dataclasses.replace(t, description=t.description + " revised") for t in old[: N_TOOLS - 50]]
    extra = [dataclasses.replace(t, id=f"new.{t.id}") for t in generated_tools(60, seed=seed + 1000)]
    return old, new + extra


def terminate_during_import(dsn: str, catalog: str, rng: random.Random) -> None:
    old, new = versions(rng.randrange(10**6))
    embedder = HashingEmbedder(64)
    with ToolStore(dsn, embedder=embedder, catalog=catalog) as store:
        store.upsert(old)
    victim = make_conninfo(dsn, application_name="fault-victim")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with ToolStore(victim, embedder=embedder, catalog=catalog, timeout=10) as store:
                store.upsert(new, prune=True)
        except DatabaseError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(rng.uniform(0.0, 1.5))
    with ToolStore(dsn, embedder=None, catalog=catalog) as admin, admin.connection() as conn:
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where application_name = 'fault-victim' and datname = current_database() and pid <> pg_backend_pid()"
        )
    worker.join(120)
    assert not worker.is_alive()
    assert state(dsn, catalog) in (hashes(old), hashes(new)), errors
    with ToolStore(dsn, embedder=embedder, catalog=catalog) as store:
        store.upsert(new, prune=True)  # the next import finishes the job and repairs the indexes
    assert state(dsn, catalog) == hashes(new)
    assert not invalid_indexes(dsn)


def kill_during_import(dsn: str, catalog: str, rng: random.Random, tmp: Path) -> None:
    old, new = versions(rng.randrange(10**6))
    path = tmp / f"{catalog}.json"
    path.write_text(json.dumps(export_catalog(new, "mcp", with_metadata=True)))
    new = load_tools_file(path)  # what the command imports
    first_import = rng.random() < 0.3  # sometimes the killed import is the catalog's first write
    if not first_import:
        with ToolStore(dsn, embedder=HashingEmbedder(64), catalog=catalog) as store:
            store.upsert(old)
    env = {**os.environ, "TOOLSTORE_DSN": dsn, "TOOLSTORE_EMBEDDER": "hashing-64"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolstore", "-c", catalog, "import", str(path), "--prune"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(rng.uniform(0.5, 3.0))  # python startup and parsing take about a second
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.2)  # the server notices the dead client and rolls its transaction back
    allowed = [hashes(new), None if first_import else hashes(old)]
    assert state(dsn, catalog) in allowed
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog=catalog) as store:
        store.upsert(new, prune=True)
    assert state(dsn, catalog) == hashes(new)
    assert not invalid_indexes(dsn)


@pytest.mark.parametrize("seed", range(3))
def test_a_terminated_import_leaves_one_version(dsn: str, seed: int) -> None:
    terminate_during_import(dsn, f"term{seed}", random.Random(seed))


@pytest.mark.parametrize("seed", range(3))
def test_a_killed_import_leaves_one_version(dsn: str, tmp_path: Path, seed: int) -> None:
    kill_during_import(dsn, f"kill{seed}", random.Random(100 + seed), tmp_path)


@pytest.mark.slow
def test_twenty_faults_of_each_kind(dsn: str, tmp_path: Path) -> None:
    rng = random.Random(2026)
    for i in range(20):
        terminate_during_import(dsn, f"sterm{i}", rng)
        kill_during_import(dsn, f"skill{i}", rng, tmp_path)
