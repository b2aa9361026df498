"""What an outage of the database costs a user's log and the first call after it: one warning when the store's pools
cannot connect and one when they connect again, not psycopg_pool's warning for each attempt; and a pool no call
waits on keeps trying in the background, so it holds a connection again before the next call."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from toolstore import AsyncToolStore, DatabaseError, ToolStore
from toolstore._lending import AsyncCountedPool, CountedPool

from catalog_gen import generated_tools
from servers import migrated_dsn, private_server, start, stop

TIMEOUT = 2.0
#: Failed attempts to connect the test waits for: more than one reconnection window's (about 3).
ATTEMPTS = 4
#: Generous bound on a wait for what the pool does in the background (a background retry every 5 s).
DEADLINE = 60.0
#: How psycopg_pool's warnings of a failed attempt and a reconnection given up begin, formatted (3.2.0 formats the
#: first itself; later releases pass arguments).
ATTEMPT_WARNINGS = ("error connecting in ", "reconnection attempt in pool ")


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "toolstore" and r.levelno == level]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_outage_is_one_warning_when_it_begins_and_one_when_it_ends(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While calls waited through an outage, psycopg_pool warned of each failed attempt to connect (about 2 a second:
    44 warnings in 20 s); the log says it once, with the reason, and once when a pool connects again, with how long
    it could not; psycopg_pool's lines stay on its logger at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="psycopg.pool")
    caplog.set_level(logging.DEBUG, logger="toolstore")

    def sync(dsn: str, server: Any) -> None:
        with ToolStore(dsn, embedder=None, catalog="o", timeout=TIMEOUT) as store:
            store.info()
            stop(server)
            pool = store._db.pool
            while pool.connect_errors() < ATTEMPTS:
                with pytest.raises(DatabaseError):
                    store.info()
            start(server)
            store.info()

    async def asynchronous(dsn: str, server: Any) -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="o", timeout=TIMEOUT) as store:
            await store.info()
            await asyncio.to_thread(stop, server)
            pool = store.pool
            while pool.connect_errors() < ATTEMPTS:
                with pytest.raises(DatabaseError):
                    await store.info()
            await asyncio.to_thread(start, server)
            await store.info()

    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=None, catalog="o") as store:
            store.upsert(generated_tools(5))
        caplog.clear()
        if kind == "sync":
            sync(dsn, server)
        else:
            asyncio.run(asynchronous(dsn, server))

    attempts = [r for r in caplog.records if r.name == "psycopg.pool" and r.getMessage().startswith(ATTEMPT_WARNINGS)]
    assert len(attempts) >= ATTEMPTS and {r.levelno for r in attempts} == {logging.DEBUG}
    warned = said(caplog, logging.WARNING)
    assert len(warned) == 2, warned
    assert warned[0].startswith("toolstore's database (host=") and ": cannot connect to the database: " in warned[0]
    assert "connection to server" in warned[0]  # libpq's reason
    assert ": connected again, " in warned[1] and " s after the first attempt that failed (" in warned[1]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_pool_no_call_waits_on_reconnects_by_itself_once_the_server_is_back(kind: str) -> None:
    """A pool whose connection was lost in an outage gave up trying 2 s after its last call stopped waiting, and held no
    connection until the next call, which then waited for one to be made (34 ms against 6 on a local server). It tries
    again in the background at a low rate, so it holds a connection again before any call once the server is back."""

    def background(pool: CountedPool | AsyncCountedPool, server: Any) -> None:
        failed = pool.connect_errors()
        wait_for(lambda: pool.connect_errors() >= failed + ATTEMPTS, "the pool stopped trying to connect")
        start(server)
        wait_for(lambda: pool.get_stats().get("pool_available", 0) >= 1, "the pool did not reconnect by itself")

    def sync(dsn: str, server: Any) -> None:
        with ToolStore(dsn, embedder=None, catalog="o", timeout=TIMEOUT) as store:
            store.info()
            stop(server)
            with pytest.raises(DatabaseError):
                store.info()
            requests = store._db.pool.get_stats().get("requests_num", 0)
            background(store._db.pool, server)
            assert store._db.pool.get_stats().get("requests_num", 0) == requests  # no call asked meanwhile
            store.info()

    async def asynchronous(dsn: str, server: Any) -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="o", timeout=TIMEOUT) as store:
            await store.info()
            await asyncio.to_thread(stop, server)
            with pytest.raises(DatabaseError):
                await store.info()
            await asyncio.to_thread(background, store.pool, server)
            await store.info()

    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=None, catalog="o") as store:
            store.upsert(generated_tools(5))
        if kind == "sync":
            sync(dsn, server)
        else:
            asyncio.run(asynchronous(dsn, server))
