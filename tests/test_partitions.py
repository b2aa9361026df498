"""The vector tables' per-catalog partitions (migration 0009): made with the catalog without blocking other
catalogs' routes, unreadable directly by granted roles, gone with their catalog, carried over by migrations."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

import toolstore._indexes
from toolstore import HashingEmbedder, IntentExample, ToolStore, migrate
from toolstore._indexes import VECTOR_TABLES, build_memory, build_memory_kb, drop_partitions, partition_name
from toolstore._text import dense_text

from catalog_gen import generated_tools


def partitions(dsn: str) -> dict[str, str | None]:
    """Every table named like a vector partition in toolstore's schema -> its parent (None when detached)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """
            select c.relname, p.relname
            from pg_class c
            left join pg_inherits h on h.inhrelid = c.oid
            left join pg_class p on p.oid = h.inhparent
            where c.relnamespace = 'toolstore'::regnamespace and c.relname ~ '_c[0-9]+$'
            """
        ).fetchall()
    return dict(rows)


def open_store(dsn: str, catalog: str) -> ToolStore:
    return ToolStore(dsn, embedder=HashingEmbedder(32), catalog=catalog)


def test_a_new_catalog_gets_a_partition_of_each_vector_table(dsn: str) -> None:
    with open_store(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(20))
        alpha.add_examples([IntentExample(tool_id=generated_tools(1)[0].id, query="send it")])
        cid = alpha.info().id
        with alpha.connection() as conn:
            counts = [
                conn.execute(
                    sql.SQL("select count(*) from {}").format(sql.Identifier(partition_name(t, cid)))
                ).fetchone()[0]  # type: ignore[index]
                for t in VECTOR_TABLES
            ]
    assert counts == [20, 1]
    assert partitions(dsn) == {partition_name(t, cid): t for t in VECTOR_TABLES}


def test_an_index_build_gets_memory_for_its_graph_and_gives_it_back(dsn: str) -> None:
    """maintenance_work_mem is raised to what the catalog's vectors need for the build only, and never lowered."""

    def setting(conn: psycopg.Connection[Any]) -> int:
        return conn.execute("select pg_size_bytes(current_setting('maintenance_work_mem')) / 1024").fetchone()[0]  # type: ignore[index,no-any-return]

    assert build_memory_kb(28_370, 384) > 64 * 1024 >= build_memory_kb(20_000, 384)  # Postgres' default held 28,370
    assert build_memory_kb(10**9, 384) == 1024 * 1024  # the cap
    with open_store(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(1200))
        cid = alpha.info().id
        need = build_memory_kb(1200, 32)
        assert need > 1024
        with alpha.connection() as conn:
            conn.autocommit = True
            conn.execute("set maintenance_work_mem = '1MB'")
            with build_memory(conn, "tool_vectors", cid, 32):
                assert setting(conn) == need
            assert setting(conn) == 1024
            conn.execute("set maintenance_work_mem = '64MB'")
            with build_memory(conn, "tool_vectors", cid, 32):
                assert setting(conn) == 64 * 1024  # already enough: left as it was
            conn.autocommit = False
            conn.execute("set maintenance_work_mem = '1MB'")
            conn.commit()
            with build_memory(conn, "tool_vectors", cid, 32):  # inside a transaction: for the transaction
                assert setting(conn) == need
            conn.commit()
            assert setting(conn) == 1024
            conn.rollback()
            conn.autocommit = True
            conn.execute("reset maintenance_work_mem")


def test_a_bulk_write_analyzes_what_it_changed(dsn: str) -> None:
    """After a bulk import of tools: the shared tables and the catalog's partitions; after one of intent examples:
    their partition only (the tools' table is the slowest to sample, and did not change)."""

    def analyzed(conn: psycopg.Connection[Any]) -> dict[str, int]:
        rows = conn.execute("select relname, analyze_count from pg_stat_user_tables where schemaname = 'toolstore'")
        return dict(rows.fetchall())

    with open_store(dsn, "alpha") as alpha, alpha.connection() as conn:
        conn.autocommit = True
        tools = generated_tools(600)
        before = analyzed(conn)
        alpha.upsert(tools)
        cid = alpha.info().id
        examples_table, vectors_table = partition_name("intent_examples", cid), partition_name("tool_vectors", cid)
        after_tools = analyzed(conn)
        for table in ("tools", "postings", "lexeme_stats", "field_stats", vectors_table, examples_table):
            assert after_tools[table] == before.get(table, 0) + 1, table
        alpha.add_examples([IntentExample(t.id, f"please {t.name} for me, case {i}") for t in tools for i in (1, 2)])
        after_examples = analyzed(conn)
        assert after_examples[examples_table] == after_tools[examples_table] + 1
        assert {t: n for t, n in after_examples.items() if t != examples_table} == {
            t: n for t, n in after_tools.items() if t != examples_table
        }


def hnsw_indexes(conn: psycopg.Connection[Any], cid: int, dim: int) -> dict[str, str]:
    """The catalog's HNSW indexes for ``dim`` -> their definitions."""
    rows = conn.execute(
        "select indexrelid::regclass::text, pg_get_indexdef(indexrelid) from pg_index "
        "where indexrelid::regclass::text like %s",
        [f"%_hnsw_{cid}_{dim}"],
    ).fetchall()
    return dict(rows)


