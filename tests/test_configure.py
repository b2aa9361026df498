"""A store's ``configure``: the application's set-up of every connection its pools open, after toolstore's own."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from toolstore import AsyncToolStore, DatabaseError, HashingEmbedder, InvalidInputError, Tool, ToolStore

TOOLS = [Tool(id="p.send", name="send", provider="p", description="send a message")]


def test_configure_sets_up_every_connection_of_both_pools_after_toolstore(dsn: str) -> None:
    seen: list[tuple[int, str]] = []

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("set application_name = 'billing-agent'")
        row = conn.execute("select pg_backend_pid(), current_setting('search_path')").fetchone()
        assert row is not None
        seen.append((row[0], row[1]))

    with ToolStore(dsn, embedder=HashingEmbedder(16), catalog="c", configure=configure, read_dsn=dsn) as store:
        store.upsert(TOOLS)
        assert store.route("send a message", k=1).ids == ["p.send"]
        with store.connection() as conn:
            assert conn.execute("show application_name").fetchone() == ("billing-agent",)
        replica = store._replicas.connectors[0]
        replica.pool.wait(10)
        with replica.connection() as conn:
            assert conn.execute("show application_name").fetchone() == ("billing-agent",)
    assert len({pid for pid, _ in seen}) >= 2  # the primary's pool and the replica's
    assert all(path.startswith('"toolstore"') for _, path in seen)  # toolstore's set-up came first


def test_a_configure_that_raises_is_said_naming_it_when_the_store_opens(dsn: str) -> None:
    def configure(conn: psycopg.Connection[Any]) -> None:
        raise PermissionError("no role billing here")

    with pytest.raises(DatabaseError) as caught:
        ToolStore(dsn, embedder=None, catalog="c", configure=configure, timeout=60)
    assert str(caught.value) == (
        "a new database connection could not be set up: configure(conn) raised PermissionError: no role billing here"
    )


def test_a_configure_whose_sql_fails_is_said_naming_it(dsn: str) -> None:
    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("set role no_such_role_here")

    with pytest.raises(DatabaseError, match=r"configure\(conn\) raised InvalidParameterValue: role .no_such_role_here"):
        ToolStore(dsn, embedder=None, catalog="c", configure=configure, timeout=60)


def test_configure_must_be_a_callable() -> None:
    with pytest.raises(InvalidInputError, match="configure must be a callable taking a new connection, or None"):
        ToolStore("postgresql://nowhere/x", embedder=None, configure="set role app")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="write_configure must be a callable"):
        AsyncToolStore("postgresql://nowhere/x", embedder=None, write_configure=1)  # type: ignore[arg-type]


def test_a_toolstore_refuses_an_async_configure(dsn: str) -> None:
    async def configure(conn: Any) -> None:
        await conn.execute("set application_name = 'x'")

    with pytest.raises(DatabaseError, match="configure returned an awaitable: a ToolStore's takes a plain function"):
        ToolStore(dsn, embedder=None, catalog="c", configure=configure)


def test_an_async_store_awaits_configure_and_calls_write_configure(dsn: str) -> None:
    names: list[str] = []

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("set application_name = 'reader'")
        names.append("read")

    def write_configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("set application_name = 'writer'")
        names.append("write")

    async def main() -> list[Any]:
        store = AsyncToolStore(
            dsn, embedder=HashingEmbedder(16), catalog="c", configure=configure, write_configure=write_configure
        )
        async with store:
            await store.upsert(TOOLS)
            ids = (await store.route("send a message", k=1)).ids
            async with store.db.connection() as conn:
                name = await (await conn.execute("show application_name")).fetchone()
        return [ids, name]

    assert asyncio.run(main()) == [["p.send"], ("reader",)]
    assert {"read", "write"} <= set(names)


def test_an_async_configure_that_raises_is_said_naming_it(dsn: str) -> None:
    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        raise RuntimeError("vault unreachable")

    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=None, catalog="c", configure=configure, write_configure=lambda c: None)
        await store.open()

    with pytest.raises(DatabaseError, match=r"configure\(conn\) raised RuntimeError: vault unreachable"):
        asyncio.run(main())


def test_an_async_store_needs_write_configure_with_configure() -> None:
    async def configure(conn: Any) -> None:
        pass

    with pytest.raises(InvalidInputError, match="AsyncToolStore's writes run on a pool of sync connections"):
        AsyncToolStore("postgresql://nowhere/x", embedder=None, configure=configure)


def test_a_configure_that_fails_later_is_said_by_the_call_that_waited(dsn: str) -> None:
    calls: list[int] = []

    def configure(conn: psycopg.Connection[Any]) -> None:
        calls.append(1)
        if len(calls) > 1:
            raise PermissionError("token expired")

    with ToolStore(dsn, embedder=None, catalog="c", configure=configure, timeout=1, pool_size=1) as store:
        with store.connection() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(dsn, autocommit=True) as admin:  # the pool's one connection ends: a new one is set up
            admin.execute("select pg_terminate_backend(%s)", [pid])
        with pytest.raises(DatabaseError) as caught:
            store.catalogs()
    assert str(caught.value) == (
        "no database connection within 1 s: a new one's setup failed: configure(conn) raised PermissionError: token "
        "expired"
    )
