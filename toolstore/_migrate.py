"""Alembic driven from code: toolstore's migrations in their own schema with their own version table."""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg import sql

from ._caller import caller_thread
from ._connect import DEFAULT_TIMEOUT, first_line
from ._dsn import resolve_dsn
from ._encoding import check_encoding
from ._errors import DatabaseError, InvalidInputError
from ._input import flag
from ._revisions import HEAD_REVISION, current_revision, is_above, is_below, newer_schema, past_head, quoted
from ._setup import search_path
from ._sql import query, resource_dir

if TYPE_CHECKING:  # alembic and SQLAlchemy load only when migrations run: importing toolstore stays fast
    from alembic.config import Config
    from sqlalchemy.engine import Connection

DEFAULT_SCHEMA = "toolstore"
_LOCK_KEY = 7_316_420_915  # pg_advisory_xact_lock key serialising concurrent migrations
# One alembic run at a time in this process: alembic's command installs module-level proxies (its `context` and
# `op`), which runs in two threads at once break for each other (KeyError 'config'); the advisory lock only
# serialises connections. The advisory lock is taken first (`_run`): a caller's transaction may hold it from an
# earlier migrate(connection=...), and a thread holding this lock while waiting for it would deadlock with that one.
_RUNNING = threading.Lock()
# The connections that took the migrations' lock, by backend pid: with the thread that took it, so that a migration
# (or a grant) of that thread on another connection, which would wait for the lock forever, is refused instead.
_HOLDERS: dict[int, tuple[int, weakref.ref[psycopg.Connection[Any]]]] = {}


def check_schema_name(schema: str) -> str:
    if not schema or len(schema) > 63 or not schema.replace("_", "a").isalnum() or schema[0].isdigit():
        raise InvalidInputError(f"schema name must be a plain identifier, got {schema!r}")
    if any("A" <= ch <= "Z" for ch in schema):  # migration 0015 reads current_schema()::regnamespace, which folds case
        raise InvalidInputError(f"schema name must be lower case (Postgres folds unquoted names), got {schema!r}")
    return schema


def prepare_connection(connection: Connection, schema: str) -> None:
    """Create the schema and pgvector if needed, and put the schema first on the search_path."""
    raw = connection.connection.driver_connection
    check_encoding(cast(psycopg.Connection[Any], raw))  # a caller's connection (an engine told client_encoding=utf8)
    take_lock(cast(psycopg.Connection[Any], raw))
    role, database = connection.exec_driver_sql(query("migrating_as")).one()  # for the errors below: read before
    _privileged(
        connection,
        query("create_vector_extension"),
        f"pgvector is not installed in database {database!r} and role {role!r} may not install it",
        "an administrator runs `create extension vector` in it",
    )
    # CREATE SCHEMA IF NOT EXISTS checks CREATE on the database before it looks: a role given only its own schema
    # (made by an administrator) would be refused. Only a missing schema is created.
    name = sql.Identifier(schema)
    if connection.exec_driver_sql(query("schema_oid"), {"schema": name.as_string(raw)}).scalar() is None:
        _privileged(
            connection,
            sql.SQL(query("create_schema")).format(schema=name).as_string(raw),
            f"schema {schema!r} does not exist and role {role!r} may not create it",
            f"an administrator runs `create schema {schema} authorization {sql.Identifier(role).as_string(raw)}`, "
            "and the role needs nothing more",
        )
    ext_schema = connection.exec_driver_sql(query("extension_schema")).scalar_one()
    connection.exec_driver_sql(query("set_search_path"), {"path": search_path(raw, schema, ext_schema)})


def _privileged(connection: Connection, statement: str, problem: str, fix: str) -> None:
    """Run ``statement``; where the role lacks the privilege it needs, a DatabaseError saying ``problem`` (the server's
    words after it) and ``fix``: SQLAlchemy's ProgrammingError, raised through the host's alembic, named neither what
    was missing nor who makes it."""
    from sqlalchemy import exc

    try:
        connection.exec_driver_sql(statement)
    except exc.DBAPIError as error:
        if not isinstance(error.orig, psycopg.errors.InsufficientPrivilege):
            raise
        raise DatabaseError(f"{problem} ({first_line(error.orig)}): {fix}") from error


