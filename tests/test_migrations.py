"""Migrations: empty -> head -> base -> head, schema equals the models, coexistence with a host app."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, pool, text

from toolstore import DatabaseError, HashingEmbedder, SessionCall, Tool, ToolStore, migrate, parse_tools
from toolstore._migrate import HEAD_REVISION, head_revision
from toolstore._revisions import VERSION_TABLE

from schema_models import metadata

TABLES = {
    "catalogs",
    "anchors",
    "catalog_grants",
    "tenant_roles",
    "mcp_upstreams",
    "tools",
    "postings",
    "lexeme_stats",
    "field_stats",
    "tool_vectors",
    "intent_examples",
    "embedding_cache",
    "sessions",
    "session_calls",
    "session_seen_calls",
    "tool_transitions",
}


def tables(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select table_name from information_schema.tables where table_schema = %s", [schema])
        return {r[0] for r in rows}


def engine_for(dsn: str, schema: str = "toolstore") -> Any:
    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(dsn)
        conn.execute("select set_config('search_path', %s, false)", [f"{schema}, public"])
        conn.commit()
        return conn

    return create_engine("postgresql+psycopg://", creator=connect, poolclass=pool.NullPool)


def test_head_constant_matches_alembic() -> None:
    assert HEAD_REVISION == head_revision()


def test_upgrade_downgrade_reupgrade(empty_dsn: str) -> None:
    migrate(empty_dsn)
    assert tables(empty_dsn, "toolstore") == TABLES | {VERSION_TABLE}
    migrate(empty_dsn, revision="base", downgrade=True)
    assert tables(empty_dsn, "toolstore") == {VERSION_TABLE}
    migrate(empty_dsn)
    migrate(empty_dsn)  # idempotent at head
    assert tables(empty_dsn, "toolstore") == TABLES | {VERSION_TABLE}
    with ToolStore(empty_dsn, embedder=HashingEmbedder(16)) as store:
        store.upsert([Tool(id="a", name="send_email", description="Send an email")])
        assert store.route("send an email").ids == ["a"]


def test_0021_fills_each_sessions_last_call_id_from_its_log(dsn: str) -> None:
    """Down to 0020 (the column goes) and up again: each session's last call id comes back from its log, so a prune
    by age that empties the session keeps it and the calls are not logged again."""
    from datetime import timedelta

    from toolstore import SessionCall

    tools = [Tool(id="a", name="a", description="first"), Tool(id="b", name="b", description="second")]
    calls = [SessionCall("a", call_id="x1"), SessionCall("b", call_id="x2")]
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        store.upsert(tools)
        store.record_calls("s", [*calls, "a"])
        store.record_calls("plain", ["a"])
    migrate(dsn, revision="0020", downgrade=True)
    migrate(dsn, revision="0021")
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select session_id, last_call_id from toolstore.sessions order by 1").fetchall()
    assert rows == [("plain", None), ("s", "x2")]
    migrate(dsn)
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        assert store.prune_sessions(older_than=timedelta(0)) == {"calls": 4, "sessions": 1}
        assert store.record_calls("s", calls) == 0 and store.session_log("s") == []


def test_0024_fills_each_sessions_seen_calls_from_its_log_and_last_call_id(dsn: str) -> None:
    """Down to 0023 (seen_calls goes, last_call_id comes back from the log) and up again: a session remembers the
    call ids of its log (the newest 64) and its last call id, which a prune by age left alone, so a list holding any
    of them logs nothing again; a session that saw none is dropped by a trim as before. The older call ids of its log
    are remembered too, by 0025 (``session_seen_calls``, filled from the log)."""
    from datetime import timedelta

    from toolstore import SessionCall

    with ToolStore(dsn, embedder=None, catalog="c") as store:
        store.upsert([Tool(id="a", name="a", description="first")])
        store.set_session_retention(max_calls=None)
        store.record_calls("long", [SessionCall("a", call_id=f"x{i}") for i in range(70)])
        store.record_calls("trimmed", [SessionCall("a", call_id=f"t{i}") for i in range(3)])
        store.record_calls("plain", ["a"])
    migrate(dsn, revision="0023", downgrade=True)
    with psycopg.connect(dsn, autocommit=True) as conn:  # as 0023 leaves a session whose log a prune by age emptied
        conn.execute("delete from toolstore.session_calls where session_id = 'trimmed'")
        conn.execute("update toolstore.sessions set last_call_id = 't2' where session_id = 'trimmed'")
    migrate(dsn)
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        assert store.new_calls("trimmed", ["t1", "t2", "t3"]) == ["t3"]
        assert store.prune_sessions(older_than=timedelta(0)) == {"calls": 71, "sessions": 1}  # plain saw no call id
        assert store.new_calls("long", ["x4", "x5"]) == []  # older than the newest 64: 0025 filled them from the log
        with store.connection() as conn:
            seen = conn.execute("select session_id, cardinality(seen_calls) from sessions order by 1").fetchall()
        assert seen == [("long", 64), ("trimmed", 1)]  # trimmed: its last_call_id, its log gone
        assert store.new_calls("long", ["x5", "x6", "x7"]) == [] and store.new_calls("trimmed", ["t0", "t2"]) == []
        assert sorted(r["session_id"] for r in store.sessions()) == ["long", "trimmed"]


def test_the_previous_releases_session_writes_run_at_head(dsn: str) -> None:
    """A rolling upgrade runs the release before 0024 beside this one on the upgraded schema: its session-log statements
    (as it sends them, below) read and set ``last_call_id`` only, which 0024 therefore keeps, and which this release
    sets and reads too: a session it wrote and a trim emptied keeps its row and memory under the previous release's
    rules, and a call id the previous release logged counts as seen here after a trim."""
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        store.upsert([Tool(id="a", name="a", description="first")])
        store.record_calls("s", [SessionCall("a", call_id="x1")])
        store.record_calls("t", [SessionCall("a", call_id="y1")])
        store.prune_sessions(older_than=timedelta(0))  # both logs emptied: the rows stay, holding what they saw
        catalog = store.info().id
    params = {"catalog": catalog, "session": "s"}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path to toolstore")
        kept = conn.execute(  # drop_empty_sessions before 0024, of a prune by age
            "delete from sessions s where s.catalog_id = %(catalog)s and s.session_id = any (%(sessions)s::text[])"
            " and (%(every)s::boolean or s.last_call_id is null) and not exists (select 1 from session_calls c"
            " where c.catalog_id = s.catalog_id and c.session_id = s.session_id) returning s.session_id",
            {"catalog": catalog, "sessions": ["s", "t"], "every": False},
        ).fetchall()
        assert kept == []
        conn.execute(  # advance_session before 0024
            "update sessions set last_seq = %(last_seq)s,"
            " last_call_id = coalesce(%(last_call_id)s::text, last_call_id), updated_at = now()"
            " where catalog_id = %(catalog)s and session_id = %(session)s",
            {**params, "last_seq": 2, "last_call_id": "x2"},
        )
        seen = conn.execute(  # seen_call_ids before 0024
            "select call_id from session_calls where catalog_id = %(catalog)s and session_id = %(session)s"
            " and call_id = any (%(call_ids)s::text[]) union select last_call_id from sessions"
            " where catalog_id = %(catalog)s and session_id = %(session)s"
            " and last_call_id = any (%(call_ids)s::text[])",
            {**params, "call_ids": ["x1", "x2", "x3"]},
        ).fetchall()
        conn.execute(  # a session only the previous release wrote: a call, its last call id, no seen_calls
            "insert into sessions (catalog_id, session_id, last_seq, last_call_id)"
            " values (%(catalog)s, 'old', 1, 'z1')",
            {"catalog": catalog},
        )
        conn.execute(
            "insert into session_calls (catalog_id, session_id, seq, tool_id, ok, called_at, call_id)"
            " values (%(catalog)s, 'old', 1, 'a', true, now(), 'z1')",
            {"catalog": catalog},
        )
    assert [r[0] for r in seen] == ["x2"]  # x1 went with the prune; x2 is the last call id logged
    with ToolStore(dsn, embedder=None, catalog="c") as store:  # x2, logged by the previous release and trimmed since
        assert store.new_calls("s", ["x1", "x2", "x3"]) == ["x3"] and store.new_calls("t", ["y1", "y2"]) == ["y2"]
        store.prune_sessions(older_than=timedelta(0))  # this release's trim keeps the previous release's memory too
        assert store.new_calls("old", ["z1", "z2"]) == ["z2"]


def test_0022_marks_the_tools_each_upstream_synced_before(dsn: str) -> None:
    """Down to 0021 (tools.upstream goes) and up again: the MCP tools of a provider with an upstream recorded count as
    synced by it, so an upgraded catalog's prune still removes what the server no longer offers; a tool imported by
    hand in another format under that provider, and the tools of a provider never synced, do not."""
    from toolstore._mcp_sync import McpListing, Upstream, sync_listing

    def mcp_tool(name: str) -> dict[str, Any]:
        return {"name": name, "description": f"{name} things", "inputSchema": {"type": "object"}}

    upstream = Upstream("stdio", command="weather-server")
    hand = {"type": "function", "function": {"name": "radar", "description": "Rain radar", "parameters": {}}}
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        sync_listing(store, McpListing("weather", [mcp_tool("a"), mcp_tool("b")], upstream))
        store.upsert(parse_tools([hand], provider="weather"))
        store.upsert(parse_tools({"tools": [mcp_tool("c")]}, provider="docs"))
    migrate(dsn, revision="0021", downgrade=True)
    migrate(dsn)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select id, upstream from toolstore.tools order by id").fetchall()
    assert rows == [("docs.c", None), ("weather.a", "weather"), ("weather.b", "weather"), ("weather.radar", None)]
    with ToolStore(dsn, embedder=None, catalog="c") as store:
        report = sync_listing(store, McpListing("weather", [mcp_tool("a")], upstream), prune=True)
        assert report.removed == ["weather.b"]


def test_an_unknown_revision_is_invalid_input_and_changes_nothing(dsn: str) -> None:
    from toolstore import InvalidInputError

    with pytest.raises(InvalidInputError, match="to 'nope': Can't locate revision identified by 'nope'"):
        migrate(dsn, revision="nope")
    with pytest.raises(InvalidInputError, match="a downgrade needs the revision to go down to"):
        migrate(dsn, downgrade=True)  # to head: it did nothing and said nothing
    past = f"{int(HEAD_REVISION) + 1:04d}"  # a host's migration pinned to a newer release's revision: alembic's wording
    for downgrade in (False, True):
        with pytest.raises(InvalidInputError) as raised:
            migrate(dsn, revision=past, downgrade=downgrade)
        assert str(raised.value) == (
            f"cannot migrate schema 'toolstore' to {past!r}: this toolstore's newest revision is {HEAD_REVISION}; "
            "upgrade toolstore to go past it"
        )
    with psycopg.connect(dsn) as conn:
        assert conn.execute(f"select version_num from toolstore.{VERSION_TABLE}").fetchone() == (HEAD_REVISION,)


def test_schema_from_migrations_matches_models(dsn: str) -> None:
    engine = engine_for(dsn)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_name": lambda name, kind, _: name != VERSION_TABLE}
        )
        diff = compare_metadata(context, metadata)
    engine.dispose()
    assert diff == []


def test_models_differ_from_a_changed_schema(dsn: str) -> None:
    """The comparison above can fail: a column the models do not know about shows up."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("alter table toolstore.tools add column surprise text")
    engine = engine_for(dsn)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert any("surprise" in str(d) for d in diff)


