"""Read replicas: routes on a real streaming replica of the embedded server, writes on the primary, and a catalog the
replica has not replayed yet read from the primary instead."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from toolstore import (
    Anchor,
    AsyncToolStore,
    DatabaseError,
    HashingEmbedder,
    ModelMismatchError,
    Tool,
    ToolStore,
    UnknownToolError,
    UnmatchedFilterError,
)

from catalog_gen import generated_queries, generated_tools
from servers import migrated_dsn, private_server, start_standby, stop, stop_standby, streaming_replica


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
def standby() -> Iterator[tuple[Any, str, str]]:
    """A migrated primary (the server, its DSN) and a real streaming replica of it (its DSN template), both left
    running by the tests that share them; a test that pauses the replica's replay resumes it, one that stops the
    replica starts it again."""
    with private_server() as server:
        dsn = migrated_dsn(server)
        with streaming_replica(server) as template:
            yield server, dsn, template


@pytest.fixture(scope="module")
def replicated(standby: tuple[Any, str, str]) -> tuple[str, str]:
    """:func:`standby`'s primary DSN and the replica's."""
    _server, dsn, template = standby
    return dsn, template.format(db="postgres")


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


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def requests_errors(pool: Any) -> int:
    """The waits for a connection of ``pool`` that ended without one."""
    return int(pool.get_stats().get("requests_errors", 0))


@pytest.mark.parametrize("pool_size", [1, 3])
def test_replicas_that_refuse_connections_are_left_out_without_a_read_waiting_for_them(
    dsn: str, pool_size: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Replicas whose server refuses connections when the store opens (down, a wrong port): their pools' attempts to
    connect, made in the background, fail at once, and no read waits for them (the first read waited the whole
    ``timeout`` for each, and again each time REPLICA_RETRY had passed): every read is answered by the primary, no
    replica's pool asked for a connection, and each pool is left trying again in the background. The warning that
    leaves one out names it by host, port and dbname (its DSN a URL or key=value), never its password. Both stores,
    one pool size and several."""
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 0.0)  # every read looks at the replicas again
    caplog.set_level(logging.WARNING, logger="toolstore")
    ports = closed_port(), closed_port()
    down = [
        f"postgresql://reader:s3cret@127.0.0.1:{ports[0]}/tools",
        f"host=127.0.0.1 port={ports[1]} dbname=tools user=reader password=s3cret",
    ]
    names = [f"read replica {i + 1} (host=127.0.0.1 port={port} dbname=tools)" for i, port in enumerate(ports)]
    with ToolStore(dsn, embedder=None, catalog="r", read_dsn=down, pool_size=pool_size, timeout=2) as store:
        store.upsert(generated_tools(5))
        primary = requests(store.pool)
        for _ in range(3):
            assert len(store.route("send a message")) > 0 and store.info().n_tools == 5
        assert requests(store.pool) >= primary + 6  # every read on the primary
        assert [requests(c.pool) for c in store._replicas.connectors] == [0, 0]  # no read waited for a replica
        assert all(c.pool.connect_errors() > 0 for c in store._replicas.connectors)  # tried in the background

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="r", read_dsn=down, pool_size=pool_size, timeout=2) as s:
            primary = requests(s.pool)
            for _ in range(3):
                assert len(await s.route("send a message")) > 0 and (await s.info()).n_tools == 5
            assert requests(s.pool) >= primary + 6
            assert [requests(c.pool) for c in s._replicas.connectors] == [0, 0]
            assert all(c.pool.connect_errors() > 0 for c in s._replicas.connectors)

    asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if " left out " in r.getMessage()]
    assert {m.split(" left out ")[0] for m in said} == set(names), said
    assert not any("s3cret" in r.getMessage() for r in caplog.records)


def answered_on_replica(route: Any, primary: Any, replica: Any) -> None:
    """Routes (``route()``, sync) until one is answered on the replica (its pool asked, the primary's not)."""
    deadline = time.monotonic() + 60
    while True:
        asked = requests(primary), requests(replica)
        assert len(route()) > 0
        if requests(primary) == asked[0] and requests(replica) > asked[1]:
            return
        assert time.monotonic() < deadline, "the replica was never read from again"
        time.sleep(0.1)


async def answered_on_replica_async(route: Any, primary: Any, replica: Any) -> None:
    """:func:`answered_on_replica` with ``await route()``."""
    deadline = time.monotonic() + 60
    while True:
        asked = requests(primary), requests(replica)
        assert len(await route()) > 0
        if requests(primary) == asked[0] and requests(replica) > asked[1]:
            return
        assert time.monotonic() < deadline, "the replica was never read from again"
        await asyncio.sleep(0.1)