def alembic_config(connection: Connection, schema: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resource_dir("migrations")))
    cfg.attributes["connection"] = connection
    cfg.attributes["schema"] = schema
    return cfg


def head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(resource_dir("migrations")))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def migrate(
    dsn: str | None = None,
    *,
    schema: str = DEFAULT_SCHEMA,
    revision: str = "head",
    downgrade: bool = False,
    connection: Connection | None = None,
) -> str | None:
    """Upgrade (or downgrade) toolstore's schema to ``revision``; the revision it is at afterwards (None: base).

    Pass ``connection`` (a SQLAlchemy connection, e.g. ``op.get_bind()`` in the host app's own alembic
    migration) to run inside the caller's transaction; otherwise ``dsn`` is used (the embedded server
    when it is None) and the migration commits on its own. An unknown revision (or a downgrade to ``head``, or an
    upgrade to a revision the schema is already past) is an InvalidInputError; a failing migration a DatabaseError,
    nothing changed.
    """
    check_schema_name(schema)
    if flag(downgrade, "downgrade") and revision == "head":
        raise InvalidInputError("a downgrade needs the revision to go down to (e.g. '0017' or 'base'), not 'head'")
    if connection is not None:
        return _run(_live(connection), schema, revision, downgrade)
    from sqlalchemy import create_engine, exc, pool

    target = resolve_dsn(dsn)
    engine = create_engine("postgresql+psycopg://", creator=lambda: _connect(target), poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            return _run(conn, schema, revision, downgrade)
    except psycopg.OperationalError as error:
        raise DatabaseError(f"cannot connect to the database: {first_line(error)}") from error
    except exc.DBAPIError as error:  # one transaction: nothing of the failed migration stays
        raise DatabaseError(
            f"migrating schema {schema!r} to {revision} failed, nothing changed: {first_line(error.orig or error)}"
        ) from error
    finally:
        engine.dispose()


def _connect(dsn: str) -> psycopg.Connection[Any]:
    """A connection for the migration's engine; a DatabaseError where the encoding is SQL_ASCII, before SQLAlchemy
    reads the server's version (as bytes there: a TypeError)."""
    conn = psycopg.connect(dsn)
    try:
        check_encoding(conn)
    except DatabaseError:
        conn.close()
        raise
    return conn


def _live(connection: Connection) -> Connection:
    """``connection`` when it is a live SQLAlchemy Connection on sync psycopg; else an InvalidInputError saying what to
    give (alembic's offline mode, ``--sql``, hands out a MockConnection, whose statements return nothing: toolstore
    cannot run there; toolstore runs on psycopg's connection, where psycopg2's or an async one has other methods)."""
    from sqlalchemy.engine import Connection as Live
    from sqlalchemy.engine.mock import MockConnection

    if isinstance(connection, MockConnection):
        raise InvalidInputError(
            "migrate(connection=...) needs a live SQLAlchemy Connection, got MockConnection (alembic's offline mode, "
            "--sql, gives no other): toolstore's migrations read the database as they run (the schema's revision, "
            "pgvector's schema), so they cannot be written out as a SQL script; run them online (alembic upgrade "
            "without --sql, or toolstore migrate)"
        )
    if not isinstance(connection, Live):
        kind = f"{type(connection).__module__}.{type(connection).__qualname__}"
        raise InvalidInputError(
            f"migrate(connection=...) needs a live SQLAlchemy Connection (op.get_bind() in an alembic migration), got "
            f"{kind}; without one, give migrate() the DSN"
        )
    if not isinstance(connection.connection.driver_connection, psycopg.Connection):  # psycopg2's, asyncpg's, async
        dialect = connection.dialect
        driver = f"{dialect.name}+{dialect.driver}{' (async)' if dialect.is_async else ''}"
        raise InvalidInputError(
            f"migrate(connection=...) needs a SQLAlchemy Connection of the sync psycopg driver, got one of {driver}: "
            "toolstore's migrations run on the psycopg connection under it; run your alembic on a sync engine of "
            "postgresql+psycopg:// (alembic's default env.py; psycopg comes with toolstore, and your application's "
            "engine may keep its driver)"
        )
    return connection


def _run(connection: Connection, schema: str, revision: str, downgrade: bool) -> str | None:
    from alembic import command
    from alembic.util import CommandError

    cfg = alembic_config(connection, schema)
    raw = cast("psycopg.Connection[Any]", connection.connection.driver_connection)  # psycopg's, under SQLAlchemy's
    take_lock(raw)  # before _RUNNING: see there
    # prepare_connection puts the schema first on the search_path for the rest of the transaction; in a host's
    # transaction, the host's next migrations would create their tables in toolstore's schema: it goes back after.
    path = connection.exec_driver_sql(query("search_path")).scalar_one()
    before = current_revision(raw, schema)
    newer_schema(before, schema)
    if past_head(revision):  # alembic: "Can't locate revision identified by"
        raise InvalidInputError(
            f"cannot migrate schema {schema!r} to {revision!r}: this toolstore's newest revision is {HEAD_REVISION}; "
            "upgrade toolstore to go past it"
        )
    if not downgrade and before is not None and is_below(revision, before):  # alembic: a silent no-op
        raise InvalidInputError(
            f"schema {schema!r} is at {before}, past {quoted(revision)}: to go down to it, downgrade (--downgrade)"
        )
    if downgrade and is_above(revision, before):  # alembic: "Destination ... is not a valid downgrade target ..."
        at = "is not migrated" if before is None else f"is at {before}"
        raise InvalidInputError(
            f"schema {schema!r} {at}, below {quoted(revision)}: a downgrade cannot go up to it; to upgrade, leave out "
            "--downgrade"
        )
    if downgrade and before is None and revision == "base":  # nothing to take down: a misspelt schema stays unmade
        return None
    try:
        with _RUNNING, _host_alembic_kept():
            if downgrade:
                command.downgrade(cfg, revision)
            else:
                command.upgrade(cfg, revision)
    except CommandError as error:  # an unknown or unreachable revision: nothing ran
        newer_schema(current_revision(raw, schema), schema)
        raise InvalidInputError(f"cannot migrate schema {schema!r} to {revision!r}: {error}") from error
    except AssertionError as error:  # alembic asserts on a revision it cannot resolve ('', '@', 'head+1' at head)
        raise InvalidInputError(
            f"cannot migrate schema {schema!r} to {revision!r}: alembic cannot resolve that revision "
            "(give 'head', a revision such as '0017', a step such as '+1' or '-2', or 'base')"
        ) from error
    after = current_revision(raw, schema)
    # Tables it created or remade have no privileges for the grants yet, and privileges an older toolstore granted
    # may be wider: at head, the owner sets them again (a granted role's migration changes nothing). What a grant
    # carries changes only with a revision (tests/test_access.py), which a store opened with migrate=True applies too.
    if after == HEAD_REVISION and (after != before or raw.execute(query("sets_privileges")).fetchone()[0]):  # type: ignore[index]
        for (role,) in raw.execute(query("granted_roles")).fetchall():
            set_privileges(raw, schema, role)
    connection.exec_driver_sql(query("set_search_path"), {"path": path})
    return after


@contextmanager
def _host_alembic_kept() -> Iterator[None]:
    """Give back a host's alembic run what toolstore's nested one takes: called from the host's migration
    (``migrate(connection=op.get_bind())``), alembic's command installs its own ``op`` and ``context`` module
    proxies over the host's and deletes them when done, so the host's next ``op.create_table`` found none and its
    command ended in a KeyError. The host's proxies (``_proxy`` of each module, None outside a run) go back."""
    from alembic import context, op

    saved = [proxy for proxy in (getattr(op, "_proxy", None), getattr(context, "_proxy", None)) if proxy is not None]
    try:
        yield
    finally:
        for proxy in saved:
            proxy._install_proxy()


def privileges_lock(conn: psycopg.Connection[Any]) -> None:
    """Inside a transaction: the migrations' lock, held until it ends, which every change of the grants' privileges
    takes first (a migration, a grant or revoke): two GRANTs on one table at once fail ("tuple concurrently
    updated")."""
    take_lock(conn)


def take_lock(conn: psycopg.Connection[Any]) -> None:
    """The migrations' lock, held until ``conn``'s transaction ends; an InvalidInputError, rather than a wait that
    never ends, when this thread's own open transaction on another connection holds it (``migrate(connection=...)``
    in an application's transaction, then a store opened, which migrates, or a grant, before that one commits)."""
    if not conn.execute(query("migration_lock_try"), {"key": _LOCK_KEY}).fetchone()[0]:  # type: ignore[index]
        holder = conn.execute(query("migration_lock_holder"), {"key": _LOCK_KEY}).fetchone()
        held = _HOLDERS.get(holder[0]) if holder else None
        own = held[1]() if held and held[0] == caller_thread() else None
        if own is not None and not own.closed and own.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
            raise InvalidInputError(
                "toolstore's migration lock is held by this thread's own transaction, which ran "
                "migrate(connection=...) and has not ended: this call, on another connection, would wait for it "
                "forever; commit that transaction first"
            )
        conn.execute(query("migration_lock"), {"key": _LOCK_KEY})
    for pid in [pid for pid, (_, held_by) in _HOLDERS.items() if held_by() is None]:  # closed and gone since
        _HOLDERS.pop(pid, None)
    _HOLDERS[conn.info.backend_pid] = (caller_thread(), weakref.ref(conn))


def set_privileges(conn: psycopg.Connection[Any], schema: str, role: str) -> None:
    """Table privileges as ``role``'s grants require (inside the caller's transaction, ``schema`` first on its
    search_path): granting and revoking set them (``_access``), and so does every migration to head, for every granted
    role (one that changes the revision, or the owner's at head already): a table it creates (the session log,
    anchors, a table remade) is covered, and so is what an older toolstore granted differently. A change of what a grant
    carries comes with a revision (``tests/test_access.py``), so a store opened with ``migrate=True``, which sets them
    only when it migrates, applies it too."""
    access = conn.execute(query("role_access"), {"role": role}).fetchone()
    reads, writes = access if access else (False, False)
    names = {"schema": sql.Identifier(schema), "role": sql.Identifier(role)}
    conn.execute(sql.SQL(query("privileges_revoke")).format(**names))
    if reads:
        conn.execute(sql.SQL(query("privileges_read")).format(**names))
    if writes:
        conn.execute(sql.SQL(query("privileges_write")).format(**names))


def ensure_schema(dsn: str, schema: str, *, auto: bool, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Migrate ``schema`` to head when behind (``auto``), else raise DatabaseError naming the revision."""
    revision = schema_revision(dsn, schema, timeout=timeout)
    if revision == HEAD_REVISION:
        return
    newer_schema(revision, schema)
    if not auto and revision is None:  # the application migrated another schema, perhaps: the store names the default
        raise DatabaseError(
            f"toolstore schema {schema!r} was never migrated and the store was told not to (migrate=False): give it "
            f"the schema you migrated (schema=...), or migrate this one (`toolstore migrate`, toolstore.migrate())"
        )
    if not auto:
        raise DatabaseError(
            f"toolstore schema {schema!r} is at {revision}, not {HEAD_REVISION}: run `toolstore migrate` (or "
            "toolstore.migrate(), from a migration of your own alembic history too)"
        )
    migrate(dsn, schema=schema)


def schema_revision(dsn: str, schema: str, *, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """The revision ``schema`` is at, read on a connection of its own (None: never migrated, or no such schema); a
    DatabaseError where the encoding is SQL_ASCII (its text bytes)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, math.ceil(timeout))) as conn:
            check_encoding(conn)
            return current_revision(conn, schema)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {first_line(exc)}") from exc
