"""Exact BM25 in SQL: equal to a Python reference over the same lexemes, statistics exact after any change."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from dataclasses import replace
from typing import Any

import psycopg
import pytest

import toolstore._catalog
from toolstore import DatabaseError, Tool, ToolStore
from toolstore._text import query_text

from catalog_gen import generated_queries, generated_tools
from retrievers import block
from statistics_check import field_docs, recomputed_stats, stats_snapshot


def reference_bm25(
    docs: dict[str, dict[str, int]], terms: list[str], k1: float = 1.2, b: float = 0.75
) -> list[tuple[str, float]]:
    n = len(docs)
    lengths = {d: sum(tf.values()) for d, tf in docs.items()}
    avgdl = sum(lengths.values()) / n
    df: dict[str, int] = defaultdict(int)
    for tf in docs.values():
        for lexeme in tf:
            df[lexeme] += 1
    scores: dict[str, float] = {}
    for doc, tf in docs.items():
        score = 0.0
        matched = False
        for term in terms:
            if term in tf:
                matched = True
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * lengths[doc] / avgdl))
        if matched:
            scores[doc] = score
    return sorted(scores.items(), key=lambda item: (-round(item[1] * 1e9), item[0]))


def sql_bm25(conn: psycopg.Connection[Any], catalog: int, field: int, text: str) -> list[tuple[str, float]]:
    rows = conn.execute(block("bm25_field"), {"catalog": catalog, "field": field, "query_text": text}).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def lexemes(conn: psycopg.Connection[Any], text: str) -> list[str]:
    return [r[0] for r in conn.execute(block("query_lexemes"), {"query_text": text}).fetchall()]


@pytest.fixture
def big(dsn: str):
    with ToolStore(dsn, embedder=None, catalog="big") as store:
        store.upsert(generated_tools(1200))
        yield store


@pytest.mark.parametrize("field", [1, 2, 3])
def test_sql_bm25_equals_python_reference(big: ToolStore, field: int) -> None:
    info = big.info()
    assert info.n_tools == 1200
    with big.pool.connection() as conn:
        docs = field_docs(conn, info.id, field)
        compared = 0
        for q in generated_queries(25) + ["createInvoice send_email_3 github.create", "the a of"]:
            text = query_text(q)
            expected = reference_bm25(docs, lexemes(conn, text))
            got = sql_bm25(conn, info.id, field, text)
            assert len(got) == len(expected), q
            assert [t for t, _ in got] == [t for t, _ in expected], q
            for (_, s1), (_, s2) in zip(got, expected):
                assert abs(s1 - s2) <= 1e-9, q
            compared += len(got)
    assert compared > 1000  # the comparison covered real work, not empty lists


def test_statistics_stay_exact_after_upserts_and_deletes(dsn: str) -> None:
    tools = generated_tools(300, seed=3)
    with ToolStore(dsn, embedder=None, catalog="a") as store, ToolStore(dsn, embedder=None, catalog="b") as other:
        store.upsert(tools)
        other.upsert(generated_tools(50, seed=4))  # another catalog must not disturb this one's statistics
        changed = [replace(t, description=t.description + " refreshed archive", expansion="") for t in tools[:40]]
        store.upsert(changed)  # updates
        store.upsert(tools[40:200], prune=True)  # prune removes 0..39 and 200..299
        store.upsert(generated_tools(20, seed=9))  # inserts new ids
        store.remove(tools[50].id)
        with store.pool.connection() as conn:
            for s in (store, other):
                catalog = s.info().id
                assert stats_snapshot(conn, catalog) == recomputed_stats(conn, catalog)
            # direct SQL writes by a host application keep the statistics exact too
            conn.execute("update tools set description_doc = 'overridden text' where id = %s", [tools[60].id])
            conn.execute("delete from tools where id = %s", [tools[61].id])
            catalog = store.info().id
            assert stats_snapshot(conn, catalog) == recomputed_stats(conn, catalog)


def test_dropping_a_catalog_leaves_no_statistics(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="gone") as store:
        store.upsert(generated_tools(30))
        catalog = store.info().id
        store.drop_catalog()
        with store.pool.connection() as conn:
            for table in ("postings", "lexeme_stats", "field_stats", "tools"):
                count = conn.execute(f"select count(*) from {table} where catalog_id = %s", [catalog]).fetchone()  # noqa: S608
                assert count == (0,), table


def test_a_batch_is_cut_at_its_json_size(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch travels as one jsonb value (at most 256 MB): it is cut at UPSERT_BYTES of JSON as well as at
    UPSERT_BATCH tools; a tool alone over the budget goes alone. Here with a budget of 20 kB."""
    big = Tool(id="big", name="big", description="word " * 8_000)  # 40 kB: over the budget alone
    tools = [*generated_tools(30, seed=5), big, *generated_tools(30, seed=6)[:5]]
    tools = list({t.id: t for t in tools}.values())
    with ToolStore(dsn, embedder=None, catalog="one") as one:
        one.upsert(tools)
        single = {t.id: t.content_hash() for t in one.tools()}
    statements: list[str] = []

    def counting(name: str) -> str:
        statements.append(name)
        return original(name)

    original = toolstore._catalog.query
    monkeypatch.setattr(toolstore._catalog, "UPSERT_BYTES", 20_000)
    monkeypatch.setattr(toolstore._catalog, "query", counting)
    with ToolStore(dsn, embedder=None, catalog="cut") as store, store.pool.connection() as conn:
        assert len(store.upsert(tools).inserted) == len(tools)
        assert {t.id: t.content_hash() for t in store.tools()} == single
        assert stats_snapshot(conn, store.info().id) == recomputed_stats(conn, store.info().id)
    assert statements.count("upsert_tools") >= 3


