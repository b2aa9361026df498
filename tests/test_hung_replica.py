"""A read replica that accepts connections but never answers (a process that accepts and sleeps, a stopped postgres):
a read waits for its pool's first connection at most ``CONNECT_WAIT``, once, then skips it as one that refuses."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from toolstore import AsyncToolStore, ToolStore
from toolstore._replicas import _LOOK

from catalog_gen import generated_tools

#: The stores' timeout: before, the first read waited this long for the replica (its pool's attempt to connect).
TIMEOUT = 10.0
#: The longest a read waits for a replica's pool to connect, as README says (``_replicas.CONNECT_WAIT``).
CONNECT_WAIT = 1.0


class VirtualClock:
    """``time`` for ``toolstore._replicas``: each look at the clock is a look at the pool, ``_LOOK`` seconds later
    (a sync read's sleep between looks returns at once), so a wait is measured in looks, not in the machine's time."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += _LOOK
        return self.now

    def sleep(self, seconds: float) -> None:
        pass


@contextmanager
def silent_server() -> Iterator[tuple[str, Callable[[], None]]]:
    """A DSN of a loopback server that accepts connections and never answers, and its hang-up: it closes them (a
    pool's attempt then fails at once, so the store closes without waiting for it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        with _StopAccepting():
            while True:
                held.append(listener.accept()[0])

    def hang_up() -> None:
        listener.close()
        for conn in held:
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"postgresql://toolstore@127.0.0.1:{listener.getsockname()[1]}/toolstore", hang_up
    finally:
        hang_up()


class _StopAccepting:
    """OSError ends the accept loop (the listener closed)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *rest: Any) -> bool:
        return kind is not None and issubclass(kind, OSError)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_replica_that_never_answers_costs_one_bounded_wait_then_is_skipped(
    dsn: str, kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first read after the store opened waited for the silent replica's pool to connect for the store's whole
    ``timeout`` (10 s here, 5 by default); it waits ``CONNECT_WAIT`` (1 s), then reads from the primary, and a read
    while that attempt is still unanswered does not wait again (the replica is not left out for this test, so the
    second read looks at it too)."""
    clock = VirtualClock()
    monkeypatch.setattr("toolstore._replicas.time", clock)
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 0.0)
    tools = generated_tools(5)
    with ToolStore(dsn, embedder=None, catalog="hung") as writer:
        writer.upsert(tools)
    expected = sorted(t.id for t in tools)
    waits: list[float] = []

    def sync(read_dsn: str, hang_up: Callable[[], None]) -> None:
        with ToolStore(dsn, embedder=None, catalog="hung", timeout=TIMEOUT, read_dsn=read_dsn) as store:
            for _ in range(2):
                before = clock.now
                assert sorted(t.id for t in store.tools()) == expected
                waits.append(clock.now - before)
            hang_up()

    async def asynchronous(read_dsn: str, hang_up: Callable[[], None]) -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="hung", timeout=TIMEOUT, read_dsn=read_dsn) as store:
            for _ in range(2):
                before = clock.now
                assert sorted(t.id for t in await store.tools()) == expected
                waits.append(clock.now - before)
            hang_up()

    with caplog.at_level(logging.WARNING, logger="toolstore"), silent_server() as (read_dsn, hang_up):
        if kind == "sync":
            sync(read_dsn, hang_up)
        else:
            asyncio.run(asynchronous(read_dsn, hang_up))
    first, second = waits
    assert first <= CONNECT_WAIT + 2 * _LOOK, waits  # before: TIMEOUT
    assert second <= 2 * _LOOK, waits  # no wait: before, TIMEOUT again
    left_out = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert left_out and f"no database connection within {CONNECT_WAIT:g} s" in left_out[0], left_out


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_closing_a_store_does_not_wait_for_its_replicas_pending_attempt_to_connect(
    dsn: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """close() waited for each worker of a replica's pool busy in an attempt to connect to a server that accepts and
    never answers, up to 5 s each (psycopg_pool's join), or until the attempt's connect timeout ended it (3 s here):
    the store closes at once, the worker left to end its attempt by itself (a connection it makes then is closed, as
    its pool is), and psycopg_pool's word that it could not stop that worker is said at DEBUG."""
    with ToolStore(dsn, embedder=None, catalog="hung") as writer:
        writer.upsert(generated_tools(5))
    caplog.set_level(logging.WARNING)
    with silent_server() as (read_dsn, _hang_up):
        if kind == "sync":
            store = ToolStore(dsn, embedder=None, catalog="hung", timeout=3, read_dsn=read_dsn)
            name = store._replicas.connectors[0].pool.name
            store.close()
            working = [t.name for t in threading.enumerate() if t.name.startswith(f"{name}-worker-")]
        else:

            async def main() -> list[str]:
                store = await AsyncToolStore(dsn, embedder=None, catalog="hung", timeout=3, read_dsn=read_dsn).open()
                name = store._replicas.connectors[0].pool.name
                await store.close()
                return [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(f"{name}-worker-")]

            working = asyncio.run(main())
        assert working, "close() waited for the attempt to connect to end"
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
