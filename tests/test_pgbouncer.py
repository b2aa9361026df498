"""A store behind PgBouncer in transaction pooling mode (``transaction_pooling=True``): each transaction may run on
another server connection, which may hold no prepared statement and none of the store's session, and a session setting
or a prepared statement left on a server connection reaches the pooler's other clients."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from pgbouncer import BINARY, MISSING, pgbouncer, through
from psycopg import sql
from psycopg.conninfo import make_conninfo

from toolstore import (
    AsyncToolStore,
    DatabaseError,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    Judgement,
    Tool,
    ToolStore,
    TransactionPoolingError,
    UnknownCatalogError,
    _indexes,
    migrate,
)
from toolstore._eval import evaluate, select_configs
from toolstore._migrate import HEAD_REVISION
from toolstore.cli import cli

pytestmark = pytest.mark.skipif(BINARY is None, reason=MISSING)

TOOLS = [
    Tool(id=f"p.t{i:02d}", name=f"t{i:02d}", provider="p", description=f"{word} the {thing}")
    for i, (word, thing) in enumerate(
        (word, thing)
        for word in ("send", "read", "delete", "archive", "list")
        for thing in ("message", "invoice", "ticket", "calendar event", "file", "contact")
    )
]


#: A login role of the test server (cluster-wide: one per xdist worker) that PgBouncer lets in too.
TENANT = f"ts_pool_tenant_{os.environ.get('PYTEST_XDIST_WORKER', '')}"


@pytest.fixture(scope="module")
def bouncer(server_dsn: str) -> Iterator[tuple[str, int]]:
    with pgbouncer(server_dsn, users=(TENANT,)) as address:
        yield address


@pytest.fixture(scope="module")
def session_bouncer(server_dsn: str) -> Iterator[tuple[str, int]]:
    """A PgBouncer in session mode (``pool_mode = session``): a client keeps its server connection."""
    with pgbouncer(server_dsn, mode="session") as address:
        yield address


@pytest.fixture
def tenant_role(server_dsn: str) -> Iterator[str]:
    """:data:`TENANT`, made for the test (set up before the test's database, so dropped after it)."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(TENANT)))
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(TENANT)))
    yield TENANT
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(TENANT)))


