"""Writers of one catalog at once (and of several): what a write holds while it waits for the catalog's lock, what a
dropped catalog's partitions wait for, and reads of a catalog that changes meanwhile (tune). Each test stages the one
interleaving that failed in a storm of writers (threads and processes: upserts with and without examples, removes,
examples, anchors, tune, reembed, migrate, drops, CLI imports, a CLI import killed mid-way)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from toolstore import Anchor, HashingEmbedder, IntentExample, Judgement, Tool, ToolStore
from toolstore import _anchors as anchors_module
from toolstore import _tune as tune_module
from toolstore._sql import query
from toolstore._text import dense_text
from toolstore._vectors import text_hash

from catalog_gen import generated_tools

#: How long a test waits for another thread to reach the point it stages (a bound, never an assertion on time).
STAGED = 60.0


def waiting_backends(dsn: str, statement: str) -> list[int]:
    """The backends waiting for a lock in a statement that contains ``statement`` (asked on a connection of its own:
    a transaction reads pg_stat_activity once)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select pid from pg_stat_activity where wait_event_type = 'Lock' and query like %s", [f"%{statement}%"]
        ).fetchall()
    return [r[0] for r in rows]


def until(found: Callable[[], Any]) -> Any:
    """``found()``'s first true answer, asked again until :data:`STAGED` seconds have passed."""
    deadline = time.monotonic() + STAGED
    while not (answer := found()):
        assert time.monotonic() < deadline, "the staged interleaving never happened"
        time.sleep(0.02)
    return answer


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_an_upsert_with_examples_waits_for_the_catalog_lock_holding_no_cache_rows(dsn: str) -> None:
    """upsert(tools, examples=...) runs tools and examples in one transaction, and embedded the tools in it before it
    took the catalog's lock: waiting for the lock, it held the new texts' embedding cache rows uncommitted, so the
    lock's holder caching one of those texts waited for it: a deadlock (each writer of a storm of upserts with
    examples saw 'a concurrent write kept conflicting: deadlock detected' or the deadlock itself). The texts are cached
    (committed) before the transaction now."""
    embedder = HashingEmbedder(32)
    tools = generated_tools(5, seed=12)
    new = Tool(id="zoo.feed", name="feed_animals", description="feed the zebras at the zoo")
    with (
        ToolStore(dsn, embedder=embedder, catalog="c") as writer,
        ToolStore(dsn, embedder=embedder, catalog="c") as holder,
    ):
        writer.upsert(tools)
        with holder.connection() as lock, lock.transaction():
            lock.execute(query("lock_catalog"), {"name": "c"})
            thread, errors = in_thread(lambda: writer.upsert([new], examples=[IntentExample(new.id, "feed zebras")]))
            until(lambda: waiting_backends(dsn, "for no key update"))
            # the lock's holder caches the same text (as a writer of another catalog would, or this one's under it)
            text = dense_text(new)
            row = {"model": embedder.cache_key, "hashes": [text_hash(text)], "vectors": [embedder.embed(text)]}
            lock.execute(query("cache_store"), row)
        thread.join()
        assert not errors, errors
        assert writer.info().n_examples == 1 and writer.tools([new.id])[0] == new


def orphans(conn: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in conn.execute(query("orphan_partitions"))]


def test_a_dropped_catalogs_partitions_never_stall_routes_of_other_catalogs(dsn: str) -> None:
    """Dropping a dropped catalog's detached vector partition takes an ACCESS EXCLUSIVE lock on `tools` (their foreign
    key's triggers go): while any transaction used `tools` (another catalog's import), the DROP waited for it, and every
    route of every catalog queued behind the DROP's request; a writer deleting tools meanwhile (its foreign key's
    cascade into that partition) deadlocked with it, again at each retry ('a concurrent write kept conflicting'). The
    DROP now waits for the lock a moment at a time, and leaves the (empty) partitions to a later drop when it keeps
    not getting it."""
    embedder = HashingEmbedder(32)
    with (
        ToolStore(dsn, embedder=embedder, catalog="gone") as gone,
        ToolStore(dsn, embedder=embedder, catalog="other") as other,
        ToolStore(dsn, embedder=embedder, catalog="quiet", pool_size=1) as quiet,
        psycopg.connect(dsn) as busy,
    ):
        for store, seed in ((gone, 1), (other, 2), (quiet, 3)):
            store.upsert(generated_tools(10, seed=seed))
        with quiet.connection() as conn:
            conn.execute("set lock_timeout = '2s'")  # a route blocked on a lock: an error instead of a wait
            schema = conn.execute("select current_schema()").fetchone()
        busy.execute("select set_config('search_path', %s, false)", schema)
        busy.execute("select count(*) from tools")  # an open transaction that used `tools` (an import's, say)
        thread, errors = in_thread(other.drop_catalog)
        try:
            until(lambda: waiting_backends(dsn, "drop table"))
            assert quiet.route("send a message").ids  # not queued behind the DROP's lock request
        finally:
            busy.rollback()
            thread.join()
        assert not errors, errors
        gone.drop_catalog()  # the partitions a drop left behind go with a later one
        with quiet.connection() as conn:
            assert orphans(conn) == []


def test_tune_ignores_a_tool_written_while_it_reads_the_catalog(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """tune() reads the catalog's tools, then each request's ranked lists, in separate statements: a tool upserted in
    between (another writer) was in the lists but not in its index of the tools, and tune raised a bare KeyError
    naming it. The lists keep the tools the index holds (as route() at the moment the index was read)."""
    tools = generated_tools(30, seed=4)
    examples = [(f"{t.name.replace('_', ' ')} please", Judgement(f"q{i}", (t.id,))) for i, t in enumerate(tools[:8])]
    late = [Tool(id=f"late.{i}", name=t.name + "_late", description=t.description) for i, t in enumerate(tools[:8])]
    with (
        ToolStore(dsn, embedder=HashingEmbedder(32), catalog="t") as store,
        ToolStore(dsn, embedder=HashingEmbedder(32), catalog="t") as other,
    ):
        store.upsert(tools)
        real = tune_module.load_tool_index

        def then_a_write(store: ToolStore) -> Any:
            index = real(store)
            other.upsert(late)  # between the two reads
            return index

        monkeypatch.setattr(tune_module, "load_tool_index", then_a_write)
        report = store.tune(examples, folds=2, save=False)
    assert report.fusion is not None


def test_a_plain_anchor_slowed_once_by_other_work_is_not_refused(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storm's add_anchors refused `\\mmerge_alert_72\\M` as pathological ('took over 100 ms'): its trial match ran
    during a burst of the other writers' work, its reference just before it did not. A slow trial is tried again (with
    its reference), and a pattern is refused only when every try is slow (test_anchors: a slow one still is)."""
    tools = generated_tools(5, seed=6)
    bursty = iter([0.0, 0.001, 0.0, 0.15, 0.0, 0.001, 0.0, 0.001])  # reference 1 ms, trial 150 ms; then 1 ms, 1 ms
    with ToolStore(dsn, embedder=None, catalog="a") as store:
        store.upsert(tools)
        monkeypatch.setattr(anchors_module, "time", SimpleNamespace(perf_counter=lambda: next(bursty)))
        added = store.add_anchors([Anchor(rf"\m{tools[0].name}\M", tools[0].id, 0.5)])
    assert [a.tool for a in added] == [tools[0].id]
