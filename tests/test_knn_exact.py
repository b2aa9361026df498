"""knn() where the catalog's partition has no usable HNSW index (under ``HNSW_MIN_ROWS`` rows, or dropped for a bulk
load) searches exactly: every vector's full-precision distance, ties by tool pk (migration 0027)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from toolstore import HashingEmbedder, IntentExample, ToolStore

from catalog_gen import generated_tools

DIM = 8
LIMIT = 5
#: The order of the HNSW index's expression (halfvec), spelled so that no index serves it: what knn() sorted by
#: without an index before migration 0027.
HALFVEC_ORDER = sql.SQL(
    "select v.tool_pk from {table} v where v.catalog_id = %(c)s "
    "order by (v.embedding::halfvec(8) <=> %(q)s::halfvec(8)) + 0 limit %(n)s"
)
EXACT = sql.SQL(
    "select v.tool_pk, (v.embedding <=> %(q)s)::float8 from {table} v where v.catalog_id = %(c)s "
    "order by 2, 1 limit %(n)s"
)
KNN = "select tool_pk, distance from knn(%s, %s, %s, %s, %s, %s::bigint[], %s)"


def _queries(count: int) -> np.ndarray:
    vectors = np.random.default_rng(43).normal(size=(count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _nearest_differ(conn: psycopg.Connection[Any], table: str, catalog_id: int) -> np.ndarray:
    """A query vector whose nearest LIMIT rows by the halfvec expression are not the exact ones."""
    for q in _queries(300):
        params = {"c": catalog_id, "q": q, "n": LIMIT}
        halfvec = [r[0] for r in conn.execute(HALFVEC_ORDER.format(table=sql.Identifier(table)), params)]
        exact = [r[0] for r in conn.execute(EXACT.format(table=sql.Identifier(table)), params)]
        if halfvec != exact:
            return q
    raise AssertionError("no query whose halfvec order differs from the exact one")


@pytest.fixture
def small(dsn: str) -> Iterator[ToolStore]:
    """300 tools and 300 intent examples of 8-dimension vectors: no HNSW index on either."""
    with ToolStore(dsn, embedder=HashingEmbedder(DIM), catalog="small") as store:
        tools = generated_tools(300, seed=43)
        store.upsert(tools, examples=[IntentExample(t.id, f"please {t.description} now") for t in tools])
        yield store


@pytest.mark.parametrize("table", ["tool_vectors", "intent_examples"])
@pytest.mark.parametrize("kept", ["unfiltered", "dropped"])
def test_knn_without_an_index_returns_the_exact_nearest(small: ToolStore, table: str, kept: str) -> None:
    """Sorted by the halfvec expression of the index it did not have, knn() returned neighbours in halfvec's rounded
    order: another row set than exact search for some requests."""
    with small.connection() as conn:
        info = small.info()
        assert conn.execute("select count(*) from pg_indexes where indexname like '%%hnsw%%'").fetchone() == (0,)
        q = _nearest_differ(conn, table, info.id)
        dropped = [] if kept == "unfiltered" else [-1]  # a dropped set that leaves out no tool
        got = conn.execute(
            KNN, [table, info.id, DIM, q, LIMIT, None if kept == "unfiltered" else dropped, bool(dropped)]
        )
        exact = conn.execute(EXACT.format(table=sql.Identifier(table)), {"c": info.id, "q": q, "n": LIMIT})
        assert [r[0] for r in got.fetchall()] == [r[0] for r in exact.fetchall()]


def test_knn_without_an_index_breaks_ties_by_tool_pk(dsn: str) -> None:
    """One request given as an intent example of 40 tools: 40 rows at one distance, the nearest; the limit cuts among
    them, and the lowest tool pks are the ones returned."""
    embedder = HashingEmbedder(DIM)
    with ToolStore(dsn, embedder=embedder, catalog="ties") as store:
        tools = generated_tools(40, seed=44)
        store.upsert(tools, examples=[IntentExample(t.id, "the one request") for t in tools])
        info = store.info()
        q = embedder.embed("the one request")
        with store.connection() as conn:
            pks = sorted(r[0] for r in conn.execute("select pk from tools where catalog_id = %s", [info.id]))
            got = conn.execute(KNN, ["intent_examples", info.id, DIM, q, LIMIT, None, False]).fetchall()
    assert [pk for pk, _ in got] == pks[:LIMIT]
    assert all(d == pytest.approx(0.0, abs=1e-6) for _, d in got)