def test_coexists_with_host_alembic_and_custom_schema(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("create table public.alembic_version (version_num varchar(32) primary key)")
        conn.execute("insert into public.alembic_version values ('host_app_rev_1')")
    migrate(empty_dsn, schema="agent_tools")
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("select version_num from public.alembic_version").fetchall() == [("host_app_rev_1",)]
        version = conn.execute(f"select version_num from agent_tools.{VERSION_TABLE}").fetchall()  # noqa: S608
        assert version == [(HEAD_REVISION,)]
    with ToolStore(empty_dsn, embedder=None, schema="agent_tools") as store:
        store.upsert([Tool(id="x", name="get_weather", description="Weather forecast for a city")])
        assert store.route("weather in Paris").ids == ["x"]


def test_pgvector_in_a_schema_of_its_own_out_of_public(empty_dsn: str) -> None:
    """README's advice for Postgres 14 and older (where any role may create in ``public``): pgvector installed in a
    schema only its owner writes, and ``public`` closed. toolstore finds the extension there: its functions' pinned
    search_paths name that schema (those that use pgvector), never ``public``, and routes use the vectors."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("create schema ext")
        conn.execute("create extension vector schema ext")
        conn.execute("revoke create on schema public from public")
    migrate(empty_dsn)
    with ToolStore(empty_dsn, embedder=HashingEmbedder(32), catalog="c") as store:
        store.upsert([Tool(id=f"t.{i}", name=f"tool_{i}", description=f"does thing {i}") for i in range(5)])
        assert store.route("does thing 3").dense_used
    with psycopg.connect(empty_dsn) as conn:
        paths = {
            p
            for (config,) in conn.execute(
                "select proconfig from pg_proc where pronamespace = 'toolstore'::regnamespace and proconfig is not null"
            )
            for p in config
            if p.startswith("search_path=")
        }
    assert any('"ext"' in p for p in paths) and not any("public" in p for p in paths), paths


def test_runs_inside_the_host_transaction(empty_dsn: str) -> None:
    """What a host app's own alembic migration does: ``toolstore.migrate(connection=op.get_bind())``."""
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(empty_dsn), poolclass=pool.NullPool)
    with engine.connect() as conn:
        trans = conn.begin()
        conn.execute(text("create table host_table (id int)"))
        migrate(connection=conn, schema="toolstore")
        trans.rollback()  # the host's rollback takes toolstore's schema with it
    engine.dispose()
    assert tables(empty_dsn, "toolstore") == set()


