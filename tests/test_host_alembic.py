"""README's recipe for a host application's own alembic history: one of its migrations calls
``toolstore.migrate(connection=op.get_bind())``, run by the host's ``alembic upgrade`` / ``downgrade``."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import create_engine, pool

from toolstore import AsyncToolStore, DatabaseError, HashingEmbedder, InvalidInputError, Tool, ToolStore, migrate
from toolstore._revisions import HEAD_REVISION, VERSION_TABLE

ENV = """
from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection)
with context.begin_transaction():
    context.run_migrations()
"""

MIGRATION = """
from alembic import op
import sqlalchemy as sa
import toolstore

revision = {revision!r}
down_revision = {down!r}
branch_labels = None
depends_on = None


def upgrade():
{upgrade}


def downgrade():
{downgrade}
"""

HOST_HISTORY = {  # revision -> (down_revision, upgrade, downgrade): the host's table, toolstore, another table
    "h1": (None, 'op.create_table("users", sa.Column("id", sa.Integer, primary_key=True))', 'op.drop_table("users")'),
    "h2": (
        "h1",
        f'toolstore.migrate(connection=op.get_bind(), schema="toolstore", revision="{HEAD_REVISION}")',  # README pins
        'toolstore.migrate(connection=op.get_bind(), schema="toolstore", revision="base", downgrade=True)',
    ),
    "h3": ("h2", 'op.create_table("orders", sa.Column("id", sa.Integer, primary_key=True))', 'op.drop_table("orders")'),
}


@pytest.fixture
def host(tmp_path: Path) -> Config:
    """The host application's alembic environment (its versions in tmp_path), connection given by the test."""
    (tmp_path / "versions").mkdir()
    (tmp_path / "env.py").write_text(ENV)
    (tmp_path / "script.py.mako").write_text("")
    for revision, (down, upgrade, downgrade) in HOST_HISTORY.items():
        text = MIGRATION.format(revision=revision, down=down, upgrade=f"    {upgrade}", downgrade=f"    {downgrade}")
        (tmp_path / "versions" / f"{revision}.py").write_text(text)
    cfg = Config()
    cfg.set_main_option("script_location", str(tmp_path))
    return cfg


def run(cfg: Config, dsn: str, upgrade: bool, revision: str) -> None:
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            (command.upgrade if upgrade else command.downgrade)(cfg, revision)
    finally:
        engine.dispose()


def placed(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select table_name, table_schema from information_schema.tables "
            "where table_name in ('users', 'orders', 'alembic_version', %s)",
            [VERSION_TABLE],
        )
        return dict(rows.fetchall())


def test_a_host_migration_after_toolstores_runs_in_the_hosts_schema(empty_dsn: str, host: Config) -> None:
    """toolstore's nested alembic run took the host's ``op`` (its next ``op.create_table`` failed, and the host's
    command ended in a KeyError) and left its schema first on the host's search_path (the host's next tables were
    created in toolstore's schema)."""
    run(host, empty_dsn, True, "head")
    assert placed(empty_dsn) == {
        "alembic_version": "public",
        "users": "public",
        "orders": "public",
        VERSION_TABLE: "toolstore",
    }
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("select version_num from public.alembic_version").fetchone() == ("h3",)
        assert conn.execute(f"select version_num from toolstore.{VERSION_TABLE}").fetchone() == (HEAD_REVISION,)
    with ToolStore(empty_dsn, embedder=HashingEmbedder(16), migrate=False) as store:
        store.upsert([Tool(id="a", name="send_email", description="Send an email")])
        assert store.route("send an email").ids == ["a"]

    run(host, empty_dsn, False, "base")  # the host's downgrade drops its own tables, toolstore's go with h2
    assert placed(empty_dsn) == {"alembic_version": "public", VERSION_TABLE: "toolstore"}
    run(host, empty_dsn, True, "head")
    assert placed(empty_dsn)["orders"] == "public"


OFFLINE_ENV = """
from alembic import context

context.configure(url="postgresql+psycopg://", literal_binds=True)
with context.begin_transaction():
    context.run_migrations()
"""


def test_the_hosts_offline_mode_is_refused_saying_why(host: Config, tmp_path: Path) -> None:
    """``alembic upgrade --sql`` (offline: op.get_bind() is a MockConnection, whose statements return nothing) ended in
    "AttributeError: 'NoneType' object has no attribute 'scalar_one'" from toolstore's code; migrate() refuses a
    connection that is no live SQLAlchemy Connection, saying why its migrations cannot be written out as SQL and what
    to run instead. No database is needed."""
    (tmp_path / "env.py").write_text(OFFLINE_ENV)
    with pytest.raises(InvalidInputError) as refused:
        command.upgrade(host, "head", sql=True)
    assert str(refused.value).startswith(
        "migrate(connection=...) needs a live SQLAlchemy Connection, got MockConnection (alembic's offline mode, --sql"
    )
    assert str(refused.value).endswith("run them online (alembic upgrade without --sql, or toolstore migrate)")
    not_sqlalchemy: Any = object()  # a driver's connection (psycopg's, the application's pool's): not what it runs on
    with pytest.raises(InvalidInputError, match=r"got builtins\.object; without one, give migrate\(\) the DSN$"):
        migrate(connection=not_sqlalchemy)


