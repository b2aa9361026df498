"""What a pool's failure means, no I/O: the count of connections a pool lent (:class:`Lending`, kept by both
connectors of ``_connect``) that tells a busy pool (:class:`PoolBusy`) from a server that cannot be reached
(:func:`unreachable`, which leaves a read replica out of reads), a lost connection (:func:`connection_lost`, which
a connector's ``run`` tries once more after), a new connection's setup that failed (:class:`Setup`, which also tells a
pool that holds no connection and fails to make one, that a read replica's read does not wait for), and the pools
that keep the count of connections they could not make, which it reads (:class:`CountedPool`)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Literal

import psycopg
from psycopg import errors
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout
from psycopg_pool.pool import MaintenanceTask
from psycopg_pool.pool_async import MaintenanceTask as AsyncMaintenanceTask

from ._deadline import Unanswered
from ._dsn import dsn_place
from ._errors import DatabaseError, StoreClosedError, first_line
from ._outages import connected, failed, left_out, loud_pool, quiet_pool, retired, stopped_answering

_LOST = (errors.AdminShutdown, errors.CrashShutdown, errors.CannotConnectNow, errors.IdleSessionTimeout)
#: Said with "permission denied" (or a row-level security violation): what a granted role may do on toolstore's tables.
NOT_GRANTED = (
    "on toolstore's tables a role's grant decides (a read-only one routes, lists and exports; one with --write also "
    "changes the catalog and logs its sessions: `toolstore -c CATALOG grant ROLE --write`, run by the owner of the "
    "tables, who alone creates catalogs)"
)


#: :meth:`Setup.state`: whether a pool holds a connection, its attempts to make one fail, or one is being made.
PoolState = Literal["holds", "failing", "connecting"]


class PoolBusy(PoolTimeout):
    """No connection within the timeout while some connection of the pool was in use: the server answers, the pool
    is only full (more concurrent calls than ``pool_size``)."""


class Lending:
    """The connections a pool lent (``_connect.Connector``'s and ``AsyncConnector``'s count): how many are out now,
    and how many came back, which tells a busy pool (:class:`PoolBusy`) from one that could not connect."""

    def __init__(self) -> None:
        self._out, self._returned, self._lock = 0, 0, threading.Lock()

    def returned(self) -> int:
        """How many came back working so far: :meth:`failure`'s ``since``, taken before waiting for a connection."""
        with self._lock:
            return self._returned

    def lend(self) -> None:
        with self._lock:
            self._out += 1

    def give_back(self, lost: bool = False) -> None:
        """One came back; ``lost``: closed or broken (the server went down, say), which shows no server that answers,
        so it is not counted as :meth:`returned`."""
        with self._lock:
            self._out, self._returned = self._out - 1, self._returned + (0 if lost else 1)

    def busy(self, pool_size: int) -> bool:
        """Whether all ``pool_size`` connections of the pool are lent now: a wait for one lasts until one comes back."""
        with self._lock:
            return self._out >= pool_size

    def failure(self, exc: BaseException, since: int, pool_size: int) -> BaseException:
        """What a wait for a connection that failed with ``exc`` means: a :class:`PoolBusy` when it timed out while
        some connection was out (one is out now, or one came back working since ``since``), else ``exc`` itself."""
        with self._lock:
            lent = self._out > 0 or self._returned != since
        if isinstance(exc, PoolTimeout) and lent:
            return PoolBusy(f"the pool's connections (pool_size={pool_size}) are all in use")
        return exc


#: Seconds the pools try to make a connection (one that replaces a lost one, or their first) before they give up:
#: psycopg_pool backs off between tries (1, 2, 4, 8 s...), so over a longer window a pool tried again only long after
#: the server was back (after a 20 s outage, up to 11 s later: every call failed meanwhile, "is the server up?").
#: One that gave up while a call waits for a connection starts again at once (``reconnect_failed``), so it tries at
#: least every second while calls wait; one no call waits on starts again after :data:`IDLE_RETRY` seconds, in the
#: pool's own scheduler (no thread of its own), so it has connected by the first call after the server is back.
RECONNECT_WINDOW = 2.0
#: Seconds before a pool no call waits on tries again to connect after it gave up (:data:`RECONNECT_WINDOW`): each
#: time an attempt, and another after about a second and two, until it connects or is closed (3 attempts in 7 s).
IDLE_RETRY = 5.0


#: Seconds a pool's close() waits for each of its workers (psycopg_pool's default: 5): an idle one stops at once, while
#: one in an attempt to connect to a server that accepts and never answers would hold close() until the attempt's
#: connect timeout (the store's ``timeout``) or those 5 s; it ends by itself (a connection it makes is closed, as its
#: pool is), psycopg_pool's word that it could not stop it said at DEBUG (``_outages``).
CLOSE_WAIT = 0.05