def test_store_refuses_an_unmigrated_database_when_told_not_to_migrate(empty_dsn: str) -> None:
    from toolstore import DatabaseError

    with pytest.raises(DatabaseError, match="toolstore migrate"):
        ToolStore(empty_dsn, embedder=None, migrate=False)


def test_a_store_of_a_schema_never_migrated_says_to_name_the_one_migrated(empty_dsn: str) -> None:
    """An application that migrated toolstore into a schema of its choosing from its own alembic history, then opened
    ``ToolStore(dsn, migrate=False)``, read "toolstore schema 'toolstore' is at nothing, not <head>: run `toolstore
    migrate`", which would make a second, empty schema; the error says the schema was never migrated and to give
    the store the one migrated first. A schema behind says its revision and how to migrate it."""
    from toolstore import DatabaseError

    migrate(empty_dsn, schema="agent_tools", revision="0028")
    with pytest.raises(DatabaseError) as refused:
        ToolStore(empty_dsn, embedder=None, migrate=False)
    assert str(refused.value).startswith("toolstore schema 'toolstore' was never migrated and the store was told not")
    assert "give it the schema you migrated (schema=...)" in str(refused.value)
    with pytest.raises(DatabaseError, match=rf"^toolstore schema 'agent_tools' is at 0028, not {HEAD_REVISION}: run `"):
        ToolStore(empty_dsn, embedder=None, schema="agent_tools", migrate=False)


