"""Where the database is: an explicit DSN, ``TOOLSTORE_DSN``, or the embedded server; and connection setup."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ._embedded import embedded_dsn
from ._errors import DatabaseError


def resolve_dsn(dsn: str | None) -> str:
    """The DSN argument if given, else ``$TOOLSTORE_DSN``, else the embedded server's."""
    if dsn:
        return dsn
    env = os.environ.get("TOOLSTORE_DSN")
    if env:
        return env
    return embedded_dsn()


def search_path(conn: Any, schema: str, ext_schema: str) -> str:
    """The quoted search_path value: the toolstore schema, then pgvector's schema."""
    names = [schema] if ext_schema == schema else [schema, ext_schema.strip('"')]
    return ", ".join(sql.Identifier(n).as_string(conn) for n in names)


EXTENSION_SCHEMA = "select extnamespace::regnamespace::text from pg_extension where extname = 'vector'"
SET_SEARCH_PATH = "select set_config('search_path', %s, false)"
# plan_cache_mode is left at Postgres' default: route()'s prepared statement may reuse a generic plan,
# which measured 36% faster at 1k tools and 16% at 10k than re-planning every call (bench/PROFILE.md).
# Safe here: the vector searches, whose plan depends on the catalog and dimension, are planned afresh
# inside knn() with their actual values.


def _extension_schema(row: Any) -> str:
    if row is None:
        raise DatabaseError("pgvector is not installed in this database: run `toolstore migrate` first")
    return str(row[0])


def make_pool(dsn: str, *, schema: str, min_size: int = 1, max_size: int = 4) -> ConnectionPool[Any]:
    """A pool whose connections have pgvector registered and the toolstore schema on their search_path."""

    def configure(conn: psycopg.Connection[Any]) -> None:
        ext = _extension_schema(conn.execute(EXTENSION_SCHEMA).fetchone())
        conn.execute(SET_SEARCH_PATH, [search_path(conn, schema, ext)])
        register_vector(conn)

    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        configure=configure,
        kwargs={"autocommit": True},
        open=False,
    )
    try:
        pool.open(wait=True, timeout=15)
    except Exception as exc:
        pool.close()
        raise DatabaseError(f"cannot connect to the database: {exc}") from exc
    return pool


async def make_async_pool(dsn: str, *, schema: str, min_size: int = 1, max_size: int = 4) -> AsyncConnectionPool[Any]:
    """:func:`make_pool` for asyncio: the same connection setup on psycopg's async pool, opened."""

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        ext = _extension_schema(await (await conn.execute(EXTENSION_SCHEMA)).fetchone())
        await conn.execute(SET_SEARCH_PATH, [search_path(conn, schema, ext)])
        await register_vector_async(conn)

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        configure=configure,
        kwargs={"autocommit": True},
        open=False,
    )
    try:
        await pool.open(wait=True, timeout=15)
    except Exception as exc:
        await pool.close()
        raise DatabaseError(f"cannot connect to the database: {exc}") from exc
    return pool
