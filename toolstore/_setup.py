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
(``_backends``: :func:`set_up` tells it each connection's session)."""

from __future__ import annotations

import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ._backends import Backends
from ._commits import WatchedConnection
from ._encoding import check_encoding
from ._errors import DatabaseError, InvalidInputError, first_line
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