@pytest.fixture
def pooled(dsn: str, bouncer: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's database through PgBouncer; its catalogs' vector partitions get an HNSW index from 10 rows on (the
    build, in a transaction there, is run by these tests' writes)."""
    monkeypatch.setattr(_indexes, "HNSW_MIN_ROWS", 10)
    return through(dsn, bouncer)


def session_state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """What a store could leave on the server connection ``conn`` (in a transaction) runs on: the search_path, the
    tenant ('' once a transaction there set it locally), prepared statements."""
    row = conn.execute(
        "select current_setting('search_path'), coalesce(current_setting('toolstore.tenant', true), ''), "
        "(select count(*) from pg_prepared_statements)"
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_a_store_behind_a_transaction_pooler_routes_writes_and_logs_sessions(pooled: str, dsn: str) -> None:
    with psycopg.connect(pooled, autocommit=True) as fresh:
        untouched = session_state(fresh)
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="c", transaction_pooling=True) as store:
        store.upsert(TOOLS, examples=[IntentExample("p.t00", "ping the team")])
        first = store.route("send the message", k=3).ids
        with psycopg.connect(pooled, autocommit=True) as other:
            other.execute("begin")  # takes the server connection the store ran its last transaction on
            assert session_state(other) == untouched
            for _ in range(7):  # on other server connections; past psycopg's prepare threshold (5)
                assert store.route("send the message", k=3).ids == first
            assert store.upsert([Tool(id="p.new", name="new", provider="p", description="brand new")]).inserted
            assert store.add_examples([IntentExample("p.t01", "read what came in")]) == 1
            assert store.record_calls("chat", ["p.t00", "p.t01"]) == 2
            assert store.route("send it", session="chat", k=5).ids
            assert [s["session_id"] for s in store.sessions()] == ["chat"]
            assert store.info().n_tools == len(TOOLS) + 1
            other.execute("commit")
    with psycopg.connect(dsn, autocommit=True) as direct:
        indexes = direct.execute("select count(*) from pg_indexes where indexname like 'tool_vectors_hnsw%'").fetchone()
        locks = direct.execute(
            "select count(*) from pg_locks l join pg_database d on d.oid = l.database "
            "where l.locktype = 'advisory' and d.datname = current_database()"
        ).fetchone()
    assert indexes == (1,) and locks == (0,)  # the build ran (in a transaction: no session lock left behind)


def test_a_route_capped_by_statement_timeout_behind_a_transaction_pooler(pooled: str) -> None:
    with ToolStore(
        pooled, embedder=HashingEmbedder(32), catalog="c", transaction_pooling=True, statement_timeout=30
    ) as store:
        store.upsert(TOOLS)
        with psycopg.connect(pooled, autocommit=True) as other:
            other.execute("begin")
            assert store.route("archive the file", k=1).ids == ["p.t22"]
            assert session_state(other)[1] == ""


def test_an_async_store_behind_a_transaction_pooler(pooled: str) -> None:
    async def main() -> list[str]:
        store = AsyncToolStore(pooled, embedder=HashingEmbedder(32), catalog="c", transaction_pooling=True)
        async with store:
            await store.upsert(TOOLS)
            other = await psycopg.AsyncConnection.connect(pooled, autocommit=True)
            await other.execute("begin")
            ids = [(await store.route("delete the ticket", k=1)).ids[0] for _ in range(7)]
            await store.record_calls("chat", ["p.t14"])
            assert (await store.info()).n_tools == len(TOOLS)
            await other.close()
        return ids

    assert asyncio.run(main()) == ["p.t14"] * 7


def test_eval_tune_and_a_catalog_drop_behind_a_transaction_pooler(pooled: str) -> None:
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="c", transaction_pooling=True) as store:
        store.upsert(TOOLS)
        queries = [(f"please {t.description}", Judgement(f"q{i}", (t.id,))) for i, t in enumerate(TOOLS)]
        report = evaluate(store, queries, configs=select_configs(["uniform"]), k=10)
        assert report["n_queries"] == len(TOOLS) and report["configs"]["uniform"]["R@10"] > 0.5
        assert store.tune(queries, folds=2).n_examples == len(TOOLS)
        assert store.info().settings["fusion"]
        assert store.drop_catalog().n_tools == len(TOOLS)
        assert [c.name for c in store.catalogs()] == []


def test_migrations_behind_a_transaction_pooler(empty_dsn: str, bouncer: tuple[str, int]) -> None:
    pooled = through(empty_dsn, bouncer)
    assert migrate(pooled) == HEAD_REVISION
    with ToolStore(pooled, embedder=None, catalog="c", transaction_pooling=True, migrate=False) as store:
        store.upsert(TOOLS[:12])
        assert store.route("read the message", k=1).ids == ["p.t06"]


def test_transaction_pooling_is_a_bool() -> None:
    with pytest.raises(InvalidInputError, match="transaction_pooling must be True or False, got 'yes'"):
        ToolStore("postgresql://nowhere/x", embedder=None, transaction_pooling="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="transaction_pooling must be True or False"):
        AsyncToolStore("postgresql://nowhere/x", embedder=None, transaction_pooling=1)  # type: ignore[arg-type]


def test_the_command_line_behind_a_transaction_pooler(pooled: str, tmp_path: Path) -> None:
    tools = tmp_path / "tools.jsonl"
    tools.write_text(
        "".join(json.dumps({"id": t.id, "name": t.name, "description": t.description}) + "\n" for t in TOOLS)
    )
    queries = tmp_path / "queries.jsonl"
    rows = [
        {"qid": f"q{i}", "query": f"please {t.description}", "relevant": [f"p.{t.name}"]} for i, t in enumerate(TOOLS)
    ]
    queries.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def run(*args: str) -> Any:
        env = {**os.environ, "TOOLSTORE_DSN": pooled, "TOOLSTORE_TRANSACTION_POOLING": "1"}
        command = [sys.executable, "-m", "toolstore.cli", "--embedder", "hashing", "--json", *args]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    with psycopg.connect(pooled, autocommit=True) as other:
        run("-c", "cli", "import", str(tools))
        other.execute("begin")  # the last server connection the command line used
        assert session_state(other)[0] == '"$user", public'
        assert run("-c", "cli", "route", "archive the file", "-k", "1")["tools"][0]["id"] == "p.t22"
        other.execute("commit")
        assert run("eval", "--tools", str(tools), "--queries", str(queries))["n_queries"] == len(TOOLS)


def test_two_tenants_of_one_login_role_behind_a_transaction_pooler_see_their_own_catalogs(
    tenant_role: str, pooled: str
) -> None:
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="a", transaction_pooling=True) as owner:
        owner.upsert(TOOLS[:6])
        owner.grant(tenant_role, tenant=True)
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="b", transaction_pooling=True) as owner:
        owner.upsert(TOOLS[6:12])
    as_tenant = make_conninfo(pooled, user=tenant_role)
    options: dict[str, Any] = {"embedder": HashingEmbedder(32), "migrate": False, "transaction_pooling": True}
    with ToolStore(as_tenant, catalog="a", **options) as a, ToolStore(as_tenant, catalog="b", **options) as b:
        for _ in range(3):  # the pooler runs both stores' transactions on the same server connections
            assert [c["name"] for c in a.catalogs()] == ["a"] and a.info().n_tools == 6
            assert [c["name"] for c in b.catalogs()] == ["b"] and b.info().n_tools == 6
            assert a.route("send the message", k=1).ids == ["p.t00"]
            assert b.route("read the message", k=1).ids == ["p.t06"]