class _KeptErrors:
    """A pool whose count of the connections it could not make (its ``connections_errors`` stat), which
    :meth:`Setup.current` compares, is kept whole when a caller's ``pop_stats()`` resets the pool's counters."""

    _popped_errors = 0  # the count that pop_stats() took from the pool's counters
    _popped_lock = threading.Lock()  # one for every pool: held by a pop and a count only, never across I/O

    def pop_stats(self) -> dict[str, int]:
        with self._popped_lock:
            stats: dict[str, int] = super().pop_stats()  # type: ignore[misc]
            self._popped_errors += stats.get("connections_errors", 0)
        return stats

    def connect_errors(self) -> int:
        """How many connections the pool could not make since it was made (refused, unreachable)."""
        return self.connect_state()[0]

    def connect_state(self) -> tuple[int, int]:
        """:meth:`connect_errors`, and how many connections the pool holds idle now."""
        with self._popped_lock:
            stats: dict[str, int] = self.get_stats()  # type: ignore[attr-defined]
            return self._popped_errors + stats.get("connections_errors", 0), stats.get("pool_available", 0)


class _Watched:
    """A pool whose attempts to connect are said once per outage (``_outages``: its first failure after it had
    connected, then the first connection again, for ``where`` it connects), not one warning each as psycopg_pool says
    them (at DEBUG for the pool)."""

    _tokens = itertools.count()

    def __init__(self, *args: Any, replica: bool = False, **kwargs: Any) -> None:
        self.replica = replica  # a read replica's: its outage said by the reads it sends elsewhere (``left_out``)
        super().__init__(*args, **kwargs)
        #: The place its outages are said for: a replica's name, else the primary's host, port and dbname.
        self.where = kwargs.get("name") or f"toolstore's database ({dsn_place(kwargs.get('conninfo') or '')})"
        self._token, self._connected_once = next(self._tokens), False
        self._ended, self._ended_lock = 0, threading.Lock()
        name: str = self.name  # type: ignore[attr-defined]
        quiet_pool(name)
        self._retire = weakref.finalize(self, _retire, name, self.where, self._token)  # when collected

    def _retired(self) -> None:
        """Closed: its failures no longer apply; its psycopg_pool warnings stay quiet until it is collected (a worker
        not waited for, :data:`CLOSE_WAIT`, may still end an attempt to connect)."""
        retired(self.where, self._token)

    def _attempted(self, exc: BaseException | None) -> None:
        """After an attempt to connect: ``exc`` None, or a failure after the connection was made (its setup's, which
        ``Setup`` says), is a connection; a failure to make one (refused, no such host, the server shutting down...) is
        an outage's attempt."""
        with self._ended_lock:
            self._ended += 1
        if self.closed:  # type: ignore[attr-defined]  # an attempt that ended after close(): no news of the database
            return
        if exc is not None and connection_lost(exc):
            failed(self.where, first_line(exc), self._token, lost=self._connected_once, replica=self.replica)
        else:
            again, self._connected_once = self._connected_once, True
            connected(self.where, again)

    def unanswered(self, exc: Unanswered) -> None:
        """A statement of the pool got no answer (``_deadline``): a primary's outage said once (``_outages``); a read
        replica's is said by the read that leaves it out (:meth:`left_out`)."""
        if not self.replica:
            stopped_answering(self.where, str(exc), self._token)

    def left_out(self) -> bool:
        """A read replica's pool left out of reads: whether to say so as a warning (``_outages.left_out``)."""
        return left_out(self.where, self._token)

    def attempts_ended(self) -> int:
        """How many of the pool's attempts to connect have ended (connected, or failed), since it was made."""
        with self._ended_lock:
            return self._ended


def _retire(name: str, where: str, token: int) -> None:
    """A pool of :class:`_Watched` is closed or gone: its psycopg_pool warnings and its failures no longer apply."""
    loud_pool(name)
    retired(where, token)


class _RetryLater(MaintenanceTask):
    """:meth:`CountedPool.reconnect_failed`'s next try, after :data:`IDLE_RETRY` seconds in the pool's scheduler."""

    def _run(self, pool: ConnectionPool[Any]) -> None:
        pool.check()  # a pool short of connections starts growing (psycopg_pool's one growth at a time)


class _AsyncRetryLater(AsyncMaintenanceTask):
    """:class:`_RetryLater` for the async pool."""

    async def _run(self, pool: AsyncConnectionPool[Any]) -> None:
        await pool.check()


