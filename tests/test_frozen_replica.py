"""A read replica that froze after its connections were made (a stopped postgres, a network path that stops carrying
packets): its read gives up within the store's ``timeout`` and goes to the primary, the replica left out as one that
cannot be reached, the connection discarded; and closing the store does not wait for its pool's workers."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from toolstore import AsyncToolStore, ToolStore

from catalog_gen import generated_tools
from servers import migrated_dsn, private_server, streaming_replica

#: The stores' timeout, which bounds a read's wait for a replica's answer.
TIMEOUT = 2.0
#: A generous bound on a read that must not wait for ever (before: it never returned).
HANG = 60.0


class FreezingProxy:
    """A loopback TCP proxy to a server's Unix socket that stops carrying bytes, both ways, while frozen (connections
    stay open: the server is still there, it just never answers)."""

    def __init__(self, unix_path: str) -> None:
        self._path, self._flowing, self._held = unix_path, threading.Event(), list[socket.socket]()
        self._flowing.set()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client = self._listener.accept()[0]
            except OSError:  # closed
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self._path)
            self._held += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._listener.close()
        for held in self._held:
            held.close()
        self._flowing.set()


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[str, str]]:
    """A migrated primary's DSN and its streaming replica's Unix socket path."""
    with private_server() as server:
        dsn = migrated_dsn(server)
        with streaming_replica(server) as template:
            yield dsn, template.rsplit("host=", 1)[1] + "/.s.PGSQL.5432"


@contextmanager
def frozen_later(socket_path: str) -> Iterator[tuple[str, FreezingProxy]]:
    proxy = FreezingProxy(socket_path)
    try:
        yield f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres", proxy
    finally:
        proxy.close()


def requests(pool: Any) -> int:
    return int(pool.get_stats().get("requests_num", 0))


def returns_bad(pool: Any) -> int:
    """The connections given back to ``pool`` broken or closed, which it discarded."""
    return int(pool.get_stats().get("returns_bad", 0))


def replayed(primary: str, socket_path: str) -> None:
    """Until the replica has replayed all the primary wrote."""
    with psycopg.connect(primary, autocommit=True) as conn:
        row = conn.execute("select pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    replica = f"postgresql://postgres@/postgres?host={socket_path.rsplit('/', 1)[0]}"
    with psycopg.connect(replica, autocommit=True) as conn:
        while conn.execute("select pg_last_wal_replay_lsn() - '0/0'::pg_lsn").fetchone() < row:  # type: ignore[operator]
            time.sleep(0.05)


def answered(read: Callable[[], Any]) -> Any:
    """``read()`` in a thread, waited for at most :data:`HANG` seconds (a read that waits for ever fails the test)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(read()), daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "the read never returned: it waits for the frozen replica"
    assert out, "the read raised"
    return out[0]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_replica_that_froze_after_connecting_hands_the_read_to_the_primary(
    replicated: tuple[str, str], kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A route on a replica that had answered, then stopped answering (its connections open, nothing coming back),
    waited for ever: nothing bounded a statement's wait on the client side (libpq's tcp_user_timeout and keepalives
    do not end it: the replica's kernel acknowledges). It gives up there after ``timeout``, the primary answers, the
    replica is left out as one that cannot be reached (said once, naming it), and its connection is not used again."""
    dsn, socket_path = replicated
    tools = generated_tools(20, seed=31)
    with ToolStore(dsn, embedder=None, catalog="frozen") as writer:
        writer.upsert(tools)
    replayed(dsn, socket_path)
    caplog.set_level(logging.WARNING, logger="toolstore")

    with frozen_later(socket_path) as (read_dsn, proxy):
        if kind == "sync":
            with ToolStore(dsn, embedder=None, catalog="frozen", read_dsn=read_dsn, timeout=TIMEOUT) as store:
                replica_pool = store._replicas.connectors[0].pool
                asked = requests(store.pool), requests(replica_pool)
                assert len(store.route("send a message")) > 0
                assert (requests(store.pool), requests(replica_pool)) == (asked[0], asked[1] + 1)  # the replica's
                proxy.freeze()
                assert len(answered(lambda: store.route("send a message"))) > 0
                assert requests(store.pool) == asked[0] + 1  # the primary answered
                assert returns_bad(replica_pool) == 1  # the connection that got no answer was discarded
        else:

            async def main() -> None:
                async with AsyncToolStore(
                    dsn, embedder=None, catalog="frozen", read_dsn=read_dsn, timeout=TIMEOUT
                ) as store:
                    replica_pool = store._replicas.connectors[0].pool
                    asked = requests(store.pool), requests(replica_pool)
                    assert len(await store.route("send a message")) > 0
                    assert (requests(store.pool), requests(replica_pool)) == (asked[0], asked[1] + 1)
                    proxy.freeze()
                    assert len(await store.route("send a message")) > 0
                    assert requests(store.pool) == asked[0] + 1
                    assert returns_bad(replica_pool) == 1

            answered(lambda: asyncio.run(main()))
    left_out = [r.getMessage() for r in caplog.records if " left out " in r.getMessage()]
    assert len(left_out) == 1 and left_out[0].startswith(f"read replica 1 (host=127.0.0.1 port={proxy.port}"), left_out
    assert f"no answer within {TIMEOUT:g} s" in left_out[0], left_out


def test_a_replica_outage_is_one_warning_when_it_begins_and_one_when_it_ends(
    replicated: tuple[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica's outage was said by every read that left it out, once every REPLICA_RETRY seconds (each read here:
    0), and again by its pool's first failed attempt to connect ("cannot connect to the database ... calls meanwhile
    fail", untrue of reads that go to the primary): it is said once, by the first read that leaves it out, and its end
    once, when its pool connects again, as the primary's outage is."""
    monkeypatch.setattr("toolstore._replicas.REPLICA_RETRY", 0.0)  # every read asks the replica again
    dsn, socket_path = replicated
    with ToolStore(dsn, embedder=None, catalog="outage") as writer:
        writer.upsert(generated_tools(20, seed=32))
    replayed(dsn, socket_path)
    caplog.set_level(logging.WARNING, logger="toolstore")
    with (
        frozen_later(socket_path) as (read_dsn, proxy),
        ToolStore(dsn, embedder=None, catalog="outage", read_dsn=read_dsn, timeout=TIMEOUT) as store,
    ):
        replica_pool = store._replicas.connectors[0].pool
        assert len(store.route("send a message")) > 0
        proxy.freeze()
        failed = replica_pool.connect_errors()
        while replica_pool.connect_errors() < failed + 2:  # reads left it out; its pool's attempts failed
            assert len(answered(lambda: store.route("send a message"))) > 0
        proxy.thaw()
        deadline = time.monotonic() + HANG
        while True:  # until a read is answered by the replica again
            asked = requests(store.pool), requests(replica_pool)
            assert len(store.route("send a message")) > 0
            if (requests(store.pool), requests(replica_pool)) == (asked[0], asked[1] + 1):
                break
            assert time.monotonic() < deadline, "the replica was never read from again"
            time.sleep(0.1)
    warned = [r.getMessage() for r in caplog.records if r.name == "toolstore" and r.levelno >= logging.WARNING]
    name = f"read replica 1 (host=127.0.0.1 port={proxy.port} dbname=postgres)"
    assert len(warned) == 2, warned
    assert warned[0].startswith(f"{name} left out for 0 s ") and "no answer within" in warned[0], warned
    assert warned[1].startswith(f"{name}: connected again, "), warned
