"""Read replicas: routes on a real streaming replica of the embedded server, writes on the primary, and a catalog the
replica has not replayed yet read from the primary instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from toolstore import DatabaseError, HashingEmbedder, ModelMismatchError, Tool, ToolStore, UnmatchedFilterError

from catalog_gen import generated_queries, generated_tools
from servers import migrated_dsn, private_server, stop, streaming_replica


def wait_for(replica: str, catalog: str, n_tools: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        with psycopg.connect(replica) as conn:
            row = conn.execute(
                "select count(*) from toolstore.tools t join toolstore.catalogs c on c.id = t.catalog_id "
                "where c.name = %s",
                [catalog],
            ).fetchone()
        if row == (n_tools,):
            return
        assert time.monotonic() < deadline, "the replica never caught up"
        time.sleep(0.2)


@contextmanager
def replay_paused(replica: str) -> Iterator[None]:
    """The replica replays nothing inside the block (its pause is asked for, then awaited)."""
    with psycopg.connect(replica, autocommit=True) as conn:
        conn.execute("select pg_wal_replay_pause()")
        while conn.execute("select pg_get_wal_replay_pause_state()").fetchone() != ("paused",):
            time.sleep(0.05)
        try:
            yield
        finally:
            conn.execute("select pg_wal_replay_resume()")


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[str, str]]:
    """A migrated primary and a real streaming replica of it (its DSN), both left running by the tests that share
    them; a test that pauses the replica's replay resumes it."""
    with private_server() as server:
        dsn = migrated_dsn(server)
        with streaming_replica(server) as template:
            yield dsn, template.format(db="postgres")


def test_reads_go_to_the_replica_and_a_lagging_one_hands_them_to_the_primary() -> None:
    """A replica that has not replayed a catalog, or its switch to another model, hands the read to the primary."""
    tools = generated_tools(40, seed=21)
    query = generated_queries(1, seed=3)[0]
    with private_server() as server:
        dsn = migrated_dsn(server)
        with streaming_replica(server) as template:
            replica = template.format(db="postgres")
            embedder = HashingEmbedder(32)
            with (
                ToolStore(dsn, embedder=embedder, catalog="a", read_dsn=[replica], timeout=3) as store,
                ToolStore(dsn, embedder=embedder, catalog="m", read_dsn=[replica], timeout=3) as switched,
            ):
                store.upsert(tools)
                switched.upsert(tools[:10])
                wait_for(replica, "a", 40)
                wait_for(replica, "m", 10)
                expected = store.route(query).ids
                assert switched.route(query).dense_used  # its catalog row read on the replica
                with psycopg.connect(replica, autocommit=True) as conn:  # the replica stops replaying
                    conn.execute("select pg_wal_replay_pause()")
                with ToolStore(dsn, embedder=embedder, catalog="late", read_dsn=replica, timeout=3) as late:
                    late.upsert(tools[:10])  # a catalog only the primary has
                    assert len(late.route(query)) > 0 and late.info().n_tools == 10
                switched.reembed(HashingEmbedder(64))  # on the primary; the replica still has the old model
                assert switched.route(query).dense_used
                with ToolStore(dsn, embedder=HashingEmbedder(16), catalog="m", read_dsn=replica, timeout=3) as other:
                    with pytest.raises(ModelMismatchError):  # a mismatch on the primary still raises
                        other.route(query)
                with psycopg.connect(replica, autocommit=True) as conn:
                    conn.execute("select pg_wal_replay_resume()")
                stop(server)  # the primary goes away: reads go on, writes fail
                assert store.route(query).ids == expected
                assert [t.id for t in store.tools()] == sorted(t.id for t in tools)
                with pytest.raises(DatabaseError):
                    store.upsert(tools[:1] and [tools[0].__class__(**{**tools[0].__dict__, "description": "x"})])


def test_a_replica_that_is_down_hands_reads_to_the_primary_from_the_start(dsn: str) -> None:
    """The store opens at once without the replica; the first read waits for it at most `timeout`, the next ones
    leave it out (REPLICA_RETRY) and go to the primary without asking it."""
    down = "postgresql://postgres@/postgres?host=/nonexistent-replica-socket-dir"
    with ToolStore(dsn, embedder=None, catalog="r", read_dsn=[down], timeout=1) as store:
        store.upsert(generated_tools(5))
        assert len(store.route("send a message")) > 0
        pool = store._replicas.connectors[0].pool
        asked = pool.get_stats()["requests_num"]
        assert asked >= 1
        assert len(store.route("send a message")) > 0 and store.info().n_tools == 5
        assert pool.get_stats()["requests_num"] == asked


def test_a_replica_whose_pool_is_busy_is_not_left_out_of_reads(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More concurrent routes than pool_size: the one that waited in vain for the replica's pool is routed on the
    primary, and the replica, which answers, stays in the reads (only one that cannot be reached is left out)."""
    monkeypatch.setattr("toolstore._connect.REPLICA_RETRY", 3600.0)  # a replica left out stays out for the test
    dsn, replica = replicated
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="busy", read_dsn=replica, pool_size=1, timeout=1) as store:
        store.upsert(generated_tools(20, seed=8))
        wait_for(replica, "busy", 20)
        expected = store.route(query).ids
        holding, release = threading.Event(), threading.Event()

        def hold(_query: str, candidates: list[Any]) -> list[float]:  # keeps the replica's one connection
            holding.set()
            release.wait()
            return [0.0] * len(candidates)

        held = threading.Thread(target=store.route, args=(query,), kwargs={"reranker": hold})
        held.start()
        try:
            assert holding.wait(60)
            primary = store.pool.get_stats()["requests_num"]
            assert store.route(query).ids == expected  # the replica's pool is busy: routed on the primary
            assert store.pool.get_stats()["requests_num"] > primary
        finally:
            release.set()
            held.join()
        replica_pool = store._replicas.connectors[0].pool
        asked = replica_pool.get_stats()["requests_num"]
        assert store.route(query).ids == expected
        assert replica_pool.get_stats()["requests_num"] > asked  # the replica was asked again, not left out


def test_a_filter_value_only_the_primary_has_hands_the_route_to_the_primary(replicated: tuple[str, str]) -> None:
    """A filter naming a tool, category, provider or tag the replica has not replayed yet (TS002 there) routes on the
    primary, which has it; a value the primary lacks too is still the caller's error (an InvalidInputError)."""
    dsn, replica = replicated
    fresh = Tool(
        id="fresh.ping",
        name="ping_fresh",
        description="ping the fresh service",
        provider="freshco",
        categories=("freshness",),
        tags=("fresh-tag",),
    )
    with ToolStore(dsn, embedder=None, catalog="filters", read_dsn=replica, timeout=3) as store:
        store.upsert(generated_tools(20, seed=9))
        wait_for(replica, "filters", 20)
        assert len(store.route("send a message")) > 0  # the catalog row, read on the replica, is cached
        with replay_paused(replica):
            store.upsert([fresh])  # only the primary has it
            filters: list[dict[str, Any]] = [
                {"allow": ["fresh.ping"]},
                {"allow": ["fresh.*"]},
                {"categories": ["freshness"]},
                {"providers": ["freshco"]},
                {"tags": ["fresh-tag"]},
            ]
            for given in filters:
                assert store.route("ping the fresh service", **given).ids == ["fresh.ping"], given
            asked = store.pool.get_stats()["requests_num"]
            with pytest.raises(UnmatchedFilterError, match="nowhere"):  # the primary lacks it too
                store.route("ping the fresh service", categories=["nowhere"])
            assert store.pool.get_stats()["requests_num"] > asked  # the primary was asked before it was an error
