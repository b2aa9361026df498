"""Talking to Postgres (where it is: ``_dsn``): pooled connections set up for toolstore, and every driver failure
turned into :class:`DatabaseError` within a bounded time."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar, cast

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import errors
from psycopg.types.array import ListBinaryDumper
from psycopg_pool import PoolTimeout

from ._backends import UNDEFINED, Backends, session_lost, session_lost_async
from ._commits import Commits, WatchedConnection, do_again
from ._deadline import Unanswered, bounded_class
from ._dsn import check_dsn
from ._errors import DatabaseError, InvalidInputError, SchemaAccessError, UnknownCatalogError, first_line
from ._interrupts import wait_event, wait_event_async
from ._lending import AsyncCountedPool, CountedPool, Lending, Setup, connection_lost, translate
from ._setup import (
    AsyncConfigure,
    AsyncPooledConnection,
    Configure,
    PooledConnection,
    configured,
    configured_async,
    pool_args,
    session,
    set_up,
    set_up_async,
)
from ._sql import query

T = TypeVar("T")
#: Seconds a call may wait for a database connection before it raises DatabaseError.
DEFAULT_TIMEOUT = 5.0
#: The longest ``timeout``: a day (at 1e10 seconds, say, waits failed as "cannot connect to the database: timestamp
#: out of range for platform time_t", the database never tried).
MAX_TIMEOUT = 86_400
#: Attempts of a write transaction that Postgres chose as a deadlock (or serialization) victim.
CONFLICT_ATTEMPTS = 4


class VectorArray(list[Any]):
    """A list of vectors (or None) that the pool's connections send as a binary ``vector[]``: a plain list is sent as
    text when the statement does not ask for binary (a raw cursor cannot), each vector's floats formatted by the client
    and parsed by the server (0.36 against 0.08 ms a round trip for two 384-dimension vectors)."""


def register_types(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """What a pool connection dumps beyond pgvector's own: :class:`VectorArray` in binary."""
    conn.adapters.register_dumper(VectorArray, ListBinaryDumper)


def _denied(row: Any, schema: str) -> DatabaseError | None:
    """``schema_denied``'s row as the error to raise (SchemaAccessError: the role may not use ``schema``), else None."""
    if row and not row[1]:
        return DatabaseError(
            f"toolstore schema {schema!r} has no tables (migrated down or dropped while the store was open): "
            "migrate it again (`toolstore migrate`, toolstore.migrate(), or your alembic upgrade that calls it)"
        )
    return row and SchemaAccessError(
        f"role {row[0]!r} has no USAGE privilege on schema {schema!r}, so no access to toolstore's tables: it has no "
        f"grant (never made, or its last one revoked); the owner of the tables grants one with `toolstore -c CATALOG "
        f"grant {row[0]}` (--write to let it change the catalog too)"
    )


def schema_denied(conn: psycopg.Connection[Any], schema: str) -> DatabaseError | None:
    """After a name was not found on ``conn``: why, if its role may not use ``schema`` or the schema has no tables."""
    try:
        return _denied(conn.execute(query("schema_denied"), {"schema": schema}).fetchone(), schema)
    except psycopg.Error:  # a failed transaction, or the connection is gone: the original error stands
        return None


async def schema_denied_async(conn: psycopg.AsyncConnection[Any], schema: str) -> DatabaseError | None:
    """:func:`schema_denied` on an async connection."""
    try:
        return _denied(await (await conn.execute(query("schema_denied"), {"schema": schema})).fetchone(), schema)
    except psycopg.Error:
        return None


def check_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        raise InvalidInputError(f"timeout must be a positive number of seconds up to {MAX_TIMEOUT:,}, got {timeout!r}")
    return float(timeout)


def check_pool_size(pool_size: int) -> int:
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
        raise InvalidInputError(f"pool_size must be a whole number of connections, 1 or more, got {pool_size!r}")
    return pool_size


def _open_timeout(timeout: float) -> float:
    """How long a connector waits for its pool's first connections."""
    return max(timeout, 15.0)


def _cannot_connect(exc: Exception) -> DatabaseError:
    return DatabaseError(f"cannot connect to the database: {first_line(exc)}")