#: What a store behind a transaction pooler that was not told so says to do.
FIXES = ("transaction_pooling=True", "--transaction-pooling", "$TOOLSTORE_TRANSACTION_POOLING=1")


def says_the_fix(exc: BaseException) -> bool:
    text = str(exc)
    return "looks pooled in transaction mode" in text and all(fix in text for fix in FIXES)


def test_a_store_not_told_of_a_transaction_pooler_says_so_when_its_prepared_route_is_gone(pooled: str) -> None:
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="c") as store:
        store.upsert(TOOLS)
        assert store.route("send the message", k=3).ids  # prepared on the server connection it ran on
        with psycopg.connect(pooled, autocommit=True) as other:
            other.execute("begin")  # takes that server connection: the store's next route runs on another
            with pytest.raises(TransactionPoolingError, match="a statement toolstore prepared on it is gone") as raised:
                store.route("send the message", k=3)
            other.execute("commit")
        assert says_the_fix(raised.value)
        assert isinstance(raised.value.__cause__, psycopg.errors.InvalidSqlStatementName)
        with pytest.raises(TransactionPoolingError):  # every call after it, not only those that meet a lost session
            store.info()


def test_a_store_not_told_of_a_transaction_pooler_says_so_when_its_search_path_is_gone(pooled: str) -> None:
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="c") as store:
        with psycopg.connect(pooled, autocommit=True) as other:
            other.execute("begin")
            assert session_state(other)[0] == '"toolstore", "public"'  # the store's session, left to another client
            with pytest.raises(TransactionPoolingError, match='it ran on [0-9]+, where relation "catalogs"') as raised:
                store.catalogs()
            other.execute("commit")
    assert says_the_fix(raised.value)


def test_an_async_store_not_told_of_a_transaction_pooler_says_so(pooled: str) -> None:
    async def main() -> None:
        async with AsyncToolStore(pooled, embedder=HashingEmbedder(32), catalog="c") as store:
            other = await psycopg.AsyncConnection.connect(pooled, autocommit=True)
            await other.execute("begin")
            with pytest.raises(TransactionPoolingError, match="it ran on") as raised:
                await store.catalogs()
            await other.close()
            assert says_the_fix(raised.value)
            with pytest.raises(TransactionPoolingError):
                await store.info()

    asyncio.run(main())


def _tenant_catalogs(pooled: str, tenant_role: str) -> str:
    """Catalogs a and b, written through the pooler by a store told of it, each granted to ``tenant_role`` as a
    tenant; the DSN that logs in as that role."""
    for name, tools in (("a", TOOLS[:6]), ("b", TOOLS[6:12])):
        with ToolStore(pooled, embedder=HashingEmbedder(32), catalog=name, transaction_pooling=True) as owner:
            owner.upsert(tools)
            owner.grant(tenant_role, tenant=True)
    return make_conninfo(pooled, user=tenant_role)


def test_two_tenants_not_told_of_a_transaction_pooler_say_so_before_one_reads_as_the_other(
    tenant_role: str, pooled: str
) -> None:
    as_tenant = _tenant_catalogs(pooled, tenant_role)
    options: dict[str, Any] = {"embedder": HashingEmbedder(32), "migrate": False}
    with ToolStore(as_tenant, catalog="a", **options) as a:
        assert [c["name"] for c in a.catalogs()] == ["a"]
        # b's session (its tenant) would be set on the server connection a's was, which a's next read would run on
        with pytest.raises(TransactionPoolingError, match="two open connections were set up on one server backend"):
            ToolStore(as_tenant, catalog="b", **options)
        with pytest.raises(TransactionPoolingError) as raised:
            a.catalogs()
    assert says_the_fix(raised.value)


def test_a_store_not_told_of_a_transaction_pooler_says_so_when_another_client_set_its_tenant_over_its_own(
    tenant_role: str, pooled: str
) -> None:
    as_tenant = _tenant_catalogs(pooled, tenant_role)
    with ToolStore(as_tenant, embedder=HashingEmbedder(32), catalog="a", migrate=False) as a:
        assert a.route("send the message", k=1).ids == ["p.t00"]
        with psycopg.connect(as_tenant, autocommit=True) as other:  # another process's store, of tenant b
            assert other.execute("select set_config('toolstore.tenant', 'b', false)").fetchone() == ("b",)
        # where a's route would see no catalog 'a' and say to create it by importing tools
        with pytest.raises(TransactionPoolingError, match="tenant on its server backend .* is not the one it set"):
            a.route("send the message", k=1)