def test_a_replica_down_at_open_or_later_is_left_out_without_a_wait_and_read_from_once_it_is_up(
    standby: tuple[Any, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real streaming replica, stopped when the store opens: reads go to the primary, none waiting for the
    replica's pool, and once the replica is up its pool (asked to try again, in the background) connects and reads go
    to it. Stopped again: the read that finds its connection lost goes on to the primary at once (it waited the whole
    ``timeout`` for a fresh connection the pool could not make, a wait that ended without one), and so do the next;
    started again, it is read from again. Both stores."""
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 0.0)  # every read looks at the replica again
    server, dsn, template = standby
    replica, query = template.format(db="postgres"), generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="back") as store:
        load(store, replica, 10, seed=5)
    stop_standby(server, template)
    try:
        with ToolStore(dsn, embedder=None, catalog="back", read_dsn=replica, timeout=2) as store:
            pool = store._replicas.connectors[0].pool
            assert len(store.route(query)) > 0 and store.info().n_tools == 10
            assert requests(pool) == 0  # on the primary, no read waiting for the replica
            start_standby(server, template)
            answered_on_replica(lambda: store.route(query), store.pool, pool)
            stop_standby(server, template)
            for _ in range(3):
                assert len(store.route(query)) > 0
            assert requests_errors(pool) == 0  # no wait for its connection that ended without one
            start_standby(server, template)
            answered_on_replica(lambda: store.route(query), store.pool, pool)
        stop_standby(server, template)

        async def main() -> None:
            async with AsyncToolStore(dsn, embedder=None, catalog="back", read_dsn=replica, timeout=2) as store:
                pool = store._replicas.connectors[0].pool
                assert len(await store.route(query)) > 0 and (await store.info()).n_tools == 10
                assert requests(pool) == 0
                await asyncio.to_thread(start_standby, server, template)
                await answered_on_replica_async(lambda: store.route(query), store.pool, pool)
                await asyncio.to_thread(stop_standby, server, template)
                for _ in range(3):
                    assert len(await store.route(query)) > 0
                assert requests_errors(pool) == 0
                await asyncio.to_thread(start_standby, server, template)
                await answered_on_replica_async(lambda: store.route(query), store.pool, pool)

        asyncio.run(main())
    finally:  # the replica the module's other tests share runs again
        with contextlib.suppress(Exception):
            start_standby(server, template)  # (already running: pg_ctl says so and fails)


def test_a_replica_whose_client_encoding_is_sql_ascii_is_refused_saying_to_set_utf8(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each replica connection's set-up checks its encoding as the primary's does (``_setup.session``): a replica DSN
    with client_encoding SQL_ASCII (text would arrive as bytes) is refused there, with the DatabaseError saying to set
    UTF8, when a read first goes to it, not at open (a store opens without waiting for its replicas); that refusal
    hands the read on to the primary, as any failure of a replica does, and the replica is left out: a warning names it
    and the error (it was said only in the debug log, so a misconfigured replica was never used without a word).
    Both stores. The replica is the primary itself, reached with that client_encoding (the primary's own check cannot
    refuse it)."""
    replica = make_conninfo(dsn, client_encoding="SQL_ASCII")
    utf8 = "client_encoding is SQL_ASCII.*set it to UTF8"
    caplog.set_level(logging.DEBUG, logger="toolstore")
    with ToolStore(dsn, embedder=None, catalog="ascii", read_dsn=[replica], timeout=1) as store:
        store.upsert(generated_tools(5))
        assert len(store.route("send a message")) > 0  # on the primary
        with pytest.raises(DatabaseError, match=utf8):
            store._replicas.connectors[0].run(lambda conn: conn.execute("select 1").fetchall())

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="ascii", read_dsn=[replica], timeout=1) as store:
            assert len(await store.route("send a message")) > 0

    asyncio.run(main())
    given = conninfo_to_dict(replica)
    name = " ".join(f"{key}={given[key]}" for key in ("host", "port", "dbname") if key in given)
    left_out = [r for r in caplog.records if r.getMessage().startswith(f"read replica 1 ({name}) left out ")]
    assert len(left_out) == 2, [r.getMessage() for r in caplog.records]  # once per store: then it is left out
    assert all(r.levelno == logging.WARNING and re.search(utf8, r.getMessage()) for r in left_out)


def load(store: ToolStore, replica: str, n_tools: int, *, seed: int) -> None:
    """``n_tools`` generated tools written to the store's catalog, and replayed by ``replica``."""
    store.upsert(generated_tools(n_tools, seed=seed))
    wait_for(replica, store.catalog, n_tools)


@contextmanager
def route_held(store: ToolStore, query: str) -> Iterator[threading.Event]:
    """A route of ``query`` in a thread that keeps its connection (a reranker that waits) until the event yielded is
    set, or the block ends."""
    holding, release = threading.Event(), threading.Event()

    def hold(_query: str, candidates: list[Any]) -> list[float]:
        holding.set()
        release.wait()
        return [0.0] * len(candidates)

    held = threading.Thread(target=store.route, args=(query,), kwargs={"reranker": hold})
    held.start()
    try:
        assert holding.wait(60)
        yield release
    finally:
        release.set()
        held.join()


def test_a_replica_whose_pool_is_busy_is_not_left_out_of_reads(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More concurrent routes than pool_size, and no other replica: the one that waited in vain for the replica's pool
    is routed on the primary, and the replica, which answers, stays in the reads (only one that cannot be reached is
    left out)."""
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 3600.0)  # a replica left out stays out for the test
    dsn, replica = replicated
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="busy", read_dsn=replica, pool_size=1, timeout=1) as store:
        load(store, replica, 20, seed=8)
        expected = store.route(query).ids
        replica_pool = store._replicas.connectors[0].pool
        with route_held(store, query):  # keeps the replica's one connection
            primary = requests(store.pool)
            assert store.route(query).ids == expected  # the replica's pool stays busy: routed on the primary
            assert requests(store.pool) > primary
        asked = replica_pool.get_stats()["requests_num"]
        assert store.route(query).ids == expected
        assert replica_pool.get_stats()["requests_num"] > asked  # the replica was asked again, not left out


def test_a_busy_replica_is_asked_after_a_free_one(replicated: tuple[str, str]) -> None:
    """Two replicas (two pools on the one standby), one connection each: while one pool's connection is held, every
    read goes to the other at once, even when its turn starts at the busy one, which is not asked (no wait for its
    connection) and stays in the reads; the primary is not asked. ToolStore and AsyncToolStore."""
    dsn, replica = replicated
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="twobusy", read_dsn=[replica, replica], pool_size=1, timeout=5) as store:
        load(store, replica, 20, seed=9)
        expected = store.route(query).ids
        with route_held(store, query):  # keeps its replica's one connection
            connectors = store._replicas.connectors
            (busy,) = [c for c in connectors if c.busy()]
            asked, primary = requests(busy.pool), requests(store.pool)
            for _ in range(2):  # one of the two turns starts at the busy replica
                assert store.route(query).ids == expected
            assert requests(busy.pool) == asked and requests(store.pool) == primary
        for _ in range(2):
            assert store.route(query).ids == expected
        assert requests(busy.pool) > asked  # asked again once free

    async def main() -> None:
        async with AsyncToolStore(
            dsn, embedder=None, catalog="twobusy", read_dsn=[replica, replica], pool_size=1, timeout=5
        ) as s:
            holding, release = asyncio.Event(), asyncio.Event()

            async def hold(_query: str, candidates: list[Any]) -> list[float]:
                holding.set()
                await release.wait()
                return [0.0] * len(candidates)

            held = asyncio.create_task(s.route(query, reranker=hold))
            await holding.wait()
            (busy,) = [c for c in s._replicas.connectors if c.busy()]
            asked, primary = requests(busy.pool), requests(s.pool)
            for _ in range(2):
                assert (await s.route(query)).ids == expected
            assert requests(busy.pool) == asked and requests(s.pool) == primary
            release.set()
            await held

    asyncio.run(main())


def test_a_read_waits_for_the_only_replica_rather_than_leave_it_for_the_primary(replicated: tuple[str, str]) -> None:
    """One replica whose one connection is in use for a moment: the next read waits for it (within ``timeout``), as a
    busy replica is only asked after the free ones, and the primary, which replicas are there to spare, is not asked."""
    dsn, replica = replicated
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="onebusy", read_dsn=replica, pool_size=1, timeout=30) as store:
        load(store, replica, 20, seed=10)
        expected = store.route(query).ids
        with route_held(store, query) as release:
            replica_pool, primary = store._replicas.connectors[0].pool, requests(store.pool)
            threading.Timer(0.5, release.set).start()  # the connection comes back while the next read waits for it
            assert store.route(query).ids == expected
        assert requests(store.pool) == primary and requests(replica_pool) >= 3


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
        load(store, replica, 20, seed=9)
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


FRESH = Tool(id="fresh.ping", name="ping_fresh", description="ping the fresh service", provider="freshco")


def test_reads_of_a_tool_the_replica_lacks_hand_over_to_the_primary(replicated: tuple[str, str]) -> None:
    """resolve(), get() and tools(ids) of a tool only the primary has yet read it there (a tool the primary lacks too
    is still unknown); ToolStore and AsyncToolStore alike."""
    dsn, replica = replicated
    tools = generated_tools(20, seed=10)
    with ToolStore(dsn, embedder=None, catalog="lacks", read_dsn=replica, timeout=3) as store:
        store.upsert(tools)
        wait_for(replica, "lacks", 20)
        with replay_paused(replica):
            store.upsert([FRESH])  # only the primary has it
            assert store.resolve("ping_fresh").id == "fresh.ping"
            assert store.resolve("ping_fresh", among=["fresh.ping", tools[0].id]).id == "fresh.ping"
            assert store.get("fresh.ping").provider == "freshco"
            assert [t.id for t in store.tools(["fresh.ping", tools[0].id])] == sorted(["fresh.ping", tools[0].id])
            assert [t.id for t in store.tools(["fresh.ping", "nowhere"])] == ["fresh.ping"]  # the primary's answer
            with pytest.raises(UnknownToolError):
                store.get("nowhere")
            with pytest.raises(UnknownToolError):
                store.resolve("nowhere_at_all")

            async def main() -> None:
                async with AsyncToolStore(dsn, embedder=None, catalog="lacks", read_dsn=replica, timeout=3) as astore:
                    assert (await astore.resolve("ping_fresh")).id == "fresh.ping"
                    assert (await astore.get("fresh.ping")).provider == "freshco"
                    found = await astore.tools(["fresh.ping", tools[0].id])
                    assert [t.id for t in found] == sorted(["fresh.ping", tools[0].id])
                    assert [t.id for t in await astore.tools(["fresh.ping", "nowhere"])] == ["fresh.ping"]
                    with pytest.raises(UnknownToolError):
                        await astore.get("nowhere")

            asyncio.run(main())


def test_calls_in_messages_to_a_tool_the_replica_lacks_resolve_on_the_primary(replicated: tuple[str, str]) -> None:
    """A route whose messages call a tool the replica has not replayed (and resolve_calls() of its name) resolved the
    call on the replica: unresolved there (``result.unresolved``, None), though the primary has the tool. Such a read
    is handed on to the primary as the other lagging ones are; a name the primary lacks too stays unresolved there;
    ToolStore and AsyncToolStore alike."""
    dsn, replica = replicated
    call = {"id": "c1", "type": "function", "function": {"name": "ping_fresh", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "ping the fresh service"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "send a message to the team"},
    ]
    recent: dict[str, Any] = {"k": 3, "weights": {"recent": 1.0}}  # only the calls' signal ranks tools
    with ToolStore(dsn, embedder=None, catalog="calls", read_dsn=replica, timeout=3) as store:
        load(store, replica, 20, seed=14)
        assert store.route(messages=messages, **recent).unresolved == ["ping_fresh"]  # neither has it yet
        with replay_paused(replica):
            store.upsert([FRESH])  # only the primary has it
            asked = requests(store.pool)
            result = store.route(messages=messages, **recent)
            assert result.unresolved == [] and result.ids[0] == "fresh.ping"
            assert requests(store.pool) > asked
            assert store.resolve_calls(["ping_fresh", "freshco__ping_fresh", "nowhere_at_all"]) == [
                "fresh.ping",
                "fresh.ping",
                None,
            ]

            async def main() -> None:
                async with AsyncToolStore(dsn, embedder=None, catalog="calls", read_dsn=replica, timeout=3) as astore:
                    result = await astore.route(messages=messages, **recent)
                    assert result.unresolved == [] and result.ids[0] == "fresh.ping"
                    assert await astore.resolve_calls(["ping_fresh", "nowhere_at_all"]) == ["fresh.ping", None]

            asyncio.run(main())


def test_an_ambiguous_call_is_answered_by_the_replica(replicated: tuple[str, str]) -> None:
    """A call name two tools answer to ("search": github's and jira's) is ambiguous on the primary too: the replica
    answers it (unresolved) and the primary is not asked; only a name no tool answers to is handed on."""
    dsn, replica = replicated
    twins = [Tool(id=f"{p}.search", name="search", description=f"search {p}", provider=p) for p in ("github", "jira")]
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "find the bug report"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "send a message to the team"},
    ]
    with ToolStore(dsn, embedder=None, catalog="twins", read_dsn=replica, timeout=3) as store:
        store.upsert([*generated_tools(20, seed=15), *twins])
        wait_for(replica, "twins", 22)
        store.route("warm the catalog cache")
        asked = requests(store.pool)
        assert store.route(messages=messages).unresolved == ["search"]
        assert store.resolve_calls(["search", "github__search"]) == [None, "github.search"]
        assert requests(store.pool) == asked


def replayed_all(primary: str, replica: str) -> None:
    """Until the replica has replayed all the primary wrote (one more WAL record is written first: the position
    waited for is then a record's end)."""
    with psycopg.connect(primary, autocommit=True) as conn:
        row = conn.execute("select pg_logical_emit_message(false, 'toolstore-test', '') - '0/0'::pg_lsn").fetchone()
    deadline = time.monotonic() + 60
    with psycopg.connect(replica, autocommit=True) as conn:
        while conn.execute("select pg_last_wal_replay_lsn() - '0/0'::pg_lsn").fetchone() < row:  # type: ignore[operator]
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)


def test_a_replica_that_has_replayed_all_answers_a_call_no_tool_answers_to(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation holding a call of a tool since removed was routed on the primary every time (a replica cannot
    tell a tool it lacks from one it has not replayed). A replica that has replayed all it received and the store's
    last write of tools answers it (unresolved) itself, in four statements; one that has not hands it on after
    `replayed`, to the primary, which resolves a call of a tool just written; ToolStore and AsyncToolStore alike."""
    from toolstore._mcp_sync import McpListing, sync_listing

    dsn, replica = replicated
    retired, fresh = calling("retired_tool"), calling("ping_fresh")
    asked = blocks_asked(monkeypatch, replica)
    on_replica = [(block, "replica") for block in ("call_candidates", "replayed", "tool_names", "route")]
    handed_on = [("call_candidates", "replica"), ("replayed", "replica"), ("call_candidates", "primary")]
    with ToolStore(dsn, embedder=None, catalog="retired", read_dsn=replica, timeout=3) as store:
        store.upsert([*generated_tools(20, seed=16), Tool(id="old.retired_tool", name="retired_tool")])
        store.remove("old.retired_tool")
        replayed_all(dsn, replica)
        store.route("warm the catalog cache")
        asked.clear()
        assert store.route(messages=retired).unresolved == ["retired_tool"]
        assert asked == on_replica  # answered by the replica
        asked.clear()
        assert store.resolve_calls(["retired_tool", "nowhere_at_all"]) == [None, None]
        assert asked == on_replica[:3]
        with replay_paused(replica):
            store.upsert([Tool(id="new.ping", name="ping_new")])  # a write of tools the replica has not replayed
            asked.clear()
            assert store.route(messages=retired).unresolved == ["retired_tool"]
            assert asked == [*handed_on, ("tool_names", "primary"), ("route", "primary")]  # it may lack the tool
            written = store._written.lsn
            sync_listing(store, McpListing("synced", [{"name": "ping_synced", "inputSchema": {"type": "object"}}]))
            assert store._written.lsn > written  # an MCP sync is a write of tools too

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="retired", read_dsn=replica, timeout=3) as store:
            replayed_all(dsn, replica)
            asked.clear()
            assert (await store.route(messages=retired)).unresolved == ["retired_tool"]
            assert asked == on_replica
            with replay_paused(replica):
                await store.upsert([FRESH])  # it notes where the primary's WAL is, for its routes
                asked.clear()
                assert (await store.route(messages=fresh)).unresolved == []  # resolved on the primary
                assert asked == [*handed_on, ("route", "primary")]

    asyncio.run(main())


def test_both_stores_read_anchors_on_the_replica(replicated: tuple[str, str]) -> None:
    """anchors() is a read, asked of the replica by ToolStore and AsyncToolStore alike (AsyncToolStore's went to the
    primary, through the ToolStore it writes with)."""
    dsn, replica = replicated
    tools = generated_tools(5, seed=17)
    with ToolStore(dsn, embedder=None, catalog="anchored", read_dsn=replica, timeout=3) as store:
        load(store, replica, 5, seed=17)
        rules = store.add_anchors([Anchor(r"\mping\M", tools[0].id, 0.5)])
        replayed_all(dsn, replica)
        replica_pool, primary = store._replicas.connectors[0].pool, requests(store.pool)
        asked = requests(replica_pool)
        assert store.anchors() == rules
        assert requests(replica_pool) > asked and requests(store.pool) == primary

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="anchored", read_dsn=replica, timeout=3) as astore:
            replica_pool, primary = astore._replicas.connectors[0].pool, requests(astore.pool)
            asked = requests(replica_pool)
            assert await astore.anchors() == rules
            assert requests(replica_pool) > asked and requests(astore.pool) == primary

    asyncio.run(main())


def test_a_prune_applies_the_retention_the_primary_has(replicated: tuple[str, str]) -> None:
    """prune_sessions() trims by the catalog's retention as the primary, where it deletes, has it: ToolStore read it
    on a replica, which right after set_session_retention() may still have the previous one; AsyncToolStore alike."""
    dsn, replica = replicated
    ids = [t.id for t in generated_tools(5, seed=18)]
    with ToolStore(dsn, embedder=None, catalog="retention", read_dsn=replica, timeout=3) as store:
        load(store, replica, 5, seed=18)
        assert store.record_calls("s", ids * 2) == 10
        replayed_all(dsn, replica)
        with replay_paused(replica):
            store.set_session_retention(max_calls=3)
            assert store.prune_sessions()["calls"] == 7

            async def main() -> None:
                async with AsyncToolStore(dsn, embedder=None, catalog="retention", read_dsn=replica) as astore:
                    await astore.set_session_retention(max_calls=1)
                    assert (await astore.prune_sessions())["calls"] == 2

            asyncio.run(main())
        assert len(store.session_log("s")) == 1


@contextmanager
def receiver_stopped(replica: str) -> Iterator[None]:
    """The replica's WAL receiver is stopped inside the block (its primary_conninfo emptied and reloaded: a replica cut
    off from its primary, which replays all it received and stops there); streaming again after it."""
    from psycopg import sql

    with psycopg.connect(replica, autocommit=True) as conn:
        row = conn.execute("show primary_conninfo").fetchone()
        assert row is not None
        conn.execute("alter system set primary_conninfo = ''")
        conn.execute("select pg_reload_conf()")
        while conn.execute("select count(*) from pg_stat_wal_receiver").fetchone() != (0,):
            time.sleep(0.05)
        try:
            yield
        finally:
            conn.execute(sql.SQL("alter system set primary_conninfo = {}").format(sql.Literal(row[0])))
            conn.execute("select pg_reload_conf()")
            deadline = time.monotonic() + 60
            while conn.execute("select status from pg_stat_wal_receiver").fetchone() != ("streaming",):
                assert time.monotonic() < deadline, "the replica never streamed again"
                time.sleep(0.05)


def blocks_asked(monkeypatch: pytest.MonkeyPatch, replica: str) -> list[tuple[str, str]]:
    """The route steps' statements both stores run from now on, in order: (block, "replica" or "primary")."""
    from psycopg.conninfo import conninfo_to_dict

    from toolstore import _steps

    on_replica = conninfo_to_dict(replica)["host"]
    asked: list[tuple[str, str]] = []

    def where(conn: Any) -> str:
        return "replica" if conn.info.host == on_replica else "primary"

    def fetch(conn: Any, step: Any, *timeout: int) -> Any:
        asked.append((step.block, where(conn)))
        return fetch_rows(conn, step, *timeout)

    async def afetch(conn: Any, step: Any, *timeout: int) -> Any:
        asked.append((step.block, where(conn)))
        return await afetch_rows(conn, step, *timeout)

    fetch_rows, afetch_rows = _steps.fetch_rows, _steps.afetch_rows
    monkeypatch.setattr(_steps, "fetch_rows", fetch)  # what answers a route step: _steps.answer_sync / answer_async
    monkeypatch.setattr(_steps, "afetch_rows", afetch)
    return asked


def test_a_replica_cut_off_from_the_primary_hands_on_a_call_no_tool_answers_to(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica whose WAL receiver had stopped (the primary unreachable from it) had replayed all it received, so it
    answered a call no tool answers to itself however long the outage: a tool another process wrote since (a `toolstore
    sync` beside `serve`: this store's own write position is 0) was reported unresolved. A replica answers such a call
    only while it streams; cut off, it hands the call on after `replayed`, and the primary resolves it; ToolStore and
    AsyncToolStore alike."""
    dsn, replica = replicated
    late = calling("ping_late")
    asked = blocks_asked(monkeypatch, replica)
    with ToolStore(dsn, embedder=None, catalog="cutoff", read_dsn=replica, timeout=3) as store:
        with ToolStore(dsn, embedder=None, catalog="cutoff") as other:  # another process's writes
            other.upsert(generated_tools(20, seed=19))
        replayed_all(dsn, replica)
        store.route("warm the catalog cache")
        asked.clear()
        assert store.route(messages=late).unresolved == ["ping_late"]  # streaming: answered there
        assert asked == [(block, "replica") for block in ("call_candidates", "replayed", "tool_names", "route")]
        with receiver_stopped(replica):
            with ToolStore(dsn, embedder=None, catalog="cutoff") as other:
                other.upsert([Tool(id="late.ping", name="ping_late")])  # only the primary has it
            asked.clear()
            assert store.route(messages=late).unresolved == []  # resolved on the primary
            assert asked == [
                ("call_candidates", "replica"),
                ("replayed", "replica"),  # not streaming: handed on
                ("call_candidates", "primary"),
                ("route", "primary"),
            ]
            assert store.resolve_calls(["ping_late", "nowhere_at_all"]) == ["late.ping", None]

            async def main() -> None:
                async with AsyncToolStore(dsn, embedder=None, catalog="cutoff", read_dsn=replica, timeout=3) as astore:
                    asked.clear()
                    assert (await astore.route(messages=late)).unresolved == []
                    assert ("replayed", "replica") in asked and ("route", "primary") in asked

            asyncio.run(main())


def test_a_granted_role_reads_its_catalog_on_the_replica(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grants and the privileges they set are the primary's, replayed as any write: a role granted one catalog routes it
    on the replica, and another catalog is unknown to it there and on the primary alike. A call no tool answers to is
    answered there only by a role that sees the WAL receiver's state (pg_read_all_stats): another one's is handed on."""
    from psycopg import sql

    from toolstore import UnknownCatalogError

    dsn, replica = replicated
    role = "ts_replica_reader"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
    with ToolStore(dsn, embedder=None, catalog="granted", read_dsn=replica) as owner:
        owner.upsert(generated_tools(20, seed=17))
        owner.grant(role)
    with ToolStore(dsn, embedder=None, catalog="hidden") as other:
        other.upsert(generated_tools(5, seed=18))
    replayed_all(dsn, replica)
    as_role = {"dsn": make_conninfo(dsn, user=role), "read_dsn": make_conninfo(replica, user=role)}
    asked = blocks_asked(monkeypatch, replica)
    with ToolStore(**as_role, embedder=None, catalog="granted", create=False, migrate=False, timeout=3) as store:
        store._replicas.connectors[0].pool.wait(60)  # connected (a read waits 1 s for it, then asks the primary)
        store.route("warm the catalog cache")
        assert store.info().n_tools == 20
        assert set(asked) == {("route", "replica")}
        asked.clear()
        assert store.route(messages=calling("retired_tool")).unresolved == ["retired_tool"]
        assert asked[1:3] == [("replayed", "replica"), ("call_candidates", "primary")]  # its state hidden: handed on
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("grant pg_read_all_stats to {}").format(sql.Identifier(role)))
        answered_there = False
        for _ in range(20):  # a record the replica received and has not replayed yet hands a route on, at any time
            replayed_all(dsn, replica)
            asked.clear()
            assert store.route(messages=calling("retired_tool")).unresolved == ["retired_tool"]
            assert ("replayed", "replica") in asked  # asked there, by a role that now sees the WAL receiver's state
            if answered_there := {where for _, where in asked} == {"replica"}:
                break
        assert answered_there, asked
    with ToolStore(**as_role, embedder=None, catalog="hidden", create=False, migrate=False, timeout=3) as store:
        with pytest.raises(UnknownCatalogError):
            store.route("send a message")


def calling(name: str) -> list[dict[str, Any]]:
    """A conversation whose assistant turn called ``name``, then a new request."""
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        {"role": "user", "content": "run the tool"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "send a message to the team"},
    ]


def test_resolving_reads_the_whole_name_list_only_for_a_name_no_candidate_answers() -> None:
    """``resolve_steps``: the index's candidates (``call_candidates``) answer an ambiguous name (None) without the
    catalog's whole name list (``tool_names``), which only a name that no candidate answers to fetches; on a replica
    that has not replayed all it received (and the store's last write) such a name is an UnknownToolError at once,
    before any whole list is read; one that has answers as the primary does."""
    from toolstore._drive import drive
    from toolstore._formats.names import model_names
    from toolstore._models import CatalogInfo
    from toolstore._names import may_be_hashed
    from toolstore._steps import Fetch, resolve_steps

    info = CatalogInfo(id=1, name="c", embed_model=None, embed_dim=None, settings={})
    rows = [{"id": f"{p}.search", "name": "search", "provider": p} for p in ("github", "jira")]
    fetched: list[str] = []

    def answer(step: Fetch) -> list[dict[str, Any]]:
        fetched.append(step.block)
        return rows

    assert drive(resolve_steps(info, ["search", "jira__search"]), answer) == [None, "jira.search"]
    assert fetched == ["call_candidates"]
    fetched.clear()
    assert drive(resolve_steps(info, ["search", "nothing_like_it"]), answer) == [None, None]
    assert fetched == ["call_candidates", "tool_names"]
    fetched.clear()
    with pytest.raises(UnknownToolError, match="nothing_like_it"):  # a replica that has not replayed all: hands on
        drive(resolve_steps(info, ["search", "nothing_like_it"], replica=7), replaying(answer, False))
    assert fetched == ["call_candidates", "replayed"]
    fetched.clear()  # one that has answers as the primary does, from the whole list
    assert drive(resolve_steps(info, ["search", "nothing_like_it"], replica=7), replaying(answer, True)) == [None, None]
    assert fetched == ["call_candidates", "replayed", "tool_names"]
    # A name over 64 characters is offered cut, with a hash, which the index cannot find: a replica that has the tool
    # resolves it from the whole list (only what that list cannot answer either is handed on).
    long = Tool(id="acme." + "very_long_operation_name_" * 3, name="very_long_operation_name_" * 3, provider="acme")
    (hashed,) = model_names([long])
    assert len(hashed) == 64 and may_be_hashed(hashed)
    fetched.clear()

    def index_misses(step: Fetch) -> list[dict[str, Any]]:
        fetched.append(step.block)
        return [] if step.block == "call_candidates" else [{"id": long.id, "name": long.name, "provider": "acme"}]

    assert drive(resolve_steps(info, [hashed], replica=7), index_misses) == [long.id]
    assert fetched == ["call_candidates", "tool_names"]
    other = hashed[:-8] + "00000000"  # the form of a tool the replica lacks: the whole list does not answer it either
    with pytest.raises(UnknownToolError, match=other):
        drive(resolve_steps(info, [other], replica=7), replaying(index_misses, False))
    assert drive(resolve_steps(info, [other], replica=7), replaying(index_misses, True)) == [None]


def replaying(answer: Any, replayed: bool) -> Any:
    """``answer`` to a resolve's fetches, and ``replayed`` to the replica's ``replayed`` block (asked for the store's
    write position)."""

    def answered(step: Any) -> Any:
        if step.block != "replayed":
            return answer(step)
        assert step.params == {"written": 7}
        answer(step)  # counted, its rows dropped
        return [{"replayed": replayed}]

    return answered


def test_finding_and_resolving_calls_takes_each_candidates_name_forms_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_names.unanswered`` runs on every resolve (an import of sessions resolves thousands of ids at once): it takes
    each candidate's name forms once per namespace, never once per name and candidate (which made a 2,000-session
    import in tests/test_plans.py run for minutes)."""
    from toolstore import _names

    tools = [Tool(id=f"p{i % 3}.tool_{i}", name=f"tool_{i}", provider=f"p{i % 3}") for i in range(200)]
    calls = 0
    forms = _names.name_forms

    def counted(tool: Tool) -> Any:
        nonlocal calls
        calls += 1
        return forms(tool)

    monkeypatch.setattr(_names, "name_forms", counted)
    names = [t.id for t in tools] + ["tool_7", "nothing_like_it"]
    assert _names.unanswered(names, tools) == ["nothing_like_it"]
    assert calls <= len(tools)
    calls = 0
    spaces = ["p0", "p1"] * (len(names) // 2)
    assert _names.unanswered(names, tools, spaces) == [f"{s}__{n}" for n, s in zip(names, spaces) if n[:2] != s]
    assert calls <= len(tools)  # each namespace's members once: the three namespaces' members are disjoint
    calls = 0
    assert _names.resolve_calls(names, tools)[-2:] == ["p1.tool_7", None]  # resolving: one index too
    assert calls <= len(tools)


def requests(pool: Any) -> int:
    return int(pool.get_stats().get("requests_num", 0))


def test_async_store_reads_from_the_replica_and_hands_lagging_reads_to_the_primary(
    replicated: tuple[str, str],
) -> None:
    """AsyncToolStore(read_dsn=...): reads on the replica (the primary's pool is not asked), a catalog or a filter
    value the replica has not replayed read on the primary, writes on the primary; the same answers as ToolStore."""
    dsn, replica = replicated
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="areads", read_dsn=replica, timeout=3) as sync:
        load(sync, replica, 20, seed=11)
        expected = sync.route(query).ids

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="areads", read_dsn=[replica], timeout=3) as store:
            primary = requests(store.pool)
            assert (await store.route(query)).ids == expected
            assert (await store.info()).n_tools == 20 and len(await store.tools()) == 20
            assert any(c["name"] == "areads" for c in await store.catalogs())
            assert requests(store.pool) == primary  # every read went to the replica
            assert requests(store._replicas.connectors[0].pool) >= 4
            with replay_paused(replica):
                await store.upsert([FRESH])  # on the primary
                assert (await store.route("ping the fresh service", providers=["freshco"])).ids == ["fresh.ping"]
                with pytest.raises(UnmatchedFilterError, match="nowhere"):
                    await store.route("ping the fresh service", providers=["nowhere"])
                async with AsyncToolStore(dsn, embedder=None, catalog="alate", read_dsn=replica, timeout=3) as late:
                    await late.upsert(generated_tools(5, seed=12))  # a catalog only the primary has
                    assert (await late.info()).n_tools == 5 and len(await late.route(query)) > 0

    asyncio.run(main())


def test_async_store_leaves_out_a_replica_that_is_down_but_not_one_that_is_busy(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ToolStore: a replica that cannot be reached is left out (REPLICA_RETRY) without a read waiting for it; one
    whose async pool stays busy hands that read to the primary and is asked again by the next."""
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 3600.0)  # a replica left out stays out for the test
    dsn, replica = replicated
    down = "postgresql://postgres@/postgres?host=/nonexistent-replica-socket-dir"
    query = generated_queries(1, seed=3)[0]
    with ToolStore(dsn, embedder=None, catalog="abusy", read_dsn=replica, timeout=3) as sync:
        load(sync, replica, 20, seed=13)
        expected = sync.route(query).ids

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="abusy", read_dsn=down, timeout=1) as store:
            assert (await store.route(query)).ids == expected
            pool = store._replicas.connectors[0].pool
            assert (await store.route(query)).ids == expected and (await store.info()).n_tools == 20
            assert requests(pool) == 0  # its attempts to connect fail: left out, never waited for
        async with AsyncToolStore(dsn, embedder=None, catalog="abusy", read_dsn=replica, pool_size=1, timeout=1) as s:
            holding, release = asyncio.Event(), asyncio.Event()

            async def hold(_query: str, candidates: list[Any]) -> list[float]:  # keeps the replica's one connection
                holding.set()
                await release.wait()
                return [0.0] * len(candidates)

            held = asyncio.create_task(s.route(query, reranker=hold))
            await holding.wait()
            replica_pool = s._replicas.connectors[0].pool
            primary = requests(s.pool)
            assert (await s.route(query)).ids == expected  # the replica's pool stays busy: routed on the primary
            assert requests(s.pool) > primary
            release.set()
            await held
            asked = requests(replica_pool)
            assert (await s.route(query)).ids == expected
            assert requests(replica_pool) > asked  # asked again, not left out

    asyncio.run(main())


