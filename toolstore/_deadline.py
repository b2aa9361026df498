"""A client-side bound on a connection's wait for a server that stopped answering after the connection was made (a
stopped or frozen postgres, a network path that stops carrying packets): once the deadline passes, the connection's
socket is shut down, which ends the wait at once (:class:`Unanswered`), and the broken connection is discarded by
its pool, never lent again. A read replica's pool (``_connect``'s ``answer_within``) bounds each wait for the server
this way (:func:`bounded_class`: each round trip psycopg's ``wait`` makes, a statement's, a pipeline's, the pool's
check), not a whole read: an embedder's or a reranker's time in a route is not the server's.

Measured on Linux loopback (stop 46: the embedded server restarted on TCP), a postmaster and the connection's backend
stopped with SIGSTOP, ``select 1`` waited on for 20 s: with libpq's ``tcp_user_timeout`` (2 s) or keepalives (1 s, 2
probes), and after ``cancel_safe(timeout=2)`` (the stopped postmaster never reads the cancel request:
CancellationTimeout, and the statement is still waited for), the wait went on; after a shutdown of the socket at 2 s
it ended at 2.0 s, "server closed the connection unexpectedly". The server's kernel acknowledges what is sent to a
stopped process, so no TCP timer ever fires; only the client's own clock can end the wait."""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg

C = TypeVar("C", bound=type)


class Unanswered(psycopg.errors.ConnectionTimeout):
    """A statement given up after its deadline (its connection's socket shut down): the server does not answer, which
    another try on a fresh connection would only wait for again (``_lending.unreachable``, not ``connection_lost``).
    psycopg's, as ``_lending.PoolBusy`` is psycopg_pool's: a connector's DatabaseError says it (its cause), the
    caller never sees it."""


class _Watch:
    """One bounded wait: the connection whose socket is shut down if the wait still lasts when its deadline comes."""

    def __init__(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
        self.conn, self.armed, self.fired = conn, True, False

    def fire(self) -> None:
        """Shut the connection's socket down (a duplicate of its descriptor: the connection keeps its own)."""
        if not self.armed:
            return
        self.armed, self.fired = False, True
        try:
            with socket.socket(fileno=os.dup(self.conn.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (OSError, psycopg.Error):  # closed meanwhile: nothing left to end
            pass


def _given_up(seconds: float) -> Unanswered:
    return Unanswered(f"no answer within {seconds:g} s (the server accepted the connection but stopped answering)")


class Watchdog:
    """Bounds sync waits (:meth:`bounded`): one daemon thread (the process's, :data:`WATCHDOG`; started at its first
    wait, again in a forked child) fires each deadline still armed when it comes."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order, self._cond = itertools.count(), threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
        """Inside the block, ``conn``'s socket is shut down once ``seconds`` have passed: what the block raises then is
        an :class:`Unanswered`; a block that got its answer as the deadline came closes ``conn`` (so its pool discards
        it: its socket is shut down) and returns as usual."""
        watch = _Watch(conn)
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="toolstore-read-deadlines", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), watch))
            self._cond.notify()
        try:
            yield
        except Exception as exc:
            if self._disarm(watch):
                raise _given_up(seconds) from exc
            raise
        except BaseException:
            self._disarm(watch)
            raise
        if self._disarm(watch):
            conn.close()

    def _disarm(self, watch: _Watch) -> bool:
        """Whether ``watch`` fired; it will not fire any more."""
        with self._cond:
            watch.armed = False
            return watch.fired

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and not self._heap[0][2].armed:  # ended in time: dropped
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due = self._heap[0][0] - time.monotonic()
                if due > 0:
                    self._cond.wait(due)
                    continue
                heapq.heappop(self._heap)[2].fire()  # under the lock: a block that ends now waits for it

    def forked(self) -> None:
        """In a forked child: no thread, nothing armed (the parent's waits are the parent's), a lock never held."""
        self._heap, self._cond, self._thread = [], threading.Condition(), None


#: The process's :class:`Watchdog`.
WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.forked)


@asynccontextmanager
async def abounded(conn: psycopg.AsyncConnection[Any], seconds: float) -> AsyncIterator[None]:
    """:meth:`Watchdog.bounded` on an async connection: the deadline is a timer of the running event loop."""
    watch = _Watch(conn)
    timer = asyncio.get_running_loop().call_later(seconds, watch.fire)
    try:
        yield
    except Exception as exc:
        if watch.fired:
            raise _given_up(seconds) from exc
        raise
    finally:
        timer.cancel()
        watch.armed = False
    if watch.fired:
        await conn.close()


@functools.cache
def bounded_class(base: C, seconds: float) -> C:
    """``base`` (a pool's connection class, sync or async) whose every wait for the server (psycopg's ``wait``: a
    round trip) ends within ``seconds``, else raises :class:`Unanswered`, its connection's socket shut down."""
    if issubclass(base, psycopg.AsyncConnection):

        class AsyncBounded(base):  # type: ignore[valid-type,misc]
            async def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
                async with abounded(self, seconds):
                    return await super().wait(gen, *args, **kwargs)

        return AsyncBounded  # type: ignore[return-value]

    class Bounded(base):  # type: ignore[valid-type,misc]
        def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
            with WATCHDOG.bounded(self, seconds):
                return super().wait(gen, *args, **kwargs)

    return Bounded  # type: ignore[return-value]
