"""Read replicas: routes on a real streaming replica of the embedded server, writes on the primary, and a catalog the
replica has not replayed yet read from the primary instead."""

from __future__ import annotations

import time

import psycopg
import pytest

from toolstore import DatabaseError, HashingEmbedder, ModelMismatchError, ToolStore

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
