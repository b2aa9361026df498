"""The invariants a distributed database needs (docs/SCALING.md): every catalog-scoped table's primary key starts with
the catalog, every reference between them carries the catalog, and every table the route statement (and knn()
inside it) reads is read by its catalog, so one route touches one catalog's rows only: a single-shard query once
tables are distributed by ``catalog_id``.

Checked against the migrated schema (pg_catalog) and the plans Postgres makes (EXPLAIN), not against the SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_plans import inner_statement, knn_statements

from toolstore import HashingEmbedder, IntentExample, ToolStore
from toolstore._fusion import stored_fusion
from toolstore._indexes import index_type
from toolstore._revisions import VERSION_TABLE
from toolstore._route import route_request, statement_params, with_calls
from toolstore._sql import query

from catalog_gen import generated_queries, generated_tools

#: Tables that hold no catalog's rows: the catalogs themselves, the shared embedding cache (vectors keyed by model and
#: text hash, no text, no catalog) and the tenant roles. A distributed database keeps them as reference tables.
GLOBAL_TABLES = {"catalogs", "embedding_cache", "tenant_roles", VERSION_TABLE}

CATALOG_COND = re.compile(r"\bcatalog_id = (\$\d+|'?\d+'?)")
#: A catalog's partition of a vector table (migration 0009): a scan of it reads that catalog's rows only.
PARTITION = re.compile(r"^(?:tool_vectors|intent_examples)_c(\d+)$")


def catalog_tables(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every table of toolstore's schema (partitioned ones and their partitions included) with its primary key columns,
    in order."""
    rows = conn.execute(
        """
        select c.relname, array(select a.attname from unnest(i.indkey) with ordinality k (attnum, n)
                                join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum order by k.n)
        from pg_class c
        left join pg_index i on i.indrelid = c.oid and i.indisprimary
        where c.relnamespace = 'toolstore'::regnamespace and c.relkind in ('r', 'p')
        """
    ).fetchall()
    return {name: list(key or []) for name, key in rows}


def test_every_catalog_scoped_tables_primary_key_starts_with_the_catalog(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        tables = catalog_tables(conn)
        scoped = {
            t
            for (t,) in conn.execute(
                "select table_name from information_schema.columns "
                "where table_schema = 'toolstore' and column_name = 'catalog_id'"
            )
        }
    assert set(tables) - scoped == GLOBAL_TABLES, "a new table must be catalog-scoped or declared global here"
    wrong = {t: tables[t] for t in scoped if tables[t][:1] != ["catalog_id"]}
    assert not wrong, f"primary keys not starting with catalog_id: {wrong}"


def test_references_between_catalog_tables_carry_the_catalog(dsn: str) -> None:
    """A foreign key between two catalog-scoped tables includes catalog_id on both sides (co-location)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """
            select f.conname, src.relname, dst.relname,
                   array(select attname from pg_attribute where attrelid = f.conrelid and attnum = any (f.conkey)),
                   array(select attname from pg_attribute where attrelid = f.confrelid and attnum = any (f.confkey))
            from pg_constraint f
            join pg_class src on src.oid = f.conrelid
            join pg_class dst on dst.oid = f.confrelid
            where f.contype = 'f' and src.relnamespace = 'toolstore'::regnamespace
            """
        ).fetchall()
    assert rows, "no foreign keys found: the query above is wrong"
    for name, src, dst, cols, ref_cols in rows:
        if dst == "catalogs":
            assert cols == ["catalog_id"], name
        else:
            assert "catalog_id" in cols and "catalog_id" in ref_cols, f"{name}: {src} -> {dst} by {cols}"


SCALING = Path(__file__).resolve().parents[1] / "docs" / "SCALING.md"


def _scaling_tables(label: str) -> set[str]:
    """The tables docs/SCALING.md's bullet ``label`` names (in backticks, outside parentheses, up to the bullet's first
    full stop)."""
    bullet = re.search(rf"^- \*\*{re.escape(label)}:\*\*(.*?)\.(?: |$)", SCALING.read_text(), re.M | re.S)
    assert bullet is not None, f"docs/SCALING.md has no bullet {label!r}"
    return set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", bullet.group(1))))


def test_scaling_names_every_table_as_distributed_or_reference(dsn: str) -> None:
    """docs/SCALING.md's design for a distributed Postgres lists how each table would be laid out; a table a
    migration added and the list left out (`anchors`, `session_seen_calls`) would have had no place there."""
    with psycopg.connect(dsn) as conn:
        tables = {
            t
            for (t,) in conn.execute(
                "select relname from pg_class where relnamespace = 'toolstore'::regnamespace "
                "and relkind in ('r', 'p') and not relispartition"
            )
        }
    distributed = _scaling_tables("Distributed, co-located by `catalog_id`")
    reference = _scaling_tables("Reference tables (replicated)")
    assert not distributed & reference, distributed & reference
    assert distributed | reference | {VERSION_TABLE} == tables, {
        "not in docs/SCALING.md": tables - distributed - reference - {VERSION_TABLE},
        "no such table": (distributed | reference) - tables,
    }


@pytest.fixture(scope="module")
def routed(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    """Two catalogs, so a scan that ignored the catalog would have other rows to read."""
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_test_invariants_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    tools = generated_tools(300, seed=8)
    for catalog in ("other", "routed"):
        with ToolStore(dsn, embedder=HashingEmbedder(32), catalog=catalog) as s:
            s.upsert(tools)
            s.add_examples([IntentExample(t.id, q) for t, q in zip(tools, generated_queries(300, seed=9))])
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="routed") as store:
        with store.connection() as conn:
            conn.execute("analyze")
        yield store
    drop_database(server_dsn, name)


def relation_scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(relation, every condition of the scan and of the bitmap index scans under it) for each table scan."""
    stack = [plan]
    while stack:
        node = stack.pop()
        children = node.get("Plans", [])
        stack += children
        if "Relation Name" in node:
            conds = [node.get(k, "") for k in ("Index Cond", "Filter", "Recheck Cond")]
            conds += [c.get("Index Cond", "") for c in children if c["Node Type"] == "Bitmap Index Scan"]
            yield node["Relation Name"], " ".join(conds)