def test_the_replica_rotation_takes_turns_skips_the_unreachable_and_keeps_the_busy() -> None:
    """The sans-I/O rule both stores' replicas follow (``_replicas.Rotation``), on a clock the test sets."""
    from psycopg_pool import PoolTimeout

    from toolstore._lending import PoolBusy
    from toolstore._replicas import LAGGING, REPLICA_RETRY, Rotation

    now = [100.0]
    rotation = Rotation(3, clock=lambda: now[0])
    assert [list(rotation.order()) for _ in range(4)] == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]

    def failure(cause: BaseException) -> DatabaseError:
        error = DatabaseError("no connection")
        error.__cause__ = cause
        return error

    assert rotation.hands_over(1, failure(PoolBusy("busy")))  # busy: handed on, not left out
    assert rotation.hands_over(2, failure(PoolTimeout("no connection")))  # unreachable: left out
    assert all(rotation.hands_over(0, error("lagging")) for error in LAGGING)
    assert not rotation.hands_over(0, ValueError("a bug, not a lag"))
    assert [list(rotation.order()) for _ in range(3)] == [[1, 0], [0, 1], [0, 1]]
    now[0] += REPLICA_RETRY + 1
    assert list(rotation.order()) == [1, 2, 0]
    busy = {0}  # every connection of replica 0's pool in use: asked after the others while it is, never left out
    assert list(rotation.order(lambda replica: replica in busy)) == [2, 1, 0]
    busy.clear()
    assert list(rotation.order(lambda replica: replica in busy)) == [0, 1, 2]
    rotation.leave_out(2, "its pool's latest attempt to connect failed", failing=True)  # out of this read only
    assert list(rotation.order()) == [1, 2, 0]
    rotation.leave_out(2, "no database connection within 1 s")  # its pool gave none while it tried: for a while
    assert [list(rotation.order()) for _ in range(2)] == [[0, 1], [0, 1]]
    assert list(Rotation(0).order()) == []