def retry_conflicts(write: Callable[[], T], *, attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run a write transaction again (bounded, with jittered backoff) when Postgres aborts it as a deadlock or
    serialization victim; the last failure is a DatabaseError."""
    for attempt in range(attempts):
        try:
            return write()
        except (errors.DeadlockDetected, errors.SerializationFailure) as exc:
            if attempt == attempts - 1:
                raise DatabaseError(f"a concurrent write kept conflicting: {first_line(exc)}") from exc
            time.sleep(0.02 * 2**attempt * (0.5 + random.random()))
    raise AssertionError("unreachable")


class _Pooled:
    """What :class:`Connector` and :class:`AsyncConnector` share, no I/O: the bounded wait, the count of lent
    connections, the backends of those behind a pooler (``_backends.Backends``), and when :meth:`run` tries again."""

    pool: CountedPool | AsyncCountedPool

    def __init__(self, schema: str, timeout: float, setup: Setup, backends: Backends) -> None:
        self.schema, self.timeout, self.lending, self.setup = schema, timeout, Lending(), setup
        self.backends = backends

    def busy(self) -> bool:
        """Every connection of the pool is in use now (:meth:`Lending.busy`)."""
        return self.lending.busy(self.pool.max_size)

    @staticmethod
    def _again(exc: DatabaseError, attempt: int) -> bool:
        """Whether ``run`` tries once more: the first attempt's connection was lost (a restarted server)."""
        return attempt == 0 and exc.__cause__ is not None and connection_lost(exc.__cause__)


class Connector(_Pooled):
    """A pool of connections set up for toolstore (pgvector registered, the schema first on the search_path).

    :meth:`run` hands a function a connection for at most ``timeout`` seconds of waiting, turns psycopg's errors into
    :class:`DatabaseError`, and after a lost connection (a restarted server) discards the pool's dead connections and
    tries once more, so a store recovers by itself when the server is back; only when nothing of the work was
    committed (``_commits``: a COMMIT lost with its connection is asked about on a fresh one), so no transaction is
    written twice. A wait that ends without a connection is a :class:`PoolBusy` (the error's cause) when some
    connection was lent meanwhile, not just an unanswered pool. ``name``: the pool's, which psycopg_pool's warnings
    say (a read replica's names it, ``_replicas.replica_names``). ``answer_within``: seconds each wait for the
    server's answer lasts at most (``_deadline``); ``ask`` (the primary's): not while the server, asked at the deadline
    on a fresh connection, says the statement still runs.
    """

    pool: CountedPool

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        tenant: str = "",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        wait: bool = True,
        transaction_pooling: bool = False,
        configure: Configure | None = None,
        name: str | None = None,
        answer_within: float | None = None,
        ask: bool = False,
    ) -> None:
        ended = threading.Event()
        super().__init__(schema, check_timeout(timeout), Setup(ended), Backends())
        self.dsn = check_dsn(dsn)

        def set_up_connection(conn: psycopg.Connection[Any]) -> None:
            self.setup.made(self.pool.connect_errors())
            try:
                extension = conn.execute(query("extension_schema")).fetchone()
                set_up(conn, session(conn, schema, tenant, extension), self.backends)
                register_vector(conn)
                register_types(conn)
                configured(configure, conn)
            except Exception as exc:
                conn.close()  # psycopg_pool drops it without closing
                self.setup.end(exc, self.pool.connect_errors())
                raise
            self.setup.end()

        args = pool_args(dsn, min_size, max_size, self.timeout, set_up_connection, transaction_pooling)
        watched = PooledConnection if transaction_pooling else WatchedConnection
        if answer_within is not None:  # each wait for the server bounded (``_deadline``); ``ask``: the primary's
            watched = bounded_class(watched, answer_within, self.dsn if ask else None)
        replica = answer_within is not None and not ask
        self.pool = CountedPool(connection_class=watched, name=name, replica=replica, **args)
        try:  # wait=False: the pool connects in the background; until it has, a call waits up to `timeout`
            self.pool.open()
            if wait:  # the first setup's end (its error said at once: psycopg_pool tries again), then the pool's
                seconds = _open_timeout(self.timeout)
                with self.pool.waiting():
                    wait_event(ended, seconds)  # a Ctrl-C another thread took, or that came just before, ends it too
                self.backends.check()  # a setup found the pooler in transaction mode: said as such
                self.setup.check(seconds)
                self.pool.wait(seconds)
        except BaseException as exc:  # an interrupt too: no pool left connecting in the background
            self.pool.close()
            if not isinstance(exc, Exception) or isinstance(exc, DatabaseError):  # a setup's error says itself
                raise
            raise _cannot_connect(exc) from exc

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, waited for at most ``timeout`` seconds; psycopg's failures become DatabaseError."""
        self.backends.check()
        since = self.lending.returned()
        try:
            with self.pool.connection(timeout=self.timeout) as conn:
                self.lending.lend()
                try:
                    yield conn
                except (psycopg.Error, UnknownCatalogError) as exc:
                    if (lost := session_lost(conn, exc, self.backends)) or (
                        getattr(exc, "sqlstate", None) in UNDEFINED and (lost := schema_denied(conn, self.schema))
                    ):
                        raise lost from exc
                    raise
                finally:
                    self.lending.give_back(conn.closed)
        except (PoolTimeout, psycopg.Error) as exc:
            if connection_lost(exc):
                self.pool.check()  # drop the pool's other dead connections too
            self.backends.check()  # the setup of the connection it waited for found a transaction pooler
            cause = self.lending.failure(exc, since, self.pool.max_size)
            if isinstance(cause, Unanswered):
                self.pool.unanswered(cause)
            raise translate(cause, self.timeout, self.setup.current(self.pool.connect_errors()), self.pool) from cause

    def run(self, work: Callable[[psycopg.Connection[Any]], T], *, again: bool = True) -> T:
        """``work(conn)`` on a pooled connection, once more on a fresh one if the first was lost (a restarted
        server) before any transaction of it committed (``_commits``: a COMMIT lost with the connection is asked
        about, a committed one is done), and what follows a committed write (``_commits.follow_up``: an index build),
        lost with the connection, done once more on a fresh one (``again=False``: not once more, a read replica's
        caller decides); every psycopg failure is a DatabaseError."""
        for attempt in range(2):
            commits = Commits(self.dsn, self.timeout)
            try:
                with self.connection() as conn, cast(WatchedConnection, conn).watch(commits):
                    result = work(conn)
            except DatabaseError as exc:
                if again and self._again(exc, attempt) and commits.clean:
                    continue
                lost = exc.__cause__
                if commits.undecided and isinstance(lost, Unanswered):
                    raise commits.unknown(exc) from lost
                if commits.committed and isinstance(lost, Unanswered):
                    undone = f", but {commits.pending[0].what} was not done ({commits.pending[0].later})"
                    committed = f"the write had committed{undone if commits.pending else ''}, so it was not run again"
                    raise DatabaseError(f"{exc}; {committed}") from lost
                if commits.committed and lost is not None and connection_lost(lost):
                    done = "the connection was lost after the write committed, so it was not run again"
                    raise DatabaseError(f"{done}: {first_line(lost)}") from lost
                raise
            if commits.pending:
                self.pool.check()  # drop the pool's other dead connections (a restarted server)
                do_again(commits.pending, self.connection)
            return result
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.pool.close()