class _Waited:
    """A pool that counts the calls waiting for it (a connection, or its first ones as it opens: :meth:`waiting`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._waiting_calls, self._waiting_lock = 0, threading.Lock()
        super().__init__(*args, **kwargs)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a wait for the pool's connections: while one lasts, a reconnection that gave up starts again."""
        with self._waiting_lock:
            self._waiting_calls += 1
        try:
            yield
        finally:
            with self._waiting_lock:
                self._waiting_calls -= 1

    def _rearm(self) -> bool:
        """Whether a reconnection that gave up (``reconnect_failed``) starts again: while a call waits, and open."""
        return self._waiting_calls > 0 and not self.closed  # type: ignore[attr-defined]


class CountedPool(_KeptErrors, _Watched, _Waited, ConnectionPool[Any]):
    """The connectors' sync pool: :class:`_KeptErrors`, its outages said once (:class:`_Watched`), and a reconnection
    that gave up (:data:`RECONNECT_WINDOW`) tried again at once while a call waits for a connection (:class:`_Waited`),
    else after :data:`IDLE_RETRY` seconds: ``check()`` grows a pool short of connections."""

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            conn = super()._connect(timeout)
        except Exception as exc:
            self._attempted(exc)
            raise
        self._attempted(None)
        return conn

    def getconn(self, timeout: float | None = None) -> Any:
        with self.waiting():
            return super().getconn(timeout)

    def wait(self, timeout: float = 30.0) -> None:
        with self.waiting():
            super().wait(timeout)

    def reconnect_failed(self) -> None:
        super().reconnect_failed()
        if self._rearm():
            self.check()
        elif not self.closed:
            self.schedule_task(_RetryLater(self), IDLE_RETRY)

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        try:
            super().close(timeout)
        finally:
            self._retired()


class AsyncCountedPool(_KeptErrors, _Watched, _Waited, AsyncConnectionPool[Any]):
    """The connectors' async pool: as :class:`CountedPool`."""

    async def _connect(self, timeout: float | None = None) -> Any:
        try:
            conn = await super()._connect(timeout)
        except Exception as exc:
            self._attempted(exc)
            raise
        self._attempted(None)
        return conn

    async def getconn(self, timeout: float | None = None) -> Any:
        with self.waiting():
            return await super().getconn(timeout)

    async def wait(self, timeout: float = 30.0) -> None:
        with self.waiting():
            await super().wait(timeout)

    async def reconnect_failed(self) -> None:
        await super().reconnect_failed()
        if self._rearm():
            await self.check()
        elif not self.closed:
            await self.schedule_task(_AsyncRetryLater(self), IDLE_RETRY)

    @classmethod
    async def worker(cls, q: Any) -> None:
        """psycopg_pool's worker, but cancelled (its loop ending while an attempt that close() left runs) it ends as
        told to stop: close()'s gather of the workers then ends with no error, which Python 3.10 logs as never
        retrieved once the loop ends."""
        with suppress(asyncio.CancelledError):
            await super().worker(q)

    async def close(self, timeout: float = CLOSE_WAIT) -> None:
        try:
            await super().close(timeout)
        finally:
            self._retired()