@pytest.fixture
def app_role(empty_dsn: str) -> Iterator[tuple[str, str]]:
    """A login role that may create its own tables in ``public`` but not schemas (no CREATE on the database), and a
    DSN logging in as it; pgvector is not installed."""
    role = f"ts_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
        conn.execute(sql.SQL("grant usage, create on schema public to {}").format(sql.Identifier(role)))
        database = conn.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        conn.execute(sql.SQL("revoke create on database {} from public").format(sql.Identifier(database)))
    yield role, make_conninfo(empty_dsn, user=role)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def test_a_role_that_may_not_create_the_schema_or_pgvector_is_told_what_the_administrator_runs(
    empty_dsn: str, host: Config, app_role: tuple[str, str]
) -> None:
    """A role without CREATE on the database read "permission denied to create extension "vector"" or "permission
    denied for database app", and from the host's alembic SQLAlchemy's ProgrammingError with its traceback: neither
    says what is missing nor what README says to do. The error names what is missing, the role, and the statement
    an administrator runs, and once run, the same migration succeeds."""
    role, app = app_role
    database = conninfo_to_dict(empty_dsn)["dbname"]
    with pytest.raises(DatabaseError) as refused:
        run(host, app, True, "head")
    assert str(refused.value).startswith(f"pgvector is not installed in database {database!r}")
    assert str(refused.value).endswith("an administrator runs `create extension vector` in it")
    assert "\n" not in str(refused.value)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("create extension vector")
    for migrating in (lambda: run(host, app, True, "head"), lambda: migrate(app, schema="agent_tools")):
        with pytest.raises(DatabaseError) as refused:
            migrating()
        assert f"does not exist and role {role!r} may not create it (permission denied for database" in str(
            refused.value
        )
        assert str(refused.value).endswith(f'authorization "{role}"`, and the role needs nothing more')
    assert placed(empty_dsn) == {}  # the host's own first table went with its failed upgrade
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create schema toolstore authorization {}").format(sql.Identifier(role)))
    run(host, app, True, "head")
    assert placed(empty_dsn)[VERSION_TABLE] == "toolstore"


def test_a_connection_of_another_driver_is_refused_naming_it() -> None:
    """An application's alembic on psycopg2 (``postgresql+psycopg2://``, what ``postgresql://`` means in SQLAlchemy
    2.0), asyncpg or an async env.py hands toolstore a live SQLAlchemy Connection whose driver connection is not
    psycopg's: the migration ended in "AttributeError: 'psycopg2.extensions.connection' object has no attribute
    'execute'". It is refused, naming the driver and the engine to run toolstore's migrations on. SQLite stands in for
    another driver here (no database needed)."""
    engine = create_engine("sqlite://")
    try:
        with engine.connect() as conn, pytest.raises(InvalidInputError) as refused:
            migrate(connection=conn)
    finally:
        engine.dispose()
    assert str(refused.value).startswith(
        "migrate(connection=...) needs a SQLAlchemy Connection of the sync psycopg driver, got one of sqlite+pysqlite:"
    )
    assert "postgresql+psycopg://" in str(refused.value)


def test_a_store_opened_inside_the_transaction_that_migrated_is_refused_rather_than_left_waiting(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application that ran ``migrate(connection=conn)`` in its transaction and opened a store before committing it
    hung for ever: the store, seeing no schema on its own connection, migrated too and waited for the migrations' lock,
    held by the transaction that waited for it (a grant likewise). That thread's call is refused, naming the cause;
    another thread's store waits for the commit as before and opens."""
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=20s")  # before the fix: a lock timeout after 20 s, not a hang
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(empty_dsn), poolclass=pool.NullPool)
    opened: list[object] = []

    def open_store() -> None:
        try:
            ToolStore(empty_dsn, embedder=None).close()
            opened.append("opened")
        except Exception as error:  # the test says what it was
            opened.append(error)

    other = threading.Thread(target=open_store)
    try:
        with engine.begin() as conn:
            migrate(connection=conn)
            refused = r"^toolstore's migration lock is held by this thread's own transaction, which ran migrate\("
            with pytest.raises(InvalidInputError, match=refused):
                ToolStore(empty_dsn, embedder=None)
            with pytest.raises(InvalidInputError, match=refused):
                migrate(empty_dsn)
            other.start()
    finally:
        engine.dispose()
        other.join(60)
    assert opened == ["opened"]
    with ToolStore(empty_dsn, embedder=HashingEmbedder(16)) as store:
        store.upsert([Tool(id="a", name="send_email", description="Send an email")])
        assert store.route("send an email").ids == ["a"]


def test_an_async_store_opened_inside_the_event_loops_migrating_transaction_is_refused(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async application that ran ``migrate(connection=conn)`` in its transaction in the event loop's thread and
    awaited ``AsyncToolStore.open()`` (which migrates in a worker thread) before committing hung for ever: the refusal
    knew only the thread that took the lock, not the worker thread the loop's coroutine waits for. The open is
    refused, naming the cause, as a grant through the store is; after the commit the store opens and writes."""
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=20s")  # before the fix: a lock timeout after 20 s, not a hang
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(empty_dsn), poolclass=pool.NullPool)
    refused = r"^toolstore's migration lock is held by this thread's own transaction, which ran migrate\("

    async def main() -> None:
        with engine.begin() as conn:
            migrate(connection=conn)
            with pytest.raises(InvalidInputError, match=refused):
                await AsyncToolStore(empty_dsn, embedder=None).open()
        async with AsyncToolStore(empty_dsn, embedder=HashingEmbedder(16), migrate=False) as store:
            with engine.begin() as conn:
                migrate(connection=conn)  # at head: takes the lock all the same
                with pytest.raises(InvalidInputError, match=refused):
                    await store.grant("pg_monitor")
            await store.upsert([Tool(id="a", name="send_email", description="Send an email")])
            assert (await store.route("send an email")).ids == ["a"]

    try:
        asyncio.run(main())
    finally:
        engine.dispose()
