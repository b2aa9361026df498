"""Query plans of routing over a 10k-tool catalog: indexes are used, tools and postings are never scanned whole.

Not timed: these assert plan shapes (EXPLAIN (FORMAT JSON)), which is what keeps route() fast as catalogs grow.
The route statement calls ``knn()``, whose nearest-neighbour queries are dynamic SQL inside plpgsql, so the
outer plan only shows a Function Scan: the inner statements are checked separately, (1) by EXPLAINing the
statement text taken from the function's own source with the catalog's dimension and id spelled in, as the
function does, and (2) where the server allows ``LOAD 'auto_explain'``, from the plans of a real call.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from toolstore import HashingEmbedder, IntentExample, ToolStore
from toolstore._fusion import stored_fusion
from toolstore._indexes import index_type, partition_name
from toolstore._route import context_vector, route_request, statement_params
from toolstore._sql import query, raw_query

from catalog_gen import generated_queries, generated_tools
from conftest import TEMPLATE, create_database, drop_database

N_TOOLS = 10_000
DIM = 32
WHOLE_TABLE_FORBIDDEN = {
    "tools",
    "postings",
    "lexeme_stats",
    "tool_vectors",
    "intent_examples",
    "session_calls",
    "tool_transitions",
}

REQUESTS = {
    "natural language": ({}, "send the weekly invoice summary to the finance team"),
    "identifier": ({}, "use send_email_3 for the urgent message"),
    "filtered": ({"categories": ["finance"], "block": ["slack.send_email_0"]}, "refund a failed payment"),
    "conversation": ({"session": "log-7"}, "and now mail the same report"),
}


@pytest.fixture(scope="module")
def store(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    name = f"toolstore_test_plans_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    tools = generated_tools(N_TOOLS, seed=3)
    with ToolStore(dsn, embedder=HashingEmbedder(DIM), catalog="plans") as s:
        s.upsert(tools)
        s.add_examples([IntentExample(t.id, q) for t, q in zip(tools[::2], generated_queries(N_TOOLS // 2, seed=4))])
        rng = random.Random(5)
        s.import_sessions((f"log-{i}", [rng.choice(tools).id for _ in range(12)]) for i in range(2000))
        with s.pool.connection() as conn:
            conn.execute("analyze")
        yield s
    drop_database(server_dsn, name)


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a JSON plan tree (init plans and CTEs included: they are children too)."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def explain(conn: psycopg.Connection[Any], statement: str, params: Any) -> list[dict[str, Any]]:
    row = conn.execute("explain (format json) " + statement, params).fetchone()
    assert row is not None
    return list(nodes(row[0][0]["Plan"]))


def scans(plan: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(n["Node Type"], n.get("Relation Name", ""), n.get("Index Name", "")) for n in plan if "Relation Name" in n}


def assert_no_whole_table_scans(plan: list[dict[str, Any]]) -> None:
    whole = {(t, r) for t, r, _ in scans(plan) if t == "Seq Scan" and r in WHOLE_TABLE_FORBIDDEN}
    assert not whole, f"sequential scans of {sorted(whole)}; plan scans: {sorted(scans(plan))}"


def route_params(store: ToolStore, label: str) -> dict[str, Any]:
    """The statement's parameters for one of REQUESTS; a conversation mixes an earlier turn into ``context``."""
    filters, text = REQUESTS[label]
    info = store.info()
    qvec = store.embedder.embed(text) if store.embedder else None
    cvec = context_vector(qvec, [store.embedder.embed("the monthly report")]) if "session" in filters else None
    return statement_params(info, route_request(text, stored_fusion(info.settings), k=8, **filters), qvec, cvec)


