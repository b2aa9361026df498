"""A pool connection's setup, no pool: the arguments both connectors' pools are made with, and the session toolstore
works in (its schema first on the search_path, the tenant row-level security reads, generic plans), set once per
connection, or, behind a transaction pooler (PgBouncer's ``pool_mode = transaction``), in every transaction; then
the application's own set-up of each connection, a store's ``configure`` (:func:`configured`), its failure said
naming it (psycopg_pool would try a raising one again, silently, until its open timeout).

A transaction pooler hands each transaction of a client connection to whichever server connection is free: a setting
made for the session stays on the server connection it was made on, for the pooler's other clients, and is missing
from the next transaction, which another server connection may run; so is a statement prepared there. There the pool's
connections prepare nothing (``prepare_threshold`` None) and are :class:`PooledConnection`\\ s: the session's
parameters are set local to each transaction, ``set_session_local`` sent with a statement run outside one (in a
pipeline: one round trip, one implicit transaction) and first in each transaction block.

A store not told so (``transaction_pooling`` False) that is behind such a pooler fails with a
:class:`TransactionPoolingError` naming the option, not with what the lost session makes of its statements
(:class:`Backends`, :func:`session_lost`)."""

from __future__ import annotations

import inspect
import math
import select
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ._commits import WatchedConnection
from ._encoding import check_encoding
from ._errors import DatabaseError, InvalidInputError, TransactionPoolingError, UnknownCatalogError, first_line
from ._lending import RECONNECT_WINDOW, connection_lost
from ._sql import query


def search_path(conn: Any, schema: str, ext_schema: str) -> str:
    """The quoted search_path value: the toolstore schema, then pgvector's schema."""
    names = [schema] if ext_schema == schema else [schema, ext_schema.strip('"')]
    return ", ".join(sql.Identifier(n).as_string(conn) for n in names)


def _extension_schema(row: Any) -> str:
    if row is None:
        raise DatabaseError("pgvector is not installed in this database: run `toolstore migrate` first")
    return str(row[0])


def session(conn: Any, schema: str, tenant: str, extension: Any) -> dict[str, str]:
    """Block ``set_session``'s parameters for a new connection, given the row of block ``extension_schema``; a
    DatabaseError where its encoding is SQL_ASCII (``_encoding.check_encoding``)."""
    check_encoding(conn)
    return {"path": search_path(conn, schema, _extension_schema(extension)), "tenant": tenant}


def pool_args(dsn: str, min_size: int, max_size: int, timeout: float, configure: Any, pooled: bool) -> dict[str, Any]:
    """What both pools are made with: autocommit connections set up by ``configure``, bounded connects, waits and
    reconnection (given up after ``RECONNECT_WINDOW``, begun again while a call waits, else after ``IDLE_RETRY``),
    opened by the connector; behind a transaction pooler (``pooled``), connections that prepare nothing."""
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, math.ceil(timeout))}
    if pooled:
        kwargs["prepare_threshold"] = None
    return {
        "conninfo": dsn,
        "min_size": min_size,
        "max_size": max_size,
        "configure": configure,
        "kwargs": kwargs,
        "timeout": timeout,
        "reconnect_timeout": RECONNECT_WINDOW,
        "open": False,
    }


def _outside(conn: Any) -> bool:
    """Whether ``conn``'s next statement starts a transaction of its own: no transaction block open, no pipeline."""
    return conn.piped == 0 and conn.info.transaction_status == TransactionStatus.IDLE


class PooledConnection(WatchedConnection):
    """A connection behind a transaction pooler: its session's parameters (``session``) set in every transaction."""

    session: dict[str, str] | None = None
    piped = 0

    def set_local(self) -> None:
        """The session's parameters, local to the transaction the next statement runs in (or this one)."""
        if self.session is not None:
            psycopg.Cursor(self).execute(query("set_session_local"), self.session)

    @contextmanager
    def pipeline(self) -> Iterator[psycopg.Pipeline]:
        self.piped += 1
        try:
            with super().pipeline() as pipeline:
                yield pipeline
        finally:
            self.piped -= 1

    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[psycopg.Transaction]:
        outermost = _outside(self)
        with super().transaction(savepoint_name, force_rollback) as tx:
            if outermost:
                self.set_local()
            yield tx