class Setup:
    """How the setup of a pool's new connections (the pool's ``configure``) ended, as the connectors open their pool
    and translate its timeouts: ``failure``, the error of the last setup that failed for a reason another try does not
    fix (not a lost connection: a database without pgvector, say), None once one succeeds; ``ended`` is set by the
    first such end. psycopg_pool tries a failed setup again until its open timeout and then says only that the pool
    did not fill: the connector waits for ``ended`` and says the setup's error. A connection that could not be made
    at all never reaches the setup: the pool counts it (its ``connections_errors``), and :meth:`current` no longer
    says a failure noted before such a count grew."""

    def __init__(self, ended: threading.Event | asyncio.Event) -> None:
        self.ended = ended
        self.failure: BaseException | None = None
        self._connect_errors = 0  # the pool's count of connections it could not make when `failure` was noted
        self._errors_when_made = 0  # and when it last made one (its setup then began)

    def made(self, connect_errors: int) -> None:
        """The pool made a connection, whose setup begins, when it had failed to make ``connect_errors``."""
        self._errors_when_made = connect_errors

    def state(self, connect_errors: int, idle: int, lent: bool) -> PoolState:
        """What a wait for a connection of the pool would meet: ``holds`` (a connection ``idle`` in it, or ``lent``),
        else ``failing`` when its latest attempt to make one failed (its count of failures, ``connect_errors``, grew
        since it made one: the wait lasts until an attempt succeeds, which a server refusing connections never lets
        happen) or the setup of the one it made did (:meth:`current`), else ``connecting`` (an attempt under way)."""
        if idle > 0 or lent:
            return "holds"
        failing = connect_errors > self._errors_when_made or self.current(connect_errors) is not None
        return "failing" if failing else "connecting"

    def end(self, failure: BaseException | None = None, connect_errors: int = 0) -> None:
        """Note that a setup succeeded (``failure`` None) or failed, when the pool had failed to make
        ``connect_errors`` connections; a lost connection is the pool's to try again."""
        if failure is None or not connection_lost(failure):
            self.failure, self._connect_errors = failure, connect_errors
            self.ended.set()

    def current(self, connect_errors: int) -> BaseException | None:
        """``failure`` while it is the latest news of the pool's new connections: None once a connection could not be
        made at all since (``connect_errors``, the pool's count, grew: the server went down, say), which a later
        setup that fails again notes anew."""
        return self.failure if connect_errors == self._connect_errors else None

    def check(self, seconds: float) -> None:
        """After an open waited ``seconds`` for ``ended``: the failure as a DatabaseError naming it, or a PoolTimeout
        when no setup ended (no connection could be made)."""
        if not self.ended.is_set():
            raise PoolTimeout(f"pool initialization incomplete after {seconds} sec")
        if self.failure is not None:
            raise DatabaseError(f"a new database connection could not be set up: {first_line(self.failure)}")


def connection_lost(exc: BaseException) -> bool:
    """True for errors that mean the connection is gone (server stopped, restarted, network), not the statement. The
    pool's own errors (no connection within the timeout, closed) are OperationalErrors without a SQLSTATE too, but
    nothing was lost: another try would only wait again; nor after a statement's answer was given up
    (``_deadline.Unanswered``: the server does not answer, which a fresh connection would wait for again)."""
    if isinstance(exc, (PoolTimeout, PoolClosed, Unanswered)):
        return False
    return isinstance(exc, _LOST) or (isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None)


def unreachable(exc: BaseException) -> bool:
    """True for failures that mean the server cannot be reached, which leave a replica out of reads for
    ``_replicas.REPLICA_RETRY`` seconds: a lost connection (:func:`connection_lost`: a server stopped or restarted, the
    network), or a pool that gave no connection within the timeout while none of its connections was in use, so it
    could not open one (refused, no such host, a server not accepting connections). A pool that had a connection in
    use meanwhile (:class:`PoolBusy`, from the :class:`Lending` count of both connectors; psycopg_pool's
    PoolTimeout chains no error, and its ``pool_size`` stat counts connections still being attempted) is only busy:
    the server answers, and a later call may find a connection free. A statement whose answer was given up
    (``_deadline.Unanswered``: a server that accepted the connection and stopped answering) is unreachable too."""
    return (
        (isinstance(exc, PoolTimeout) and not isinstance(exc, PoolBusy))
        or isinstance(exc, Unanswered)
        or connection_lost(exc)
    )


#: What a call waiting for a connection (or about to ask for one) when its store's close() closed the pool raises.
CLOSED_MEANWHILE = "this store was closed while the call was under way (its connection pool is closed)"


def translate(
    exc: BaseException, timeout: float, setup_failure: BaseException | None, pool: _Watched
) -> DatabaseError | StoreClosedError:
    """A connector's failure to get or use a connection (of ``pool``) as the DatabaseError its caller sees (a
    StoreClosedError for a pool closed meanwhile: the store's close(), not the database); ``setup_failure``: the pool's
    new connections' setup error that is true now (:meth:`Setup.current`), said when no connection came; a statement
    the primary did not answer (:class:`Unanswered`) names the database."""
    if isinstance(exc, PoolClosed):
        return StoreClosedError(CLOSED_MEANWHILE)
    if isinstance(exc, Unanswered) and not pool.replica:
        return DatabaseError(f"{pool.where}: {exc}; its connection was closed, and a later call tries a fresh one")
    if isinstance(exc, PoolBusy):
        return DatabaseError(f"no database connection within {timeout:g} s: {exc}")
    if isinstance(exc, PoolTimeout):
        why = "is the server up?" if setup_failure is None else f"a new one's setup failed: {first_line(setup_failure)}"
        return DatabaseError(f"no database connection within {timeout:g} s: {why}")
    if isinstance(exc, errors.InsufficientPrivilege):  # a role's grant does not cover the statement (or none)
        return DatabaseError(f"database error: {first_line(exc)}: {NOT_GRANTED}")
    return DatabaseError(f"database error: {first_line(exc)}")