def knn_plans(
    conn: psycopg.Connection[Any], cid: int, dim: int, qvec: np.ndarray
) -> tuple[list[tuple[str, float]], list[str]]:
    """((tool id, distance) of knn()'s nearest 10 tools to ``qvec``, the plans of its searches), with sequential scans
    off: the catalogs here are small enough for a scan to win, and the question is whether the index matches."""
    conn.execute("load 'auto_explain'")
    messages: list[str] = []
    conn.add_notice_handler(lambda diag: messages.append(diag.message_primary or ""))
    for setting, value in (("log_min_duration", "0"), ("log_nested_statements", "on"), ("log_level", "notice")):
        conn.execute(f"set auto_explain.{setting} = {value}")
    conn.execute("set enable_seqscan = off")
    try:
        found = conn.execute(
            "select t.id, k.distance from knn('tool_vectors', %s, %s, %s, 10, null) k "
            "join tools t on t.catalog_id = %s and t.pk = k.tool_pk order by k.distance",
            [cid, dim, qvec, cid],
        ).fetchall()
    finally:
        conn.execute("reset enable_seqscan")
        conn.execute("set auto_explain.log_min_duration = -1")
    return [(r[0], r[1]) for r in found], [m for m in messages if "<=>" in m]


@pytest.mark.parametrize(("dim", "indexed"), [(384, "halfvec"), (2048, "halfvec"), (4100, None)])
def test_vectors_are_indexed_on_halfvec_up_to_4000_dimensions(
    dsn: str, monkeypatch: pytest.MonkeyPatch, dim: int, indexed: str | None
) -> None:
    """A catalog's HNSW indexes cast its vectors to halfvec up to 4,000 dimensions (pgvector's limit for halfvec;
    vector's is 2,000), and knn() searches them; past 4,000 there is none (searched exactly); writes never fail."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 50)
    tools = generated_tools(80)
    embedder = HashingEmbedder(dim)
    with ToolStore(dsn, embedder=embedder, catalog="wide") as store, store.connection() as conn:
        store.upsert(tools)
        store.add_examples([IntentExample(t.id, f"please {t.name}, case {i}") for t in tools for i in (1, 2)])
        cid = store.info().id
        indexes = hnsw_indexes(conn, cid, dim)
        if indexed is None:
            assert indexes == {}
        else:
            assert sorted(indexes) == [f"{t}_hnsw_{cid}_{dim}" for t in ("intent_examples", "tool_vectors")]
            assert all(f"::{indexed}({dim})" in definition for definition in indexes.values()), indexes
        store.analyze()
        target = tools[7]
        qvec = np.asarray(embedder.embed(dense_text(target)), dtype=np.float32)
        found, plans = knn_plans(conn, cid, dim, qvec)
        assert found[0][0] == target.id and len(found) == 10
        assert plans and all((f"tool_vectors_hnsw_{cid}_{dim}" in m) == (indexed is not None) for m in plans), plans
        exact = dict(
            conn.execute(
                "select t.id, (v.embedding <=> %s::vector)::float8 from tool_vectors v "
                "join tools t on t.catalog_id = v.catalog_id and t.pk = v.tool_pk "
                "where v.catalog_id = %s and t.id = any(%s)",
                [qvec, cid, [tool_id for tool_id, _ in found]],
            ).fetchall()
        )
        assert all(distance == exact[tool_id] for tool_id, distance in found)  # full precision, not the index's
        assert store.route(target.description).ids  # the whole route path works at this width


def test_migration_0015_rebuilds_the_indexes_on_halfvec_and_back(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes built on vector before migration 0015 are built again on halfvec by its upgrade, and knn() searches
    them; its downgrade builds them on vector again, which knn() of revision 0014 searches. Routes are unchanged."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 50)
    tools = generated_tools(80, seed=5)
    with open_store(dsn, "alpha") as store:
        store.upsert(tools)
        store.add_examples([IntentExample(t.id, f"please {t.name}, case {i}") for t in tools for i in (1, 2)])
        cid, dim = store.info().id, store.embedder.dim
        before = [store.route(t.description).ids for t in tools[:10]]
        qvec = np.asarray(store.embedder.embed(dense_text(tools[3])), dtype=np.float32)
    for revision, vtype in (("0014", "vector"), ("head", "halfvec")):
        migrate(dsn, revision=revision, downgrade=revision != "head")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("set search_path = toolstore, public")
            register_vector(conn)
            indexes = hnsw_indexes(conn, cid, dim)
            assert len(indexes) == 2 and all(f"::{vtype}({dim})) {vtype}_cosine_ops" in d for d in indexes.values())
            found, plans = knn_plans(conn, cid, dim, qvec)
            assert found[0][0] == tools[3].id
            assert plans and all(f"tool_vectors_hnsw_{cid}_{dim}" in m for m in plans), plans
    with open_store(dsn, "alpha") as store:
        assert [store.route(t.description).ids for t in tools[:10]] == before


def test_creating_a_catalog_does_not_wait_for_routes_of_another(dsn: str) -> None:
    """CREATE TABLE ... PARTITION OF would take an ACCESS EXCLUSIVE lock on the parents: a catalog created while a
    transaction has read another catalog's vectors would wait for it (and queue every route behind it)."""
    with open_store(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(10))
        with alpha.connection() as reader, reader.transaction():
            reader.execute("select count(*) from tool_vectors").fetchone()  # AccessShare on the parent, held
            reader.execute("select count(*) from intent_examples").fetchone()
            with psycopg.connect(dsn, autocommit=True) as other:
                other.execute("set lock_timeout = '2s'")
                other.execute("set search_path = toolstore, public")
                beta = other.execute("insert into catalogs (name) values ('beta') returning id").fetchone()[0]  # type: ignore[index]
    assert set(partitions(dsn)) >= {partition_name(t, beta) for t in VECTOR_TABLES}