class PooledCursor(psycopg.Cursor[Any]):
    """A :class:`PooledConnection`'s cursor: a statement outside a transaction goes in a pipeline with the session's
    parameters."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        conn = self.connection
        if not isinstance(conn, PooledConnection) or conn.session is None or not _outside(conn):
            return super().execute(query, params, prepare=prepare, binary=binary)
        with conn.pipeline():
            conn.set_local()
            super().execute(query, params, prepare=prepare, binary=binary)
        return self


class AsyncPooledConnection(psycopg.AsyncConnection[Any]):
    """:class:`PooledConnection` for asyncio."""

    session: dict[str, str] | None = None
    piped = 0

    async def set_local(self) -> None:
        if self.session is not None:
            await psycopg.AsyncCursor(self).execute(query("set_session_local"), self.session)

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[psycopg.AsyncPipeline]:
        self.piped += 1
        try:
            async with super().pipeline() as pipeline:
                yield pipeline
        finally:
            self.piped -= 1

    @asynccontextmanager
    async def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> AsyncIterator[psycopg.AsyncTransaction]:
        outermost = _outside(self)
        async with super().transaction(savepoint_name, force_rollback) as tx:
            if outermost:
                await self.set_local()
            yield tx


class AsyncPooledCursor(psycopg.AsyncCursor[Any]):
    """:class:`PooledCursor` for asyncio."""

    async def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        conn = self.connection
        if not isinstance(conn, AsyncPooledConnection) or conn.session is None or not _outside(conn):
            return await super().execute(query, params, prepare=prepare, binary=binary)
        async with conn.pipeline():
            await conn.set_local()
            await super().execute(query, params, prepare=prepare, binary=binary)
        return self


#: A name not found (undefined table, function, object): what a statement run where toolstore's search_path is not
#: set gets; also what a role that may not use the schema gets (``_connect.schema_denied``).
UNDEFINED = frozenset({"42P01", "42883", "42704"})
#: A prepared statement not found (psycopg's InvalidSqlStatementName).
_NOT_PREPARED = "26000"
#: The errors after which a connection through a pooler asks whether its session is still where it set it.
_SUSPECT = UNDEFINED | {_NOT_PREPARED}
_FIX = (
    "give the store transaction_pooling=True (the command line: --transaction-pooling or "
    "$TOOLSTORE_TRANSACTION_POOLING=1), or connect directly or through a pooler in session mode"
)


#: The session a connection's ``set_session`` set, as its row says: the server backend it ran on, the search_path
#: and the tenant (as Postgres spelt them), which block ``backend_session`` reads back.
Session = tuple[int, str, str]
#: Every open pool connection set up through a pooler, in this process: where it connected (host, port, database,
#: user), its :data:`Session`, and its connector's :class:`Backends`.
_BEHIND: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Session, Backends]] = weakref.WeakKeyDictionary()
_BEHIND_LOCK = threading.Lock()


def _open(conn: Any) -> bool:
    """Whether ``conn`` is still open as far as can be told without I/O on it: not closed, and nothing to read on its
    socket (a pooler that ended it, in session mode too, leaves its end readable; psycopg notices at its next use). An
    idle connection has nothing else to read: toolstore listens to nothing, and one at work holds its backend."""
    try:
        return not conn.closed and not select.select([conn.fileno()], [], [], 0)[0]
    except (OSError, ValueError, psycopg.Error):
        return False


class Backends:
    """A connector's connections that reach the server through a proxy (a pooler), each with the session it set (its
    server backend, search_path, tenant), and the connector's verdict once one looked pooled in transaction mode; no
    I/O.

    Postgres tells a client its backend's pid at connect; a pooler tells it one of its own, so a connection whose
    ``set_session`` ran on another backend than that is behind one (a direct connection never is: nothing is kept for
    it, nothing checked). In session mode its statements keep running on that backend, in the session it set; in
    transaction mode each transaction may run on another, where the session toolstore set is not, while the one it
    set is left to the pooler's other clients, who may set theirs over it. That shows as two open connections of the
    process (one store's or two: two tenants) set up on one backend, or, after a prepared statement, a name or the
    store's catalog was not found, as another backend or another session than the one it set (:func:`session_lost`)."""

    def __init__(self) -> None:
        self.verdict: TransactionPoolingError | None = None

    def check(self) -> None:
        """Raise the verdict, if there is one: every call of a connector that looked pooled in transaction mode."""
        if self.verdict is not None:
            raise self.verdict

    def found(self, evidence: str) -> TransactionPoolingError:
        """The verdict (kept): the connection looks pooled in transaction mode, because of ``evidence``."""
        self.verdict = TransactionPoolingError(
            f"the database connection looks pooled in transaction mode (PgBouncer's pool_mode = transaction): "
            f"{evidence}; the session toolstore sets on a connection (search_path, tenant, prepared statements) does "
            f"not follow its transactions there, and is left to the pooler's other clients: {_FIX}"
        )
        return self.verdict

    def set_up(self, conn: Any, session: Session) -> None:
        """``conn``'s session was set (``session``: set_session's row); a :class:`TransactionPoolingError` (for both
        connectors) when another open connection set up through the same pooler was set up on that backend too."""
        info = conn.info
        if info.backend_pid == session[0]:
            return
        where = (info.host, info.port, info.dbname, info.user)
        with _BEHIND_LOCK:
            for other, (at, theirs, owner) in list(_BEHIND.items()):
                if (at, theirs[0]) == (where, session[0]) and _open(other):
                    evidence = f"two open connections were set up on one server backend ({session[0]})"
                    owner.found(evidence)
                    raise self.found(evidence)
            _BEHIND[conn] = (where, session, self)

    @staticmethod
    def suspect(conn: Any, exc: BaseException) -> Session | None:
        """The session ``conn`` set, when it is behind a pooler and ``exc`` may say that session is gone: a prepared
        statement, a name or the store's catalog not found."""
        if not isinstance(exc, UnknownCatalogError) and getattr(exc, "sqlstate", None) not in _SUSPECT:
            return None
        behind = _BEHIND.get(conn)
        return None if behind is None else behind[1]

    def moved(self, session: Session, now: Any, exc: BaseException) -> TransactionPoolingError | None:
        """The verdict after ``exc`` on a connection that set ``session``: a prepared statement not found (psycopg
        forgets those a DEALLOCATE or DISCARD ALL drops), or else (``now``: ``backend_session``'s row read after it,
        None unasked) another backend, or another search_path or tenant, than it set."""
        what = first_line(exc) if isinstance(exc, psycopg.Error) else "its catalog was not found"
        if getattr(exc, "sqlstate", None) == _NOT_PREPARED:
            return self.found(f"a statement toolstore prepared on it is gone ({what})")
        if now is None or tuple(now) == session:
            return None
        if now[0] != session[0]:
            return self.found(f"set up on server backend {session[0]}, it ran on {now[0]}, where {what}")
        return self.found(f"the search_path or tenant on its server backend ({now[0]}) is not the one it set: {what}")


def session_lost(conn: psycopg.Connection[Any], exc: BaseException, backends: Backends) -> Exception | None:
    """After ``exc`` on ``conn`` (a pool connection not told of a transaction pooler): the
    :class:`TransactionPoolingError` when the session set on it is gone (:meth:`Backends.moved`), else None. Asks the
    server only after a name or the catalog not found on a connection through a pooler."""
    session = backends.suspect(conn, exc)
    if session is None:
        return None
    try:
        now = None if _prepared(exc) else conn.execute(query("backend_session")).fetchone()
    except psycopg.Error:  # a failed transaction, or the connection is gone: the original error stands
        return None
    return backends.moved(session, now, exc)


async def session_lost_async(
    conn: psycopg.AsyncConnection[Any], exc: BaseException, backends: Backends
) -> Exception | None:
    """:func:`session_lost` on an async connection."""
    session = backends.suspect(conn, exc)
    if session is None:
        return None
    try:
        now = None if _prepared(exc) else await (await conn.execute(query("backend_session"))).fetchone()
    except psycopg.Error:
        return None
    return backends.moved(session, now, exc)


def _prepared(exc: BaseException) -> bool:
    """Whether ``exc`` is a prepared statement not found."""
    return getattr(exc, "sqlstate", None) == _NOT_PREPARED


def set_up(conn: psycopg.Connection[Any], params: dict[str, str], backends: Backends) -> None:
    """A new pool connection's session: set once (told to ``backends``), or, on a :class:`PooledConnection`, in each
    transaction."""
    if isinstance(conn, PooledConnection):
        conn.session, conn.cursor_factory = params, PooledCursor
    else:
        row = conn.execute(query("set_session"), params).fetchone()
        assert row is not None
        backends.set_up(conn, (row[3], row[0], row[1]))


async def set_up_async(conn: psycopg.AsyncConnection[Any], params: dict[str, str], backends: Backends) -> None:
    """:func:`set_up` for asyncio."""
    if isinstance(conn, AsyncPooledConnection):
        conn.session, conn.cursor_factory = params, AsyncPooledCursor
    else:
        row = await (await conn.execute(query("set_session"), params)).fetchone()
        assert row is not None
        backends.set_up(conn, (row[3], row[0], row[1]))


def pooled(conn: Any) -> bool:
    """Whether ``conn`` works behind a transaction pooler (its session set in each transaction)."""
    return isinstance(conn, (PooledConnection, AsyncPooledConnection)) and conn.session is not None


def local_session(conn: psycopg.Connection[Any]) -> None:
    """In a pipeline about to run a statement on a raw cursor (the route path): the session's parameters, behind a
    transaction pooler."""
    if isinstance(conn, PooledConnection):
        conn.set_local()


async def local_session_async(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`local_session` for asyncio."""
    if isinstance(conn, AsyncPooledConnection):
        await conn.set_local()


#: A ToolStore's ``configure``: called with each new connection of its pools, after toolstore's own set-up.
Configure = Callable[[psycopg.Connection[Any]], object]
#: An AsyncToolStore's ``configure``: awaited with each new connection of its async pools.
AsyncConfigure = Callable[[psycopg.AsyncConnection[Any]], Awaitable[object]]


def check_configure(configure: object, name: str = "configure") -> Any:
    """A store's ``configure`` argument (``name``): None or a callable, else InvalidInputError naming it."""
    if configure is not None and not callable(configure):
        raise InvalidInputError(f"{name} must be a callable taking a new connection, or None, got {configure!r:.80}")
    return configure


def _failed(name: str, exc: Exception) -> Exception:
    """The error ``name``(conn) raised as the pool's setup failure to say: a DatabaseError naming it; a lost
    connection stays itself (the pool tries another)."""
    if connection_lost(exc):
        return exc
    return DatabaseError(f"{name}(conn) raised {type(exc).__name__}: {first_line(exc)}")


def configured(configure: Configure | None, conn: psycopg.Connection[Any], name: str = "configure") -> None:
    """``configure(conn)``, the application's set-up of a new connection, its failure named (:func:`_failed`)."""
    if configure is None:
        return
    try:
        result = configure(conn)
    except Exception as exc:
        raise _failed(name, exc) from exc
    if inspect.isawaitable(result):  # an async function: it would run nothing on a sync connection
        getattr(result, "close", lambda: None)()
        raise DatabaseError(f"{name} returned an awaitable: a ToolStore's takes a plain function of a connection")


async def configured_async(configure: AsyncConfigure | None, conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`configured` for an AsyncToolStore's async pools: ``configure(conn)`` awaited."""
    if configure is None:
        return
    try:
        result = configure(conn)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:
        raise _failed("configure", exc) from exc
