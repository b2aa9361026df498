"""A client-side bound on a connection's wait for a server that stopped answering after the connection was made (a
stopped or frozen postgres, a network path that stops carrying packets): once the deadline passes, the connection's
socket is shut down, which ends the wait at once (:class:`Unanswered`), and the broken connection is discarded by
its pool, never lent again. Each pool of a store (``_connect``'s ``answer_within``) bounds each wait for the server
this way (:func:`bounded_class`: each round trip psycopg's ``wait`` makes, a statement's, a pipeline's, the pool's
check), not a whole call: an embedder's or a reranker's time in a route is not the server's. A read replica's wait
ends at its deadline (a read goes on to the primary). The primary's first asks the server, on a fresh connection,
whether the connection's backend still runs the statement (:func:`still_working`): while it says so the deadline is
renewed, so an index build or a large write that takes minutes on a server that answers is never cut; a server that
does not answer that question within the same time (frozen, or the network path down), or that says the backend
waits for its client (the path lost the statement or its reply), ends the wait.

Measured on Linux loopback (stop 46: the embedded server restarted on TCP), a postmaster and the connection's backend
stopped with SIGSTOP, ``select 1`` waited on for 20 s: with libpq's ``tcp_user_timeout`` (2 s) or keepalives (1 s, 2
probes), and after ``cancel_safe(timeout=2)`` (the stopped postmaster never reads the cancel request:
CancellationTimeout, and the statement is still waited for), the wait went on; after a shutdown of the socket at 2 s
it ended at 2.0 s, "server closed the connection unexpectedly". The server's kernel acknowledges what is sent to a
stopped process, so no TCP timer ever fires; only the client's own clock can end the wait."""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg

from ._observe import logger
from ._sql import query

C = TypeVar("C", bound=type)


class Unanswered(psycopg.errors.ConnectionTimeout):
    """A statement given up after its deadline (its connection's socket shut down): the server does not answer, which
    another try on a fresh connection would only wait for again (``_lending.unreachable``, not ``connection_lost``).
    psycopg's, as ``_lending.PoolBusy`` is psycopg_pool's: a connector's DatabaseError says it (its cause), the
    caller never sees it."""


class _Watch:
    """One bounded wait: the connection whose socket is shut down if the wait still lasts when its deadline comes;
    ``dsn``: where to ask, at the deadline, whether the connection's backend still runs its statement (the primary's,
    :func:`still_working`), the deadline renewed while it does; None: not asked (a read replica's)."""

    def __init__(
        self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], seconds: float, dsn: str | None
    ) -> None:
        self.conn, self.seconds, self.dsn, self.armed, self.fired = conn, seconds, dsn, True, False
        self.pid, self.started, self.why = conn.pgconn.backend_pid, time.monotonic(), ""

    def fire(self, why: str = "") -> None:
        """Shut the connection's socket down (a duplicate of its descriptor: the connection keeps its own)."""
        if not self.armed:
            return
        self.armed, self.fired, self.why = False, True, why
        try:
            with socket.socket(fileno=os.dup(self.conn.pgconn.socket)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (OSError, psycopg.Error):  # closed meanwhile: nothing left to end
            pass

    def given_up(self) -> Unanswered:
        if self.dsn is None:
            why = "the server accepted the connection but stopped answering"
        else:
            why = f"{self.why}; {time.monotonic() - self.started:.1f} s in all"
        return Unanswered(f"no answer within {self.seconds:g} s ({why})")


#: Why a primary's wait was given up (:attr:`_Watch.why`), as :func:`still_working` found.
NO_ANSWER = "nor to a fresh connection asking whether the statement still runs: the server is frozen or unreachable"
WAITS = "the server says the connection's backend waits for the client: the network path lost the statement or reply"


def still_working(dsn: str, pid: int, seconds: float) -> str:
    """Whether backend ``pid`` still runs its statement, asked of a fresh connection to ``dsn`` that gets ``seconds``
    to connect and answer: ``""`` when it does (or the server cannot tell: behind a pooler), else why the wait ends
    (:data:`NO_ANSWER`, :data:`WAITS`)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, math.ceil(seconds))) as conn:
            with WATCHDOG.bounded(conn, seconds):
                row = conn.execute(query("backend_waits"), {"pid": pid}).fetchone()
    except psycopg.Error:
        return NO_ANSWER
    return WAITS if row and row[0] else ""


class Watchdog:
    """Bounds waits (:meth:`bounded`, :func:`abounded`): one daemon thread (the process's, :data:`WATCHDOG`; started
    at its first wait, again in a forked child) fires each deadline still armed when it comes, or, for a wait that
    asks first (:class:`_Watch`'s ``dsn``), asks in a thread of its own and renews the deadline while the server says
    the statement runs."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order, self._cond = itertools.count(), threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, watch: _Watch) -> None:
        """Watch ``watch`` from now: its deadline comes ``watch.seconds`` later."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="toolstore-deadlines", daemon=True)
                self._thread.start()
            self._push(watch)

    def _push(self, watch: _Watch) -> None:
        heapq.heappush(self._heap, (time.monotonic() + watch.seconds, next(self._order), watch))
        if self._heap[0][2] is watch:  # the earliest deadline now: the thread waits for a later one, or none
            self._cond.notify()

    def disarm(self, watch: _Watch) -> bool:
        """Whether ``watch`` fired; it will not fire any more."""
        with self._cond:
            watch.armed = False
            return watch.fired

    @contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float, dsn: str | None = None) -> Iterator[None]:
        """Inside the block, ``conn``'s socket is shut down once ``seconds`` have passed (``dsn``: unless the server
        there says it still runs the statement, asked again every ``seconds``): what the block raises then is an
        :class:`Unanswered`; a block that got its answer as the deadline came closes ``conn`` (so its pool discards
        it: its socket is shut down) and returns as usual."""
        watch = _Watch(conn, seconds, dsn)
        self.arm(watch)
        try:
            yield
        except Exception as exc:
            if self.disarm(watch):
                raise watch.given_up() from exc
            raise
        except BaseException:
            self.disarm(watch)
            raise
        if self.disarm(watch):
            conn.close()

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
                watch = heapq.heappop(self._heap)[2]
                if watch.dsn is None:
                    watch.fire()  # under the lock: a block that ends now waits for it
                else:
                    asking = threading.Thread(target=self._ask, args=(watch,), name="toolstore-ask", daemon=True)
                    asking.start()

    def _ask(self, watch: _Watch) -> None:
        """At ``watch``'s deadline: the server asked, the deadline renewed while the statement runs, else fired."""
        why = still_working(watch.dsn or "", watch.pid, watch.seconds)
        with self._cond:
            if not watch.armed:
                return
            if why:
                watch.fire(why)
                return
            self._push(watch)
        waited = time.monotonic() - watch.started
        logger.debug("backend %d still runs its statement after %.1f s: waited for", watch.pid, waited)

    def forked(self) -> None:
        """In a forked child: no thread, nothing armed (the parent's waits are the parent's), a lock never held."""
        self._heap, self._cond, self._thread = [], threading.Condition(), None


#: The process's :class:`Watchdog`.
WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.forked)