def test_a_granted_role_reads_no_partition_directly(dsn: str, login_role: tuple[str, str]) -> None:
    """Grants cover every table of the schema, partitions included; their row-level security (no policy) keeps a
    role granted one catalog from reading another catalog's vectors by naming its partition."""
    name, reader_dsn = login_role
    with open_store(dsn, "alpha") as alpha, open_store(dsn, "beta") as beta:
        alpha.upsert(generated_tools(10, seed=1))
        beta.upsert(generated_tools(12, seed=2))
        alpha.grant(name)
        ids = alpha.info().id, beta.info().id
    with psycopg.connect(reader_dsn) as conn:
        conn.execute("set search_path = toolstore, public")
        assert conn.execute("select count(*) from tool_vectors").fetchone() == (10,)  # through the parent: alpha's
        for cid in ids:
            table = sql.Identifier(partition_name("tool_vectors", cid))
            assert conn.execute(sql.SQL("select count(*) from {}").format(table)).fetchone() == (0,)


def test_dropping_a_catalog_drops_its_partitions(dsn: str) -> None:
    with open_store(dsn, "alpha") as alpha, open_store(dsn, "beta") as beta:
        alpha.upsert(generated_tools(10, seed=1))
        beta.upsert(generated_tools(10, seed=2))
        beta_id = beta.info().id
        alpha.drop_catalog()
        assert set(partitions(dsn)) == {partition_name(t, beta_id) for t in VECTOR_TABLES}
        assert beta.route("send an email").ids  # the other catalog routes as before


def test_partitions_left_by_a_drop_inside_a_transaction_go_with_the_next_drop(dsn: str) -> None:
    """Inside a transaction nothing is detached (a DROP TABLE of a partition would lock the parents until commit);
    the empty partitions stay, invisible to routes, until the next drop outside a transaction."""
    with open_store(dsn, "alpha") as alpha:
        alpha.upsert(generated_tools(5))
        cid = alpha.info().id
    with psycopg.connect(dsn) as conn:  # a transaction: drop_partitions leaves everything
        conn.execute("set search_path = toolstore, public")
        conn.execute("delete from catalogs where name = 'alpha'")
        drop_partitions(conn)
        conn.commit()
    assert len(partitions(dsn)) == 2
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        conn.execute(
            sql.SQL("alter table tool_vectors detach partition {}").format(
                sql.Identifier(partition_name("tool_vectors", cid))
            )
        )
        drop_partitions(conn)  # the attached one and the one detached but not dropped
    assert partitions(dsn) == {}


def count_rows(dsn: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        conn.execute("set search_path = toolstore, public")
        return {
            t: conn.execute(sql.SQL("select count(*), sum(catalog_id) from {}").format(sql.Identifier(t))).fetchone()
            for t in VECTOR_TABLES
        }


def test_migrations_carry_rows_grants_and_policies_both_ways(dsn: str, login_role: tuple[str, str]) -> None:
    name, reader_dsn = login_role
    tools = generated_tools(30, seed=3)
    with open_store(dsn, "alpha") as alpha, open_store(dsn, "beta") as beta:
        alpha.upsert(tools)
        beta.upsert(generated_tools(7, seed=4))
        alpha.add_examples(
            [
                IntentExample(tool_id=tools[0].id, query="mail the team"),
                IntentExample(tool_id=tools[1].id, query="ping"),
            ]
        )
        alpha.grant(name)
        before = alpha.route("send the weekly report").ids
    rows = count_rows(dsn)
    migrate(dsn, revision="0008", downgrade=True)
    assert count_rows(dsn) == rows
    assert partitions(dsn) == {}
    migrate(dsn)
    assert count_rows(dsn) == rows
    with open_store(dsn, "alpha") as alpha:
        assert alpha.route("send the weekly report").ids == before
        alpha.add_examples([IntentExample(tool_id=tools[2].id, query="a new one")])  # the identity carries on
    with psycopg.connect(reader_dsn) as conn:
        conn.execute("set search_path = toolstore, public")
        assert conn.execute("select count(*) from tool_vectors").fetchone() == (30,)  # policies and grant kept
