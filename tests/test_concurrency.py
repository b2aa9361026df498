"""Concurrent writers and readers: imports never interleave, no deadlock reaches a caller, one catalog's writes
never block another catalog's routes, and a tool's vector is never stale."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from toolstore import HashingEmbedder, IntentExample, Tool, ToolStore, UnknownToolError
from toolstore import _catalog as catalog_module
from toolstore._sql import query

from catalog_gen import generated_queries, generated_tools


def stored(store: ToolStore) -> set[tuple[str, str]]:
    return {(t.id, t.content_hash()) for t in store.tools()}


def versions(n: int) -> tuple[list[Tool], list[Tool], list[Tool]]:
    """A catalog and two edits of it: A rewrites the first half, B the second half and renames a tenth."""
    base = generated_tools(n, seed=31)
    a = [dataclasses.replace(t, description=t.description + " (A)") if i < n // 2 else t for i, t in enumerate(base)]
    b = [dataclasses.replace(t, description=t.description + " (B)") if i >= n // 2 else t for i, t in enumerate(base)]
    b = [dataclasses.replace(t, id=t.id + ".b") if i % 10 == 0 else t for i, t in enumerate(b)]
    return base, a, b


def race(*calls: Callable[[], Any]) -> list[BaseException]:
    """Run the calls at once on threads; the exceptions they raised."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("round_", range(4))
def test_two_concurrent_pruning_imports_end_as_one_of_them(dsn: str, round_: int) -> None:
    base, a, b = versions(240)
    embedder = HashingEmbedder(32)
    with (
        ToolStore(dsn, embedder=embedder, catalog="race") as first,
        ToolStore(dsn, embedder=embedder, catalog="race") as second,
    ):
        first.upsert(base)
        order = (a, b) if round_ % 2 else (b, a)
        errors = race(lambda: first.upsert(order[0], prune=True), lambda: second.upsert(order[1], prune=True))
        assert not errors, errors
        final = stored(first)
        assert final in ({(t.id, t.content_hash()) for t in a}, {(t.id, t.content_hash()) for t in b})
        with first.connection() as conn:  # every tool has the vector of its own text
            rows = conn.execute(
                "select t.id, v.embedding from tools t join tool_vectors v on v.tool_pk = t.pk "
                "where t.catalog_id = (select id from catalogs where name = 'race')"
            ).fetchall()
        texts = {t.id: t for t in first.tools()}
        assert len(rows) == len(texts)
        for tool_id, vector in rows:
            from toolstore._text import dense_text

            expected = embedder.embed(dense_text(texts[tool_id]))
            assert np.allclose(np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector), expected)


def test_removes_beside_upserts_never_deadlock(dsn: str) -> None:
    """Three removers and an upserter on one catalog (before every write took the catalog lock, this deadlocked in
    bm25_remove within a few rounds)."""
    tools = generated_tools(300, seed=5)
    changed = [dataclasses.replace(t, description=t.description + " v2") for t in tools]
    stores = [ToolStore(dsn, embedder=None, catalog="dl") for _ in range(4)]
    try:
        stores[0].upsert(tools)

        def upserts() -> None:
            for version in (changed, tools) * 3:
                stores[0].upsert(version)

        def removals(k: int) -> Callable[[], None]:
            def run() -> None:
                for t in tools[k::9]:
                    try:
                        stores[k].remove(t.id)
                    except UnknownToolError:
                        pass  # removed before its re-insert: fine; a deadlock is not

            return run

        for _ in range(3):
            errors = race(upserts, removals(1), removals(2), removals(3))
            assert not errors, errors
            stores[0].upsert(tools)
        with stores[0].connection() as conn:  # BM25 statistics stayed exact
            df = conn.execute(
                "select count(*) from lexeme_stats s where s.df <> (select count(*) from postings p "
                "where p.catalog_id = s.catalog_id and p.field = s.field and p.lexeme = s.lexeme)"
            ).fetchone()
        assert df == (0,)
    finally:
        for store in stores:
            store.close()


