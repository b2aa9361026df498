"""Read replicas: the rule of which one a read goes to (:class:`Rotation`, sans-I/O), and its two drivers,
:class:`Replicas` on :class:`Connector` pools for ``ToolStore`` and :class:`AsyncReplicas` on :class:`AsyncConnector`
pools for ``AsyncToolStore``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

import psycopg

from ._closing import AsyncCloser, Closer, aclose_all, close_all
from ._connect import AsyncConnector, Connector
from ._dsn import check_dsn, dsn_place
from ._errors import (
    DatabaseError,
    InvalidInputError,
    ModelMismatchError,
    StatementTimeoutError,
    UnknownCatalogError,
    UnknownToolError,
    UnmatchedFilterError,
    first_line,
)
from ._lending import PoolState, connection_lost, unreachable
from ._observe import logger
from ._outages import down_reason
from ._sql import query

T = TypeVar("T")
#: Seconds a read replica that could not be reached is left out of reads (they go to the next one, then the primary).
REPLICA_RETRY = 10.0
#: What a replica that is only behind the primary answers, so the read is handed on: a catalog it has not replayed,
#: its switch to another model, a value a route filter names (TS002), a tool (``resolve``, ``get``, ``tools(ids)``,
#: a call in ``route``'s messages or ``resolve_calls`` no tool answers to on a replica that does not stream from the
#: primary now or has not replayed all it received and the store's last write of tools: ``_steps.resolve_steps``,
#: :class:`Written`).
LAGGING: tuple[type[Exception], ...] = (UnknownCatalogError, ModelMismatchError, UnmatchedFilterError, UnknownToolError)
#: Seconds between looks at a replica's pool that holds no connection and is making one (just opened, or its
#: connections lost): a read waits for it (up to :data:`CONNECT_WAIT`), but not past an attempt that failed.
_LOOK = 0.01
#: Seconds a read waits at most (and not past the store's ``timeout``) for a replica's pool that holds no connection
#: to make one: a server that answers makes it in milliseconds, while one that accepts connections but never answers
#: (a process that accepts and sleeps, a stopped postgres) held the read until the attempt's connect timeout (the
#: store's ``timeout``). Once, while that attempt lasts: a later read does not wait for it (:class:`_Stalls`).
CONNECT_WAIT = 1.0
#: What a read finds of a replica's pool: :data:`PoolState`, or ``stalled``, making the connection a read already
#: waited for in vain.
ReplicaState = Literal["holds", "failing", "connecting", "stalled"]


def answer_within(timeout: float, statement_timeout_ms: int) -> float:
    """Seconds a read replica's connection waits for each answer of the server (``_deadline``: a replica that accepted
    the connection and stopped answering), then the read is handed on and the replica left out: the store's
    ``timeout``, or its ``statement_timeout`` when longer (a route's statement may run that long by the caller's
    choice, and the server ends it then)."""
    return max(timeout, statement_timeout_ms / 1000)


def replica_names(dsns: Sequence[str]) -> list[str]:
    """How warnings name each replica: its place in ``read_dsn`` and the host (or hostaddr), port and dbname its DSN
    gives (a URL or key=value, as libpq parses it; never the password), e.g. ``read replica 2 (host=db2 port=5433
    dbname=app)``; what the DSN leaves out (libpq's defaults then) is not said."""
    return [f"read replica {position} ({dsn_place(dsn)})" for position, dsn in enumerate(dsns, 1)]


def _unconnected(connector: Connector | AsyncConnector, state: ReplicaState) -> str:
    """Why a read does not ask a replica whose pool is in ``state`` (not ``holds``: a read waits for a pool that
    holds a connection as for any, a lent one comes back)."""
    if state == "connecting":
        return (
            f"no database connection within {_wait(connector):g} s (a server down, or one that accepts connections "
            "but does not answer; its pool keeps trying)"
        )
    if state == "stalled":
        return "its pool's attempt to connect is still unanswered (it keeps trying)"
    if (failure := connector.setup.current(connector.pool.connect_errors())) is not None:
        return f"a new database connection could not be set up: {first_line(failure)}"
    if (reason := down_reason(connector.pool.where)) is not None:  # said once as a warning too (``_outages``)
        return f"cannot connect to the database: {reason}"
    return "its pool's latest attempt to connect failed (it tries again)"


def pool_state(connector: Connector | AsyncConnector) -> PoolState:
    """Whether the replica's pool holds a connection, fails to make one, or is making one now (``Setup.state``)."""
    return connector.setup.state(*connector.pool.connect_state(), lent=connector.lending.busy(1))


def _wait(connector: Connector | AsyncConnector) -> float:
    """How long a read waits for ``connector``'s pool to make a connection: :data:`CONNECT_WAIT`, or ``timeout``."""
    return min(connector.timeout, CONNECT_WAIT)


class _Stalls:
    """For each replica, how many of its pool's attempts to connect had ended (``attempts_ended``) when a read last
    waited in vain for one (:data:`CONNECT_WAIT`): while none has ended since, the attempt is still under way, and a
    read finds the replica ``stalled`` rather than wait for it again."""

    def __init__(self, n: int) -> None:
        self._at: list[int | None] = [None] * n

    def look(self, replica: int, connector: Connector | AsyncConnector) -> ReplicaState:
        """The replica's :func:`pool_state`, ``stalled`` instead of ``connecting`` after a wait in vain for it."""
        state = pool_state(connector)
        stalled = state == "connecting" and self._at[replica] == connector.pool.attempts_ended()
        return "stalled" if stalled else state

    def waited(self, replica: int, connector: Connector | AsyncConnector, state: ReplicaState) -> ReplicaState:
        """``state``, in which a read's wait for the replica's pool ended, noted when still ``connecting``."""
        if state == "connecting":
            self._at[replica] = connector.pool.attempts_ended()
        return state


def _unready(connector: Connector, stalls: _Stalls, replica: int) -> ReplicaState:
    """The state of ``connector``'s pool (:meth:`_Stalls.look`), after waiting while it makes a connection (up to
    :func:`_wait`, but not past an attempt that failed); a pool whose attempts fail is asked to try again, in the
    background."""
    deadline = time.monotonic() + _wait(connector)
    while (state := stalls.look(replica, connector)) == "connecting" and time.monotonic() < deadline:
        time.sleep(_LOOK)
    if state == "failing":
        connector.pool.check()  # a pool that holds no connection only starts an attempt (unless one is scheduled)
    return stalls.waited(replica, connector, state)


async def _aunready(connector: AsyncConnector, stalls: _Stalls, replica: int) -> ReplicaState:
    """:func:`_unready` on an async pool."""
    deadline = time.monotonic() + _wait(connector)
    while (state := stalls.look(replica, connector)) == "connecting" and time.monotonic() < deadline:
        await asyncio.sleep(_LOOK)
    if state == "failing":
        await connector.pool.check()
    return stalls.waited(replica, connector, state)


def _lost(exc: Exception) -> bool:
    """A replica's read failed because its connection was lost (the server stopped or restarted)."""
    return isinstance(exc, DatabaseError) and exc.__cause__ is not None and connection_lost(exc.__cause__)


def replica_dsns(read_dsn: str | Sequence[str] | None) -> list[str]:
    """The stores' ``read_dsn`` argument as a list of DSNs, each checked (:func:`_dsn.check_dsn`); None or ``""``
    (as ``dsn=""``, not given) is no replica. InvalidInputError for anything else."""
    dsns = [read_dsn] if isinstance(read_dsn, str) and read_dsn else read_dsn or []
    if not isinstance(dsns, (list, tuple)) or not all(isinstance(dsn, str) and dsn for dsn in dsns):
        raise InvalidInputError(f"read_dsn must be a DSN or a list of DSNs, got {type(read_dsn).__name__}")
    return [check_dsn(dsn) for dsn in dsns]


class Written:
    """Where the primary's WAL was after a store's last write of tools (bytes from 0/0; 0: none), which a read replica
    must have replayed, with all the WAL it has received while it streams from the primary, before it answers that a
    call names no tool (block ``replayed``): else the call may name a tool it has not replayed yet, and the read is
    handed on. Kept only for a store with replicas (``active``), noted by its ``note_tools_written()``."""

    def __init__(self, active: bool) -> None:
        self.active, self.lsn, self._lock = active, 0, threading.Lock()

    def note(self, conn: psycopg.Connection[Any]) -> None:
        """After a write of tools committed (``conn``: the primary's): one round trip, none without replicas."""
        if self.active:
            self._advance(conn.execute(query("wal_written")).fetchone())

    async def anote(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """:meth:`note` on an async connection."""
        if self.active:
            self._advance(await (await conn.execute(query("wal_written"))).fetchone())

    def _advance(self, row: tuple[Any, ...] | None) -> None:
        assert row is not None
        with self._lock:
            self.lsn = max(self.lsn, int(row[0]))


class Rotation:
    """Which of ``n`` replicas a read asks, in what order, and what a failure means; no I/O.

    Each read starts one replica further round (:meth:`order`) and skips those left out; one whose pool has every
    connection in use now (busy) is asked after the others, so the read does not queue behind it while another replica
    is free, nor leaves the replicas for the primary because of it. A failure (:meth:`hands_over`) is handed on to the
    next replica, and finally the primary, when it is a :class:`DatabaseError` or one of :data:`LAGGING`; when its
    cause says the server cannot be reached (:func:`_lending.unreachable`), the replica is also left out for
    :data:`REPLICA_RETRY` seconds. A pool that gave no connection within ``timeout`` hands on that read alone. The
    drivers leave out (:meth:`leave_out`) a replica whose pool cannot give a connection now, before a read waits: for
    those seconds when it gave none while it tried, else only while it fails (each read looks at it again, so it is
    read from as soon as its pool connects)."""

    def __init__(
        self,
        n: int,
        *,
        names: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        news: Callable[[int], bool] = lambda replica: True,
    ) -> None:
        self._n, self._clock, self._news = n, clock, news  # news: whether a replica left out begins an outage to say
        self._turn, self._lock = -1, threading.Lock()
        self._down_until = [0.0] * n
        self.names = list(names) or [f"read replica {i + 1}" for i in range(n)]  # as warnings say them

    def order(self, busy: Callable[[int], bool] = lambda replica: False) -> Iterator[int]:
        """The replicas this read asks, in turn (none: the primary at once); those that ``busy`` says have every
        connection of their pool in use now come after the others (a wait for one lasts until a connection comes
        back, up to ``timeout``, while the next replica may answer at once)."""
        n = self._n
        if not n:  # no replicas (most stores): no lock on every read
            return
        with self._lock:
            self._turn = first = (self._turn + 1) % n
        later = []
        for i in ((first + offset) % n for offset in range(n)):
            if self._down_until[i] <= self._clock():
                if busy(i):
                    later.append(i)
                else:
                    yield i
        for i in later:
            if self._down_until[i] <= self._clock():
                yield i

    def hands_over(self, replica: int, exc: Exception) -> bool:
        """Whether replica ``replica``'s failure ``exc`` hands the read on (else it is the caller's error)."""
        if not isinstance(exc, (DatabaseError, *LAGGING)) or isinstance(exc, StatementTimeoutError):
            return False  # a route cancelled past its statement_timeout would cost as much on the next server
        if exc.__cause__ is not None and unreachable(exc.__cause__):
            self.leave_out(replica, exc)
        else:
            logger.debug("read on %s failed, trying the next: %s", self.names[replica], exc)
        return True

    def leave_out(self, replica: int, why: object, *, failing: bool = False) -> None:
        """Leave ``replica`` out of reads for :data:`REPLICA_RETRY` seconds, or (``failing``: its pool's attempts to
        connect fail, which each read looks at without waiting) of this read only, warning with its name and ``why``
        once an outage (``news``: the drivers', ``_outages.left_out``; its end is said when its pool connects again),
        at DEBUG after."""
        if not failing:
            self._down_until[replica] = self._clock() + REPLICA_RETRY
        out = "until its pool has a connection" if failing else f"for {REPLICA_RETRY:g} s"
        say = logger.warning if self._news(replica) else logger.debug
        say("%s left out %s (reads go to the next replica or the primary): %s", self.names[replica], out, why)


class Replicas:
    """:class:`Rotation` on :class:`Connector` pools, which connect in the background (a replica that is down does
    not keep the store from opening)."""

    def __init__(self, dsns: Sequence[str], **options: Any) -> None:
        self.connectors: list[Connector] = []
        names = replica_names(dsns)
        self.rotation = Rotation(len(names), names=names, news=lambda i: self.connectors[i].pool.left_out())
        self._stalls = _Stalls(len(names))
        try:
            for dsn, name in zip(dsns, names):
                self.connectors.append(Connector(dsn, wait=False, name=name, **options))
        except BaseException:
            self.close()  # the pools made so far
            raise

    def run(self, work: Callable[[psycopg.Connection[Any]], T]) -> tuple[bool, T | None]:
        """(True, result) from the first replica that answered, or (False, None) when the primary must."""
        for i in self.rotation.order(lambda replica: self.connectors[replica].busy()):
            connector = self.connectors[i]
            for attempt in range(2):
                if (state := _unready(connector, self._stalls, i)) != "holds":
                    self.rotation.leave_out(i, _unconnected(connector, state), failing=state != "connecting")
                    break
                try:
                    return True, connector.run(work, again=False)
                except Exception as exc:
                    if attempt == 0 and _lost(exc):
                        continue  # on a fresh connection, if its pool makes one at once (a restarted replica)
                    if not self.rotation.hands_over(i, exc):
                        raise
                    break
        return False, None

    def closers(self) -> list[Closer]:
        """What :meth:`close` closes: each replica's pool."""
        return [(f"{name}'s pool", c.close) for name, c in zip(self.rotation.names, self.connectors)]

    def close(self) -> None:
        """Close every replica's pool, then raise the first failure (``_closing.close_all``)."""
        close_all(self.closers())


class AsyncReplicas:
    """:class:`Replicas` for asyncio, on :class:`AsyncConnector` pools; made with :meth:`open`."""

    def __init__(self, connectors: list[AsyncConnector], names: Sequence[str] = ()) -> None:
        self.connectors = connectors
        self.rotation = Rotation(len(connectors), names=names, news=lambda i: connectors[i].pool.left_out())
        self._stalls = _Stalls(len(connectors))

    @classmethod
    async def open(cls, dsns: Sequence[str], **options: Any) -> AsyncReplicas:
        connectors: list[AsyncConnector] = []
        names = replica_names(dsns)
        try:
            for dsn, name in zip(dsns, names):
                connectors.append(await AsyncConnector.open(dsn, wait=False, name=name, **options))
        except BaseException:
            await cls(connectors, names[: len(connectors)]).close()
            raise
        return cls(connectors, names)

    async def run(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> tuple[bool, T | None]:
        """(True, result) from the first replica that answered, or (False, None) when the primary must."""
        for i in self.rotation.order(lambda replica: self.connectors[replica].busy()):
            connector = self.connectors[i]  # as Replicas.run
            for attempt in range(2):
                if (state := await _aunready(connector, self._stalls, i)) != "holds":
                    self.rotation.leave_out(i, _unconnected(connector, state), failing=state != "connecting")
                    break
                try:
                    return True, await connector.run(work, again=False)
                except Exception as exc:
                    if attempt == 0 and _lost(exc):
                        continue
                    if not self.rotation.hands_over(i, exc):
                        raise
                    break
        return False, None

    def closers(self) -> list[AsyncCloser]:
        """What :meth:`close` closes: each replica's pool."""
        return [(f"{name}'s pool", c.close) for name, c in zip(self.rotation.names, self.connectors)]

    async def close(self) -> None:
        """Close every replica's pool, then raise the first failure (``_closing.aclose_all``)."""
        await aclose_all(self.closers())