@pytest.mark.parametrize("through_pooler", [True, False], ids=["session-pooler", "direct"])
def test_a_store_behind_a_session_pooler_or_none_is_not_taken_for_transaction_pooled(
    dsn: str, session_bouncer: tuple[str, int], through_pooler: bool
) -> None:
    target = through(dsn, session_bouncer) if through_pooler else dsn
    with ToolStore(target, embedder=HashingEmbedder(32), catalog="c") as store:
        store.upsert(TOOLS)
        first = store.route("send the message", k=3).ids
        with psycopg.connect(target, autocommit=True) as other, store.connection() as one, store.connection() as two:
            other.execute("begin")
            backends = {conn.execute("select pg_backend_pid()").fetchone() for conn in (one, two, other)}
            assert len(backends) == 3
            assert (one.info.backend_pid not in {b[0] for b in backends if b}) is through_pooler  # the checks ran
            for _ in range(7):
                assert store.route("send the message", k=3).ids == first
            with pytest.raises(DatabaseError, match='relation "no_such_table" does not exist') as raised:
                with store.connection() as conn:
                    conn.execute("select * from no_such_table")
            assert not isinstance(raised.value, TransactionPoolingError)
            other.execute("commit")
        assert store.info().n_tools == len(TOOLS)
    with ToolStore(target, embedder=HashingEmbedder(32), catalog="none") as missing:
        with pytest.raises(UnknownCatalogError):  # read back on a connection through the pooler: its own session
            missing.route("send the message")


def vector_relations(dsn: str) -> tuple[list[str], list[str]]:
    """The HNSW indexes, and the vector tables' partitions, of the database of ``dsn``."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select relname, relkind = 'i' from pg_class where relkind in ('i', 'r') "
            "and relname ~ '^(tool_vectors|intent_examples)_(hnsw_|c[0-9]+$)' order by relname"
        ).fetchall()
    return [name for name, index in rows if index], [name for name, index in rows if not index]


def test_what_only_concurrently_drops_is_left_behind_a_transaction_pooler_saying_what_drops_it(
    pooled: str, dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each warning names what drops what it left: the library's call, and the command line's, which it named not
    (a user of the CLI read `ToolStore(direct_dsn, catalog='c').upsert([])`); the commands named do it."""
    caplog.set_level(logging.WARNING, logger="toolstore")
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="c", transaction_pooling=True) as store:
        store.upsert(TOOLS)
        c = store.info().id
        store.reembed(HashingEmbedder(48))
        assert vector_relations(dsn)[0] == [f"tool_vectors_hnsw_{c}_32", f"tool_vectors_hnsw_{c}_48"]
    said = f"catalog 'c': HNSW index(es) tool_vectors_hnsw_{c}_32 left"
    assert said in caplog.text and "ToolStore(direct_dsn, catalog='c').upsert([])" in caplog.text
    with ToolStore(pooled, embedder=HashingEmbedder(32), catalog="d", transaction_pooling=True) as store:
        store.upsert(TOOLS[:3])
        d = store.drop_catalog().id
    left = [f"intent_examples_c{d}", f"tool_vectors_c{d}"]
    assert f"2 emptied vector partition(s) of dropped catalogs left ({', '.join(left)})" in caplog.text
    assert "the next drop_catalog on a direct DSN (transaction_pooling=False; on the command line, " in caplog.text
    reimport = (
        "on the command line, without --transaction-pooling: toolstore --dsn DIRECT_DSN -c c export --with-metadata "
        "-o FILE, then toolstore --dsn DIRECT_DSN -c c import FILE) drops them"
    )
    drop = "toolstore --dsn DIRECT_DSN drop-catalog NAME, without --transaction-pooling) drops them"
    assert reimport in caplog.text and drop in caplog.text
    direct, exported = ["--dsn", dsn, "--embedder", "hashing-48"], str(tmp_path / "c.json")  # what they say to do
    for args in (["-c", "c", "export", "--with-metadata", "-o", exported], ["-c", "c", "import", exported]):
        assert CliRunner().invoke(cli, [*direct, *args]).exit_code == 0
    assert vector_relations(dsn)[0] == [f"tool_vectors_hnsw_{c}_48"]
    dropped = CliRunner().invoke(cli, [*direct, "drop-catalog", "c", "--yes"])  # another catalog than the one before
    assert dropped.exit_code == 0, dropped.output
    assert vector_relations(dsn) == ([], [])