def test_a_bulk_import_never_blocks_routes_of_another_catalog(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = HashingEmbedder(32)
    with (
        ToolStore(dsn, embedder=embedder, catalog="busy") as busy,
        ToolStore(dsn, embedder=embedder, catalog="quiet", pool_size=1) as quiet,
    ):
        quiet.upsert(generated_tools(50, seed=2))
        busy.upsert(generated_tools(20, seed=3))  # busy has its indexes already
        inside, release = threading.Event(), threading.Event()
        real = catalog_module._write_tools

        def paused(conn: Any, *args: Any) -> Any:
            """The real write transaction, held open (uncommitted, locks kept) until the test has routed."""
            with conn.transaction():
                report = real(conn, *args)
                inside.set()
                assert release.wait(30)
            return report

        monkeypatch.setattr(catalog_module, "_write_tools", paused)
        worker = threading.Thread(target=lambda: busy.upsert(generated_tools(1500, seed=4)))
        worker.start()
        try:
            assert inside.wait(60)
            with quiet.connection() as conn:
                conn.execute("set lock_timeout = '2s'")  # blocked on a lock: an error instead of a wait
            result = quiet.route(generated_queries(1)[0])
            assert result.dense_used and len(result) > 0
        finally:
            release.set()
            worker.join()
        assert busy.info().n_tools == 1520


def test_vectors_are_never_stale_and_an_upsert_with_the_embedder_repairs_them(dsn: str) -> None:
    embedder = HashingEmbedder(32)
    tools = generated_tools(20, seed=8)
    with ToolStore(dsn, embedder=embedder, catalog="v") as store:
        store.upsert(tools)
    changed = [dataclasses.replace(tools[0], description="completely different words about zebras")]
    new = Tool(id="zoo.feed", name="feed_animals", description="feed the zebras at the zoo")
    with ToolStore(dsn, embedder=None, catalog="v") as lexical:
        report = lexical.upsert([*changed, new])
        assert report.unembedded == 2 and report.embedded == 0

    def vector_ids(store: ToolStore) -> set[str]:
        with store.connection() as conn:
            rows = conn.execute(
                "select t.id from tools t join tool_vectors v on v.tool_pk = t.pk "
                "where t.catalog_id = (select id from catalogs where name = 'v')"
            )
            return {r[0] for r in rows}

    with ToolStore(dsn, embedder=embedder, catalog="v") as store:
        assert tools[0].id not in vector_ids(store) and new.id not in vector_ids(store)  # no stale vector
        again = store.upsert([*changed, new])  # unchanged content: only the repair
        assert again.unchanged == 2 and again.embedded == 2
        assert {tools[0].id, new.id} <= vector_ids(store)
        assert store.upsert([*changed, new]).embedded == 0
        assert (
            store.route(
                "feed the zebras",
                weights={s: float(s == "dense") for s in ("name", "description", "expansion", "dense", "intent")},
            ).ids[0]
            == new.id
        )


def test_an_upsert_with_the_embedder_embeds_the_catalogs_other_tools_without_a_vector(dsn: str) -> None:
    """README: the next upsert with the catalog's embedder re-embeds every tool that has none, not only its own."""
    embedder = HashingEmbedder(32)
    tools = [dataclasses.replace(t, provider="p" if i % 2 else "q") for i, t in enumerate(generated_tools(6, seed=5))]
    edited = [dataclasses.replace(t, description=t.description + " again") for t in tools]
    with ToolStore(dsn, embedder=embedder, catalog="r") as store, ToolStore(dsn, embedder=None, catalog="r") as lexical:
        store.upsert(tools)
        assert lexical.upsert(edited[:4]).unembedded == 4

        def without_vectors() -> list[str]:
            with store.connection() as conn:
                rows = conn.execute(
                    "select t.id from tools t where t.catalog_id = %s and not exists (select 1 from tool_vectors v "
                    "where v.catalog_id = t.catalog_id and v.tool_pk = t.pk) order by t.id",
                    [store.info().id],
                )
                return [r[0] for r in rows]

        assert without_vectors() == sorted(t.id for t in edited[:4])
        # a sync of provider q's upstream keeping only tools[0]: tools[2] is pruned, not embedded first; tools[1] and
        # [3] are (a sync marks the tools it writes as its upstream's: here q's, as if synced before)
        with store.connection() as conn:
            q = [t.id for t in tools if t.provider == "q"]
            conn.execute(query("claim_tools"), {"catalog": store.info().id, "ids": q, "upstream": "q"})
        report = store._run(
            lambda conn: catalog_module.upsert_tools(conn, "r", edited[:1], embedder, prune=True, prune_upstream="q")
        )
        assert (report.unchanged, report.embedded, sorted(report.removed)) == (1, 3, sorted([tools[2].id, tools[4].id]))
        assert without_vectors() == []
        assert lexical.upsert([edited[1], dataclasses.replace(edited[3], description="zebras")]).unembedded == 1
        new = Tool(id="zoo.feed", name="feed_animals", description="feed the zebras at the zoo")
        report = store.upsert([new])  # embeds the tool it writes and the one the lexical write left without
        assert (report.inserted, report.embedded) == (["zoo.feed"], 2)
        assert without_vectors() == []
        assert store.upsert([new]).embedded == 0


def test_intent_examples_written_concurrently_are_all_kept(dsn: str) -> None:
    tools = generated_tools(10, seed=9)
    with (
        ToolStore(dsn, embedder=HashingEmbedder(32), catalog="ex") as one,
        ToolStore(dsn, embedder=HashingEmbedder(32), catalog="ex") as two,
    ):
        one.upsert(tools)
        first = [IntentExample(t.id, f"first request {i}") for i, t in enumerate(tools)]
        second = [IntentExample(t.id, f"second request {i}") for i, t in enumerate(tools)]
        errors = race(lambda: one.add_examples(first), lambda: two.add_examples(second))
        assert not errors, errors
        assert one.info().n_examples == 20


FORKED = """
import os, sys
from toolstore import ToolStore, Tool
store = ToolStore(sys.argv[1], embedder=None, catalog="forked", pool_size=1)
store.upsert([Tool(id="slack.send", name="send", description="post a message to a channel")])
def backend():
    with store.connection() as conn:
        return conn.execute("select pg_backend_pid()").fetchone()[0]
parent = backend()
child = os.fork()
if child == 0:  # the child's calls: on connections of its own, not the parent's it inherited
    mine = backend()
    routed = store.route("post a message").ids
    store.close()
    os._exit(0 if mine != parent and routed == ["slack.send"] else 3)
_, status = os.waitpid(child, 0)
print(os.waitstatus_to_exitcode(status), backend() == parent, store.route("post a message").ids, flush=True)
"""


def test_a_store_made_before_a_fork_opens_its_own_connections_in_the_child(dsn: str) -> None:
    """A ToolStore made at import and then forked (gunicorn --preload, multiprocessing's fork) handed the child the
    parent's pooled connections, mid-protocol on sockets they shared: a child's route ran on the parent's backend, and
    routes made by both at once hung (no timeout bounds a read of a shared socket). The child opens pools of its own
    at its first call there; the parent's connections are left to it, untouched (its backend the same after)."""
    env = {**os.environ, "TOOLSTORE_EMBEDDER": "none"}
    proc = subprocess.run([sys.executable, "-c", FORKED, dsn], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[0] == "0 True ['slack.send']", proc.stdout + proc.stderr[-2000:]
