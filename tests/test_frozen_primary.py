"""A primary that stops answering after its connections were made (a frozen postgres, a network path that stops
carrying packets: a loopback proxy that stops forwarding here): a call ends within a bound with an error naming the
database, the broken connection discarded, one warning said for the outage (not psycopg_pool's too), and the next call
after the server answers again works; a COMMIT that got no answer is said to have an unknown outcome and is not run
again; a statement that runs long on a server that answers is never cut."""

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
from psycopg.conninfo import conninfo_to_dict

from toolstore import AsyncToolStore, DatabaseError, ToolStore
from toolstore._commits import FollowUp, follow_up

from catalog_gen import generated_tools

#: The stores' timeout, which bounds each wait for the primary's answer (and its question whether it still works).
TIMEOUT = 1.0
#: A generous bound on a call that must not wait for ever (before: it never returned).
HANG = 60.0


class FreezingProxy:
    """A loopback TCP proxy to a server that stops carrying bytes, both ways, while frozen (the connections stay open:
    the server is still there, it just never answers); ``freeze_on``: the first message from a client holding these
    bytes freezes the proxy before it is carried (a COMMIT, say), and ``lose``'s: that connection's alone."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        host, port = str(params.get("host") or "/tmp"), int(params.get("port") or 5432)
        self._upstream = (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/") else (None, (host, port))
        self._flowing, self._held, self.freeze_on, self.lose = threading.Event(), list[socket.socket](), b"", b""
        self._flowing.set()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        params.update(host="127.0.0.1", port=str(self.port))
        self.dsn = " ".join(f"{key}={value}" for key, value in params.items())
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client = self._listener.accept()[0]
            except OSError:  # closed
                return
            family, address = self._upstream
            upstream = socket.socket(family) if family is not None else socket.socket()
            upstream.connect(address)
            self._held += [client, upstream]
            own = threading.Event()
            own.set()
            threading.Thread(target=self._pump, args=(client, upstream, own), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, own: threading.Event | None) -> None:
        """From ``source`` to ``sink``; ``own``: the client's connection's, whose messages may freeze it."""
        try:
            while data := source.recv(65536):
                if own is not None and self.freeze_on and self.freeze_on in data:
                    self.freeze_on = b""
                    self._flowing.clear()
                if own is not None and self.lose and self.lose in data:
                    self.lose = b""
                    own.clear()
                self._flowing.wait()
                own is None or own.wait()
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


@contextmanager
def proxied(dsn: str) -> Iterator[FreezingProxy]:
    proxy = FreezingProxy(dsn)
    try:
        yield proxy
    finally:
        proxy.close()


def returns_bad(pool: Any) -> int:
    """The connections given back to ``pool`` broken or closed, which it discarded."""
    return int(pool.get_stats().get("returns_bad", 0))


def ended(call: Callable[[], Any]) -> BaseException | None:
    """What ``call()`` raised (None: it returned), run in a thread and waited for at most :data:`HANG` seconds (a call
    that waits for ever fails the test)."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)
        else:
            out.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "the call never returned: it waits for the frozen primary"
    return out[0]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_read_on_a_primary_that_froze_ends_with_an_error_naming_it(
    dsn: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A route on a primary that had answered, then stopped answering, waited for ever (no client-side bound: the
    server's kernel acknowledges what is sent). It ends with a DatabaseError naming the database and the time waited,
    the connection discarded; the outage is said once, by toolstore, not by psycopg_pool's "discarding closed
    connection" too; once the server answers again, the next call works."""
    with ToolStore(dsn, embedder=None, catalog="frozen") as writer:
        writer.upsert(generated_tools(20, seed=41))
    caplog.set_level(logging.WARNING)
    errors: list[BaseException | None] = []
    with proxied(dsn) as proxy:
        if kind == "sync":
            with ToolStore(proxy.dsn, embedder=None, catalog="frozen", timeout=TIMEOUT) as store:
                assert len(store.route("send a message")) > 0
                proxy.freeze()
                errors.append(ended(lambda: store.route("send a message")))
                bad = returns_bad(store.pool)
                proxy.thaw()
                errors.append(ended(lambda: store.route("send a message")))
        else:

            async def main() -> None:
                async with AsyncToolStore(proxy.dsn, embedder=None, catalog="frozen", timeout=TIMEOUT) as store:
                    assert len(await store.route("send a message")) > 0
                    proxy.freeze()
                    try:
                        await store.route("send a message")
                    except DatabaseError as exc:
                        errors.append(exc)
                    errors.append(None if returns_bad(store.pool) == 1 else AssertionError(store.pool.get_stats()))
                    proxy.thaw()
                    assert len(await store.route("send a message")) > 0
                    errors.append(None)

            assert ended(lambda: asyncio.run(main())) is None
            bad = 1 if errors[1] is None else 0
            errors = [errors[0], errors[2]]
    first, after = errors
    assert isinstance(first, DatabaseError), first
    place = f"toolstore's database (host=127.0.0.1 port={proxy.port} "
    assert str(first).startswith(place) and f"no answer within {TIMEOUT:g} s" in str(first), first
    assert bad == 1  # the connection that got no answer was discarded
    assert after is None, after
    warned = warnings_of(caplog)
    assert not [message for name, message in warned if name.startswith("psycopg")], warned
    outage = [message for name, message in warned if "no answer within" in message]
    assert len(outage) == 1 and outage[0].startswith(place), warned


def test_a_commit_the_primary_never_answered_is_said_unknown_and_not_run_again(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A write whose COMMIT got no answer (sent, the server frozen): its outcome is unknown, which the error says, and
    it is not run again (a second try could write it twice, and would only wait again)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table public.written (n int)")
    tries: list[int] = []

    def write(conn: psycopg.Connection[Any]) -> None:
        tries.append(1)
        with conn.transaction():
            conn.execute("insert into public.written values (1)")
            proxy.freeze_on = b"COMMIT"

    caplog.set_level(logging.WARNING)
    with proxied(dsn) as proxy, ToolStore(proxy.dsn, embedder=None, catalog="frozen", timeout=TIMEOUT) as store:
        error = ended(lambda: store.db.run(write))
        proxy.thaw()
    assert isinstance(error, DatabaseError), error
    assert "COMMIT" in str(error) and "whether the write took effect is unknown" in str(error), error
    assert len(tries) == 1


def test_a_follow_up_the_primary_never_answered_says_the_write_committed(dsn: str) -> None:
    """What follows a committed write (its index build, ANALYZE) that got no answer: the error says the write
    committed and what was not done, and the write is not run again."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("create table public.written (n int)")
    tries: list[int] = []

    def write(conn: psycopg.Connection[Any]) -> None:
        tries.append(1)
        with conn.transaction():
            conn.execute("insert into public.written values (1)")
        proxy.freeze_on = b"follow_up_step"
        step = FollowUp(lambda c: c.execute("select 'follow_up_step'"), "building the indexes", "the next write does")
        follow_up(conn, step)

    with proxied(dsn) as proxy, ToolStore(proxy.dsn, embedder=None, catalog="frozen", timeout=TIMEOUT) as store:
        error = ended(lambda: store.db.run(write))
        proxy.thaw()
    assert isinstance(error, DatabaseError), error
    assert "the write had committed, but building the indexes was not done (the next write does)" in str(error), error
    assert len(tries) == 1
    with psycopg.connect(dsn) as conn:
        assert conn.execute("select count(*) from public.written").fetchone() == (1,)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_statement_that_runs_long_on_a_primary_that_answers_is_not_cut(dsn: str, kind: str) -> None:
    """A statement that runs past the timeout (an index build, a large import) on a server that answers is waited for:
    asked at each deadline, the server says the connection's backend still runs it."""
    seconds = 3 * TIMEOUT
    if kind == "sync":
        with ToolStore(dsn, embedder=None, catalog="slow", timeout=TIMEOUT) as store:
            assert ended(lambda: store.db.run(lambda conn: conn.execute("select pg_sleep(%s)", [seconds]))) is None
            with store.connection() as conn:
                assert conn.execute("select pg_sleep(%s), 1", [seconds]).fetchone() == ("", 1)
    else:

        async def main() -> None:
            async with (
                AsyncToolStore(dsn, embedder=None, catalog="slow", timeout=TIMEOUT) as store,
                store.connection() as conn,
            ):
                cursor = await conn.execute("select pg_sleep(%s), 1", [seconds])
                assert await cursor.fetchone() == ("", 1)

        assert ended(lambda: asyncio.run(main())) is None


def test_a_primary_whose_backend_waits_for_the_client_is_not_waited_for(dsn: str) -> None:
    """A statement lost on its way (the backend idle, waiting for its client, while the client waits for the answer):
    the server, asked, says so, and the wait ends at the first deadline."""
    with proxied(dsn) as proxy, ToolStore(proxy.dsn, embedder=None, catalog="lost", timeout=TIMEOUT) as store:

        def lost(conn: psycopg.Connection[Any]) -> None:
            proxy.lose = b"lost_on_the_way"
            conn.execute("select 'lost_on_the_way'")

        error = ended(lambda: store.db.run(lost))
    assert isinstance(error, DatabaseError) and "waits for the client" in str(error), error


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_wait_for_notifications_on_the_primary_is_not_cut(dsn: str, kind: str) -> None:
    """A caller's own connection that LISTENs and waits for a notification longer than the timeout (the backend idle,
    waiting for its client, as it should) is not given up: the wait is the caller's."""

    def notify_later() -> None:
        time.sleep(3 * TIMEOUT)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("notify toolstore_test, 'hello'")

    got: list[str] = []
    if kind == "sync":
        with ToolStore(dsn, embedder=None, catalog="listen", timeout=TIMEOUT) as store, store.connection() as conn:
            conn.execute("listen toolstore_test")
            threading.Thread(target=notify_later, daemon=True).start()
            got += [n.payload for n in conn.notifies(timeout=HANG, stop_after=1)]
    else:

        async def main() -> None:
            async with AsyncToolStore(dsn, embedder=None, catalog="listen", timeout=TIMEOUT) as store:
                async with store.connection() as conn:
                    await conn.execute("listen toolstore_test")
                    threading.Thread(target=notify_later, daemon=True).start()
                    got.extend([n.payload async for n in conn.notifies(timeout=HANG, stop_after=1)])

        asyncio.run(main())
    assert got == ["hello"]