def test_a_pool_that_holds_no_connection_fails_while_its_latest_attempt_to_make_one_failed() -> None:
    """What a replica's read looks at before it waits for the pool (``_lending.Setup.state``), no I/O: the pool's
    count of connections it could not make against the count when it last made one, what it holds, and the setup."""
    from toolstore._lending import Setup

    setup = Setup(threading.Event())
    assert setup.state(connect_errors=0, idle=0, lent=False) == "connecting"  # just opened: its first attempt
    assert setup.state(connect_errors=1, idle=0, lent=False) == "failing"  # refused
    assert setup.state(connect_errors=1, idle=1, lent=False) == "holds"  # one made meanwhile (by another attempt)
    setup.made(connect_errors=1)
    assert setup.state(connect_errors=1, idle=0, lent=False) == "connecting"  # made, its setup under way
    setup.end(DatabaseError("no pgvector here"), connect_errors=1)
    assert setup.state(connect_errors=1, idle=0, lent=False) == "failing"  # its setup failed: dropped
    setup.made(connect_errors=1)
    setup.end()
    assert setup.state(connect_errors=2, idle=0, lent=True) == "holds"  # one lent: a wait ends when it comes back
    assert setup.state(connect_errors=2, idle=0, lent=False) == "failing"


def test_replicas_are_named_by_place_host_port_and_dbname_never_the_password() -> None:
    """What warnings, pools and close() call each replica (they said only "read replica 2"): its DSN as a URL or
    key=value, as libpq parses it; what the DSN leaves out is not said, its password never."""
    from toolstore._replicas import replica_names

    dsns = [
        "postgresql://reader:s3cret@db1.example:5433/tools?sslmode=require",
        "host=db2 port=6432 dbname=tools user=reader password=s3cret",
        "postgresql:///tools?host=/var/run/postgresql",
        "hostaddr=10.0.0.7 dbname=app password=s3cret",
        "",
    ]
    assert replica_names(dsns) == [
        "read replica 1 (host=db1.example port=5433 dbname=tools)",
        "read replica 2 (host=db2 port=6432 dbname=tools)",
        "read replica 3 (host=/var/run/postgresql dbname=tools)",
        "read replica 4 (hostaddr=10.0.0.7 dbname=app)",
        "read replica 5 (libpq defaults)",
    ]