class AsyncConnector(_Pooled):
    """:class:`Connector` for asyncio, on psycopg's async pool: the same connection setup, bounded waits, errors
    (a busy pool's :class:`PoolBusy` too) and one retry after a lost connection, for reads: it does not watch commits
    (``AsyncToolStore`` writes through a ToolStore's :class:`Connector`). Made with :meth:`open`."""

    def __init__(self, pool: AsyncCountedPool, timeout: float, schema: str, setup: Setup, backends: Backends) -> None:
        super().__init__(schema, timeout, setup, backends)
        self.pool: AsyncCountedPool = pool

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str,
        tenant: str = "",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        wait: bool = True,
        transaction_pooling: bool = False,
        configure: AsyncConfigure | None = None,
        name: str | None = None,
        answer_within: float | None = None,
        ask: bool = False,
    ) -> AsyncConnector:
        """``wait=False``: the pool connects in the background; until it has, a call waits up to ``timeout``."""
        timeout = check_timeout(timeout)
        check_dsn(dsn)

        ended = asyncio.Event()
        setup, backends = Setup(ended), Backends()

        async def set_up_connection(conn: psycopg.AsyncConnection[Any]) -> None:
            setup.made(pool.connect_errors())
            try:
                extension = await (await conn.execute(query("extension_schema"))).fetchone()
                await set_up_async(conn, session(conn, schema, tenant, extension), backends)
                await register_vector_async(conn)
                register_types(conn)
                await configured_async(configure, conn)
            except Exception as exc:
                await conn.close()
                setup.end(exc, pool.connect_errors())
                raise
            setup.end()

        args = pool_args(dsn, min_size, max_size, timeout, set_up_connection, transaction_pooling)
        connection = AsyncPooledConnection if transaction_pooling else psycopg.AsyncConnection
        if answer_within is not None:
            connection = bounded_class(connection, answer_within, dsn if ask else None)
        replica = answer_within is not None and not ask
        pool = AsyncCountedPool(connection_class=connection, name=name, replica=replica, **args)
        try:  # as Connector's
            await pool.open()
            if wait:
                seconds = _open_timeout(timeout)
                with pool.waiting():
                    await wait_event_async(ended, seconds)
                backends.check()
                setup.check(seconds)
                await pool.wait(seconds)
        except BaseException as exc:  # a cancellation too (asyncio.timeout): no pool left connecting in the background
            await pool.close()
            if not isinstance(exc, Exception) or isinstance(exc, DatabaseError):  # a setup's error says itself
                raise
            raise _cannot_connect(exc) from exc
        return cls(pool, timeout, schema, setup, backends)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        self.backends.check()
        since = self.lending.returned()
        try:
            async with self.pool.connection(timeout=self.timeout) as conn:
                self.lending.lend()
                try:
                    yield conn
                except (psycopg.Error, UnknownCatalogError) as exc:
                    if (lost := await session_lost_async(conn, exc, self.backends)) or (
                        getattr(exc, "sqlstate", None) in UNDEFINED
                        and (lost := await schema_denied_async(conn, self.schema))
                    ):
                        raise lost from exc
                    raise
                finally:
                    self.lending.give_back(conn.closed)
        except (PoolTimeout, psycopg.Error) as exc:
            if connection_lost(exc):
                await self.pool.check()
            self.backends.check()
            cause = self.lending.failure(exc, since, self.pool.max_size)
            if isinstance(cause, Unanswered):
                self.pool.unanswered(cause)
            raise translate(cause, self.timeout, self.setup.current(self.pool.connect_errors()), self.pool) from cause

    async def run(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]], *, again: bool = True) -> T:
        for attempt in range(2):
            try:
                async with self.connection() as conn:
                    return await work(conn)
            except DatabaseError as exc:
                if again and self._again(exc, attempt):
                    continue
                raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self.pool.close()
