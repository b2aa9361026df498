"""Vectors stay in their rows (migration 0028): a long intent example's vector is not moved to the TOAST table, in
catalogs made before the migration and after it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from toolstore import HashingEmbedder, IntentExample, Tool, ToolStore, migrate

DIM = 384
#: Long enough that an example's row passes the TOAST threshold (about 2 kB) beside a 384-dimension vector (1,544
#: bytes).
LONG = " ".join(f"step {i}: read the quarterly ledger and reconcile every account against the bank" for i in range(12))


def _storage(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """attstorage of ``embedding`` in every vector table and partition of schema toolstore."""
    rows = conn.execute(
        "select c.relname, a.attstorage from pg_attribute a join pg_class c on c.oid = a.attrelid "
        "join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'toolstore' and a.attname = 'embedding' "
        "and (c.relname like 'tool_vectors%%' or c.relname like 'intent_examples%%') and c.relkind in ('r', 'p')"
    ).fetchall()
    return dict(rows)


def _load(dsn: str, catalog: str) -> None:
    with ToolStore(dsn, embedder=HashingEmbedder(DIM), catalog=catalog) as store:
        store.upsert([Tool(id="ledger", name="ledger", description="reconcile accounts")])
        store.add_examples([IntentExample("ledger", LONG)])


def test_long_examples_keep_their_vectors_in_the_row(dsn: str) -> None:
    assert len(LONG) > 450
    _load(dsn, "inline")
    with psycopg.connect(dsn) as conn:
        storage = _storage(conn)
        assert storage and set(storage.values()) == {"m"}, storage
        assert any(name.startswith("intent_examples_c") for name in storage)  # the new catalog's partitions too
        if conn.info.server_version < 170000:
            pytest.skip("pg_column_toast_chunk_id() needs PostgreSQL 17")
        chunk = conn.execute(
            "select pg_column_toast_chunk_id(e.embedding) from toolstore.intent_examples e "
            "join toolstore.catalogs c on c.id = e.catalog_id where c.name = 'inline'"
        ).fetchone()
        assert chunk == (None,)  # in the row: before 0028, a TOAST chunk id


def test_the_migration_reaches_partitions_made_before_it(empty_dsn: str) -> None:
    migrate(empty_dsn, revision="0027")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        conn.execute("insert into catalogs (name) values ('before')")  # its partitions made by 0009's function
        assert set(_storage(conn).values()) == {"e"}
    migrate(empty_dsn)
    with psycopg.connect(empty_dsn) as conn:
        assert set(_storage(conn).values()) == {"m"}
    migrate(empty_dsn, revision="0027", downgrade=True)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("insert into toolstore.catalogs (name) values ('after')")
        assert set(_storage(conn).values()) == {"e"}