def unscoped_scans(conn: psycopg.Connection[Any], statement: str, params: Any, catalog: int) -> list[tuple[str, str]]:
    """The plan's table scans that are not limited to ``catalog``: neither a scan of one of its partitions nor one
    with a condition on ``catalog_id``."""
    row = conn.execute("explain (verbose, format json) " + statement, params).fetchone()
    assert row is not None
    scans = list(relation_scans(row[0][0]["Plan"]))
    assert scans, "the plan reads no table: the statement was not explained"
    return [
        (rel, cond)
        for rel, cond in scans
        if rel not in GLOBAL_TABLES
        and not CATALOG_COND.search(cond)
        and not ((m := PARTITION.match(rel)) and int(m.group(1)) == catalog)
    ]


REQUESTS = {
    "natural language": ({}, "send the weekly invoice summary to the finance team"),
    "identifier": ({}, "use send_email_3 for the urgent message"),
    "filtered": ({"categories": ["finance"], "block": ["slack.send_email_0"]}, "refund a failed payment"),
    # the conversation's signals: the session's log, calls passed in, transitions and the context vector
    "conversation": ({"session": "s-1"}, "and now refund it"),
}


@pytest.mark.parametrize("label", sorted(REQUESTS))
def test_the_route_statement_reads_every_table_by_its_catalog(routed: ToolStore, label: str) -> None:
    filters, text = REQUESTS[label]
    info = routed.info()
    qvec = HashingEmbedder(32).embed(text)
    request = route_request(text, stored_fusion(info.settings), k=8, **filters)
    if request.session is not None:
        request = with_calls(request, ["slack.send_email_0"])
    params = statement_params(info, request, qvec, qvec if request.session else None)
    with routed.connection() as conn:
        assert unscoped_scans(conn, query("route"), params, info.id) == []


@pytest.mark.parametrize("table", ["tool_vectors", "intent_examples"])
def test_knn_reads_every_table_by_its_catalog(routed: ToolStore, table: str) -> None:
    info = routed.info()
    qvec = HashingEmbedder(32).embed("refund a failed payment")
    with routed.connection() as conn:
        vtype = index_type(conn, 32)
        assert vtype is not None
        kept = [[1, 2, 3], None, None, list(range(1, 3000))]  # by key, exact scan, HNSW, iterative HNSW
        for template, p3 in zip(knn_statements(conn), kept, strict=True):
            text = inner_statement(template, table, info.id, 32, vtype)
            params = {"p1": qvec, "p2": 40, "p3": p3, "p4": False}  # p4: p3 is the kept set (migration 0016)
            assert unscoped_scans(conn, text, params, info.id) == [], text


def test_the_check_catches_a_join_without_the_catalog(routed: ToolStore) -> None:
    """What the route statement looked like before: a join on tools by its pk alone is reported."""
    with routed.connection() as conn:
        statement = "select t.id from postings p join tools t on t.pk = p.tool_pk where p.catalog_id = %(c)s"
        found = unscoped_scans(conn, statement, {"c": routed.info().id}, routed.info().id)
    assert [rel for rel, _ in found] == ["tools"]