def test_a_failing_migration_is_one_clean_error_and_changes_nothing(empty_dsn: str) -> None:
    from toolstore import DatabaseError

    migrate(empty_dsn, revision="0005")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:  # an object in the way of migration 0006
        conn.execute("create table toolstore.sessions (x int)")
    with pytest.raises(DatabaseError, match=r"to head failed, nothing changed: relation \"sessions\" already exists"):
        migrate(empty_dsn)
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute(f"select version_num from toolstore.{VERSION_TABLE}").fetchone() == ("0005",)
        assert conn.execute("select to_regclass('toolstore.session_calls')").fetchone() == (None,)


def test_threads_opening_stores_on_an_unmigrated_database_all_succeed(empty_dsn: str) -> None:
    """alembic's commands install module-level proxies: two runs at once in one process broke each other."""
    errors: list[str] = []

    def open_one() -> None:
        try:
            ToolStore(empty_dsn, embedder=None, catalog="c").close()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert tables(empty_dsn, "toolstore")


def test_a_schema_newer_than_the_code_says_so(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"update toolstore.{VERSION_TABLE} set version_num = '0999'")
    newer = f"schema 'toolstore' is at 0999, newer than this toolstore \\({HEAD_REVISION}\\): upgrade toolstore"
    for open_ in (lambda: ToolStore(dsn, embedder=None), lambda: ToolStore(dsn, embedder=None, migrate=False)):
        with pytest.raises(DatabaseError, match=newer):
            open_()
    with pytest.raises(DatabaseError, match=newer):
        migrate(dsn)