@pytest.mark.parametrize("label", sorted(REQUESTS))
def test_route_statement_uses_the_bm25_indexes_and_no_whole_table_scan(store: ToolStore, label: str) -> None:
    with store.pool.connection() as conn:
        plan = explain(conn, query("route"), route_params(store, label))
    found = scans(plan)
    assert_no_whole_table_scans(plan)
    assert any(r == "postings" and i == "postings_pkey" for _, r, i in found), found
    assert any(r == "lexeme_stats" and i == "lexeme_stats_pkey" for _, r, i in found), found
    functions = [n for n in plan if n["Node Type"] == "Function Scan" and n.get("Function Name") == "knn"]
    assert len(functions) == (3 if label == "conversation" else 2), "dense, intent, context go through knn()"
    if label == "conversation":
        assert any(r == "session_calls" and i == "session_calls_pkey" for _, r, i in found), found
        assert any(r == "tool_transitions" and i == "tool_transitions_pkey" for _, r, i in found), found


def generic_plan(conn: psycopg.Connection[Any], params: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The plan the route statement runs on ``conn`` once prepared (sent as route() sends it: its raw form, on a raw
    cursor, ``toolstore._steps.fetch_rows``), and how many generic plans it has run."""
    text, names = raw_query("route")
    with psycopg.RawCursor(conn) as cur:
        cur.execute(text, [params[n] for n in names], prepare=True).fetchall()
    row = conn.execute(
        "select name, parameter_types::text[], generic_plans from pg_prepared_statements"
        " where statement like '%route_catalog(%'"
    ).fetchone()
    assert row is not None, "the route statement was not prepared"
    name, types, generic = row
    # the prepared statement's $n are raw_query's numbering
    args = sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Literal(params[n]), sql.SQL(t)) for n, t in zip(names, types, strict=True)
    )
    row = conn.execute(sql.SQL("explain (format json) execute {}({})").format(sql.Identifier(name), args)).fetchone()
    assert row is not None
    return list(nodes(row[0][0]["Plan"])), generic


@pytest.mark.parametrize("label", sorted(REQUESTS))
def test_route_statement_runs_a_generic_plan_without_whole_table_scans(store: ToolStore, label: str) -> None:
    """The pool's connections run every statement on its generic plan (toolstore/_connect.py): planned without
    the parameters' values, the route statement must still look tools up by key and read postings by index."""
    with store.pool.connection() as conn:
        plan, generic = generic_plan(conn, route_params(store, label))
    assert generic >= 1, "the route statement was re-planned (custom plan) instead of running its generic plan"
    assert_no_whole_table_scans(plan)
    assert any(r == "postings" and i == "postings_pkey" for _, r, i in scans(plan)), scans(plan)


@pytest.mark.parametrize("name", ["route", "eval_lexical"])
def test_bm25_is_inlined(store: ToolStore, name: str) -> None:
    """BM25 is written once, in bm25_term() = bm25_idf() * bm25_tf() (route calls the two parts); the planner must
    inline them (no function call per posting). bm25_top() (migration 0017) is one call per part and field."""
    with store.pool.connection() as conn:
        params = route_params(store, "natural language")
        params["query_text"] = params["part_texts"][0]  # eval_lexical's one query (route has parts)
        params |= {"replaced_pks": [], "replaced_docs": []}  # eval_lexical's tools read without their own lines
        row = conn.execute("explain (verbose, format json) " + query(name), params).fetchone()
    assert row is not None
    text = str(row[0]).replace("'bm25_top'", "").replace('"bm25_top(', "")
    assert "bm25_" not in text and "ln(" in text, "a BM25 function was not inlined"


def knn_statements(conn: psycopg.Connection[Any]) -> list[str]:
    """The format strings of the statements knn() executes, read from the function's source."""
    row = conn.execute("select prosrc from pg_proc where proname = 'knn'").fetchone()
    assert row is not None, "knn() is missing"
    found = re.findall(r"execute\s+format\(\s*((?:'(?:[^']|'')*'\s*)+),", row[0])
    assert len(found) == 4, "knn() runs the kept set's rows by key, an exact scan, HNSW unfiltered and iterative"
    return ["".join(s.replace("''", "'") for s in re.findall(r"'((?:[^']|'')*)'", f)) for f in found]


def inner_statement(template: str, table: str, catalog: int, dim: int, vtype: str) -> str:
    """A knn() format string with the dimension, catalog, table and indexed type spelled in and $n as named
    parameters."""
    text = template.replace("%1$s", str(dim)).replace("%2$s", str(catalog)).replace("%3$I", table)
    text = text.replace("%4$s", vtype)
    assert "%" not in text, f"unexpected format specifier left in {text!r}"
    return re.sub(r"\$(\d)", r"%(p\1)s", text)


@pytest.mark.parametrize("table", ["tool_vectors", "intent_examples"])
@pytest.mark.parametrize("filtered", ["unfiltered", "few kept", "many kept", "few dropped"])
def test_knn_inner_statements_use_the_catalogs_hnsw_index(store: ToolStore, table: str, filtered: str) -> None:
    """Unfiltered, with many tools kept and with a few dropped (migration 0016): the catalog's HNSW index; with few
    kept: their rows by key (exact)."""
    info = store.info()
    qvec = np.asarray(store.embedder.embed("refund a failed payment"), dtype=np.float32)  # type: ignore[union-attr]
    with store.pool.connection() as conn, conn.transaction():
        exact_sql, _, unfiltered_sql, iterative_sql = knn_statements(conn)
        template = {"unfiltered": unfiltered_sql, "few kept": exact_sql}.get(filtered, iterative_sql)
        conn.execute("select set_config('hnsw.ef_search', '120', true)")
        params: dict[str, Any] = {"p1": qvec, "p2": 120}
        if filtered != "unfiltered":
            conn.execute("select set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            pks = [r[0] for r in conn.execute("select pk from tools where catalog_id = %s", [info.id])]
            params |= {"p3": pks if filtered == "many kept" else pks[:3], "p4": filtered == "few dropped"}
        vtype = index_type(conn, DIM)
        assert vtype is not None
        plan = explain(conn, inner_statement(template, table, info.id, DIM, vtype), params)
    assert_no_whole_table_scans(plan)
    partition = partition_name(table, info.id)  # pruned to the catalog's partition at plan time
    if filtered == "few kept":
        key = "_pkey" if table == "tool_vectors" else "_tool_pk_query_key"
        assert any(r == partition and i.endswith(key) for _, r, i in scans(plan)), sorted(scans(plan))
    else:
        assert (("Index Scan", partition, f"{table}_hnsw_{info.id}_{DIM}")) in scans(plan), sorted(scans(plan))


def test_knn_plans_of_a_real_route_call_use_hnsw(store: ToolStore) -> None:
    """The plans knn() really runs, captured with auto_explain (nested statements) during one route call."""
    info = store.info()
    messages: list[str] = []
    with store.pool.connection() as conn:
        try:
            conn.execute("load 'auto_explain'")
        except psycopg.Error as exc:
            pytest.skip(f"auto_explain cannot be loaded here: {exc}")
        conn.add_notice_handler(lambda diag: messages.append(diag.message_primary or ""))
        for setting, value in (
            ("log_min_duration", "0"),
            ("log_nested_statements", "on"),
            ("log_format", "text"),
            ("log_level", "notice"),
        ):
            conn.execute(f"set auto_explain.{setting} = {value}")
        try:
            for label in sorted(REQUESTS):
                conn.execute(query("route"), route_params(store, label)).fetchall()
        finally:
            conn.execute("reset auto_explain.log_min_duration")
    inner = [m for m in messages if "<=>" in m]  # knn()'s statements; the route statement has no <=>
    for table in ("tool_vectors", "intent_examples"):
        partition = partition_name(table, info.id)
        plans = [m for m in inner if f" on {partition} " in m or f"from {table} v" in m]
        assert plans, f"no nested knn() plan over {table} was captured"
        for m in plans:
            assert f"{table}_hnsw_{info.id}_{DIM}" in m, m
            assert f"Seq Scan on {partition}" not in m, m
    for m in messages:
        for relation in WHOLE_TABLE_FORBIDDEN:
            assert f"Seq Scan on {relation} " not in m, m