def test_a_first_import_hashes_its_tools_in_the_thread_that_builds_their_rows(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into a catalog without tools every tool is new: its content hash (0.3 s of 10k tools) is computed with its row,
    in the row-building thread while Postgres writes the batch before, once; the stored hashes are the tools' own, so a
    re-import changes nothing."""
    tools = generated_tools(30, seed=7)
    hashed: list[str] = []
    original = Tool.content_hash

    def counted(tool: Tool) -> str:
        hashed.append(threading.current_thread().name)
        return original(tool)

    monkeypatch.setattr(toolstore._catalog, "UPSERT_BATCH", 10)
    monkeypatch.setattr(Tool, "content_hash", counted)
    with ToolStore(dsn, embedder=None, catalog="first") as store:
        assert len(store.upsert(tools).inserted) == 30
        assert len(hashed) == 30 and all(name.startswith("toolstore-rows") for name in hashed)
        assert store.upsert(tools).unchanged == 30  # a catalog with tools: hashed to compare, none written


@pytest.mark.slow
def test_tools_within_the_limits_overflowing_one_jsonb_value_are_written(dsn: str) -> None:
    """600 tools of three 100,000-character fields: about 270 MB of rows, past one jsonb value (the always-run
    variant above cuts at a small budget)."""
    text = "word " * 20_000
    tools = [Tool(id=f"t{i}", name=f"t{i}", description=text, expansion=text, avoid_when=text) for i in range(600)]
    with ToolStore(dsn, embedder=None, catalog="big") as store:
        assert len(store.upsert(tools).inserted) == 600


def test_an_import_in_batches_writes_what_one_batch_writes_or_nothing(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large import's tools go in by batches of UPSERT_BATCH in one transaction: the same rows and statistics as a
    single batch, and a batch failing after others were written leaves the catalog as it was."""
    tools = generated_tools(40, seed=5)
    with ToolStore(dsn, embedder=None, catalog="one") as one:
        one.upsert(tools)
        single = {t.id: t.content_hash() for t in one.tools()}
    monkeypatch.setattr(toolstore._catalog, "UPSERT_BATCH", 7)
    with ToolStore(dsn, embedder=None, catalog="batched") as store, store.pool.connection() as conn:
        report = store.upsert(tools[:30])
        assert len(report.inserted) == 30
        report = store.upsert([replace(t, description="changed") for t in tools[:10]] + tools[10:])
        assert (len(report.inserted), len(report.updated), report.unchanged) == (10, 10, 20)
        store.upsert(tools[:10])
        assert {t.id: t.content_hash() for t in store.tools()} == single
        catalog = store.info().id
        assert stats_snapshot(conn, catalog) == recomputed_stats(conn, catalog)
        before = stats_snapshot(conn, catalog)
        conn.execute(
            "create function boom() returns trigger language plpgsql as "
            "$$ begin if new.id = 'boom' then raise exception 'boom refused'; end if; return new; end $$"
        )
        conn.execute("create trigger boom before insert on tools for each row execute function boom()")
        conn.commit()
        late = [replace(t, id=f"new.{t.id}") for t in generated_tools(20, seed=6)] + [Tool(id="boom", name="boom")]
        with pytest.raises(DatabaseError, match="boom refused"):
            store.upsert(late)  # the first two batches went in before the third failed
        assert {t.id: t.content_hash() for t in store.tools()} == single
        assert stats_snapshot(conn, catalog) == before