def test_the_process_lock_never_waits_while_holding_what_a_callers_transaction_waits_for(empty_dsn: str) -> None:
    """A host migrating two schemas in one transaction (migrate(connection=...) twice) holds the advisory lock
    between them; a store opening in another thread meanwhile must not take the process lock and then wait for it,
    or the host's second migrate waits for the process lock: a deadlock Postgres cannot see."""
    import time

    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(empty_dsn), poolclass=pool.NullPool)
    first_done, host_done = threading.Event(), threading.Event()
    errors: list[str] = []

    def host() -> None:
        try:
            with engine.begin() as conn:
                migrate(connection=conn, schema="app_a")
                first_done.set()
                time.sleep(2)  # the opener now waits for the advisory lock
                migrate(connection=conn, schema="app_b")
            host_done.set()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"host: {type(exc).__name__}: {exc}")

    def opener() -> None:
        first_done.wait(60)
        try:
            ToolStore(empty_dsn, embedder=None, schema="other").close()
        except Exception as exc:  # noqa: BLE001
            errors.append(f"opener: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=host, daemon=True), threading.Thread(target=opener, daemon=True)]
    for thread in threads:
        thread.start()
    finished = host_done.wait(30)
    if not finished:  # break the deadlock: cancel the backend waiting for the advisory lock
        with psycopg.connect(empty_dsn, autocommit=True) as admin:
            admin.execute(
                "select pg_cancel_backend(pid) from pg_locks where locktype = 'advisory' and not granted"
                " and database = (select oid from pg_database where datname = current_database())"
            )
    for thread in threads:
        thread.join(60)
    engine.dispose()
    assert finished and errors == [], errors


def test_a_role_that_owns_only_its_schema_migrates_it(empty_dsn: str) -> None:
    """A locked-down database: an administrator made the schema (owned by the application's role) and pgvector,
    and the role may not CREATE in the database. ``create schema if not exists`` checks that privilege before it
    looks, so the migration was refused with "permission denied for database"."""
    import uuid

    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    role = f"ts_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
        conn.execute("create extension vector")
        conn.execute(sql.SQL("create schema agent_tools authorization {}").format(sql.Identifier(role)))
        database = conn.execute("select current_database()").fetchone()[0]
        conn.execute(sql.SQL("revoke create on database {} from public").format(sql.Identifier(database)))
    try:
        app = make_conninfo(empty_dsn, user=role)
        migrate(app, schema="agent_tools")
        with ToolStore(app, embedder=HashingEmbedder(16), schema="agent_tools", migrate=False) as store:
            store.upsert([Tool(id="a", name="send_email", description="Send an email")])
            assert store.route("send an email").ids == ["a"]
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def test_a_downgrade_to_base_of_a_schema_never_migrated_creates_nothing(empty_dsn: str) -> None:
    """migrate --schema typo --revision base --downgrade created the schema it was to take down (with pgvector and
    alembic's version table) and said 'revision: null' as if it had downgraded one; there is nothing to take down, so
    nothing is made, and a downgrade to base stays idempotent."""
    assert migrate(empty_dsn, schema="never_made", revision="base", downgrade=True) is None
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("select count(*) from pg_namespace where nspname = 'never_made'").fetchone() == (0,)
        assert conn.execute("select count(*) from pg_extension where extname = 'vector'").fetchone() == (0,)
    migrate(empty_dsn, schema="made")
    assert migrate(empty_dsn, schema="made", revision="base", downgrade=True) is None
    assert migrate(empty_dsn, schema="made", revision="base", downgrade=True) is None
    assert tables(empty_dsn, "made") == {VERSION_TABLE}


def test_a_schema_name_with_capitals_is_refused_before_anything_runs(empty_dsn: str) -> None:
    """A name with capitals passed the check and failed half-way (migration 0015 reads the schema back through
    ``current_schema()::regnamespace``, which folds it: 'schema "agenttools" does not exist')."""
    from toolstore import InvalidInputError

    for open_ in (lambda: migrate(empty_dsn, schema="AgentTools"), lambda: ToolStore(empty_dsn, schema="AgentTools")):
        with pytest.raises(InvalidInputError, match="schema name must be lower case"):
            open_()
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("select count(*) from pg_namespace where nspname ilike 'agenttools'").fetchone() == (0,)
    migrate(empty_dsn, schema="agent_tools_2")  # lower case, digits and underscores are fine
    assert tables(empty_dsn, "agent_tools_2") == TABLES | {VERSION_TABLE}


def test_a_store_whose_schema_was_migrated_down_under_it_says_so(dsn: str) -> None:
    """An application's ``alembic downgrade`` (or ``toolstore migrate --revision base --downgrade``) while its stores
    were open left their next route reading "database error: function route_catalog(smallint, smallint) does not
    exist", toolstore's own function named as if the call were wrong; it says the schema has no tables and to migrate
    it again, on a ToolStore and an AsyncToolStore, after a downgrade and after the schema was dropped. Once migrated
    again, the store routes (its catalog gone with the tables: the next write makes it again)."""
    import asyncio

    from toolstore import AsyncToolStore

    gone = r"^toolstore schema 'toolstore' has no tables \(migrated down or dropped while the store was open\): migrate"
    tool = Tool(id="a", name="send_email", description="Send an email")

    async def scenario() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(16), migrate=False) as async_store:
            with ToolStore(dsn, embedder=HashingEmbedder(16), migrate=False) as store:
                store.upsert([tool])
                assert (await async_store.route("send an email")).ids == store.route("send an email").ids == ["a"]
                for take_down in ("downgrade", "drop schema"):
                    if take_down == "downgrade":
                        migrate(dsn, revision="base", downgrade=True)
                    else:
                        with psycopg.connect(dsn, autocommit=True) as conn:
                            conn.execute("drop schema toolstore cascade")
                    with pytest.raises(DatabaseError, match=gone):
                        store.route("send an email")
                    with pytest.raises(DatabaseError, match=gone):
                        store.upsert([tool])
                    with pytest.raises(DatabaseError, match=gone):
                        await async_store.route("send an email")
                    migrate(dsn)
                    store.upsert([tool])
                    assert (await async_store.route("send an email")).ids == store.route("send an email").ids == ["a"]

    asyncio.run(scenario())