@asynccontextmanager
async def abounded(conn: psycopg.AsyncConnection[Any], seconds: float, dsn: str | None = None) -> AsyncIterator[None]:
    """:meth:`Watchdog.bounded` on an async connection (the watchdog's thread shuts its socket down, which ends the
    event loop's wait on it)."""
    watch = _Watch(conn, seconds, dsn)
    WATCHDOG.arm(watch)
    try:
        yield
    except Exception as exc:
        if WATCHDOG.disarm(watch):
            raise watch.given_up() from exc
        raise
    except BaseException:
        WATCHDOG.disarm(watch)
        raise
    if WATCHDOG.disarm(watch):
        await conn.close()


@functools.cache
def bounded_class(base: C, seconds: float, dsn: str | None = None) -> C:
    """``base`` (a pool's connection class, sync or async) whose every wait for the server (psycopg's ``wait``: a
    round trip) ends within ``seconds``, else raises :class:`Unanswered`, its connection's socket shut down; with
    ``dsn`` (the primary's), not while the server there says the connection's backend still runs the statement. A
    wait for notifications (``notifies()``, after a LISTEN on a caller's own connection) is the caller's: unbounded."""
    if issubclass(base, psycopg.AsyncConnection):

        class AsyncBounded(base):  # type: ignore[valid-type,misc]
            listening = False

            async def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
                if self.listening:
                    return await super().wait(gen, *args, **kwargs)
                async with abounded(self, seconds, dsn):
                    return await super().wait(gen, *args, **kwargs)

            async def notifies(self, **kwargs: Any) -> AsyncIterator[Any]:
                self.listening = True
                try:
                    async for notify in super().notifies(**kwargs):
                        yield notify
                finally:
                    self.listening = False

        return AsyncBounded  # type: ignore[return-value]

    class Bounded(base):  # type: ignore[valid-type,misc]
        listening = False

        def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
            if self.listening:
                return super().wait(gen, *args, **kwargs)
            with WATCHDOG.bounded(self, seconds, dsn):
                return super().wait(gen, *args, **kwargs)

        def notifies(self, **kwargs: Any) -> Iterator[Any]:
            self.listening = True
            try:
                yield from super().notifies(**kwargs)
            finally:
                self.listening = False

    return Bounded  # type: ignore[return-value]
