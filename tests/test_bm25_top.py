"""bm25_top() (migration 0017) skips work, never results: its rows are the full sum's best n, filters included."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from toolstore import Tool, ToolStore

# Word frequencies from very common to rare, so that a request mixes terms of every weight (as at 100k tools).
COMMON = ["data", "file", "user"]
MIDDLE = [f"mid{c}" for c in "abcdefghij"]
RARE = [f"rare{c}{d}" for c in "abcdefgh" for d in "abcdefgh"]

# The full sum, as the route statement writes it when it does not call bm25_top().
FULL = """
select p.tool_pk, round(sum(u.idf * bm25_tf(p.tf, p.dl, %(avgdl)s)) * 1e9) as score
from unnest(%(lexemes)s::text[], %(idfs)s::float8[]) as u (lexeme, idf)
cross join lateral (
    select p.tool_pk, p.tf, p.dl from postings p
    where p.catalog_id = %(catalog)s and p.field = %(field)s and p.lexeme = u.lexeme
) p
group by p.tool_pk
having %(kept)s::bigint[] is null or (p.tool_pk in (select unnest(%(kept)s::bigint[]))) <> %(dropped)s
order by 2 desc
fetch first %(n)s rows with ties
"""

TOP = """
select tool_pk, score from bm25_top(%(catalog)s, %(field)s::smallint, %(avgdl)s, %(lexemes)s::text[], %(idfs)s,
                                    %(dfs)s, %(n)s, %(kept)s::bigint[], %(dropped)s, %(budget)s)
"""

TERMS = """
select s.total_len::float8 / greatest(s.n, 1), array_agg(d.lexeme order by d.lexeme),
       array_agg(bm25_idf(d.df, s.n) order by d.lexeme), array_agg(d.df::float8 order by d.lexeme)
from field_stats s
join lexeme_stats d on d.catalog_id = s.catalog_id and d.field = s.field and d.lexeme = any(%(words)s::text[])
where s.catalog_id = %(catalog)s and s.field = %(field)s
group by s.n, s.total_len
"""


def words(rng: random.Random) -> list[str]:
    picked = [w for w, p in zip(COMMON, (0.7, 0.5, 0.3)) if rng.random() < p]
    picked += rng.sample(MIDDLE, rng.randint(0, 3)) + rng.sample(RARE, rng.randint(0, 2))
    picked += rng.choices(COMMON + MIDDLE, k=rng.randint(0, 3))  # repeated words: term frequencies above 1
    picked += ["filler"] * rng.randint(0, 12)  # lengths that vary around the average
    rng.shuffle(picked)
    return picked


def catalog_tools(n: int) -> list[Tool]:
    rng = random.Random(17)
    return [
        Tool(id=f"t{i:04d}", name=" ".join(words(rng)[:4]) or "noop", description=" ".join(words(rng)) or "noop")
        for i in range(n)
    ]


@pytest.fixture
def catalog(dsn: str) -> Iterator[tuple[str, int, list[int]]]:
    with ToolStore(dsn, embedder=None, catalog="top") as store:
        store.upsert(catalog_tools(1500))
        catalog_id = store.info().id
    with psycopg.connect(dsn) as conn:
        pks = [r[0] for r in conn.execute("select pk from toolstore.tools where catalog_id = %s", (catalog_id,))]
    yield dsn, catalog_id, pks


def term_params(conn: psycopg.Connection[Any], catalog_id: int, field: int, query: list[str]) -> dict[str, Any]:
    row = conn.execute(TERMS, {"catalog": catalog_id, "field": field, "words": query}).fetchone()
    assert row is not None and row[1], query
    return {"catalog": catalog_id, "field": field, "avgdl": row[0], "lexemes": row[1], "idfs": row[2], "dfs": row[3]}


@pytest.mark.parametrize("budget", [0.0, 200.0, 2000.0])
def test_bm25_top_returns_the_full_sums_best_n(catalog: tuple[str, int, list[int]], budget: float) -> None:
    """For every request, field, depth and filter, bm25_top() returns exactly the rows of the full sum, scores
    included; budget 0 bounds with the single rarest term, 2000 with about all of them."""
    dsn, catalog_id, pks = catalog
    rng = random.Random(int(budget) + 1)
    kept = sorted(rng.sample(pks, len(pks) // 3))
    checked = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        for _ in range(25):
            query = rng.sample(COMMON, rng.randint(1, 3)) + rng.sample(MIDDLE, rng.randint(0, 3))
            query += rng.sample(RARE, rng.randint(0, 2))
            for field in (1, 2):
                terms = term_params(conn, catalog_id, field, query)
                for n, filt, dropped in [(10, None, False), (40, None, False), (10, kept, False), (10, kept, True)]:
                    params = {**terms, "n": n, "kept": filt, "dropped": dropped, "budget": budget}
                    full = sorted(conn.execute(FULL, params).fetchall())
                    top = sorted(conn.execute(TOP, params).fetchall())
                    assert top == full, (query, field, n, filt is not None, dropped)
                    checked += len(full)
    assert checked > 2000


def test_bm25_top_returns_nothing_when_no_kept_tool_matches(catalog: tuple[str, int, list[int]]) -> None:
    """A filter that keeps only tools without any of the request's terms: no rows, as from the full sum, and not the
    unfiltered best n (no candidates must not read as no filter)."""
    dsn, catalog_id, pks = catalog
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        for field in (1, 2):
            terms = term_params(conn, catalog_id, field, ["data", "file", "mida"])
            matching = {
                r[0]
                for r in conn.execute(
                    "select tool_pk from postings where catalog_id = %s and field = %s and lexeme = any(%s)",
                    (catalog_id, field, terms["lexemes"]),
                )
            }
            others = sorted(set(pks) - matching)
            assert others and matching
            for filt, dropped in [(others, False), (sorted(matching), True)]:
                params = {**terms, "n": 10, "kept": filt, "dropped": dropped, "budget": 200.0}
                assert conn.execute(FULL, params).fetchall() == []
                assert conn.execute(TOP, params).fetchall() == [], (field, dropped)


def test_bm25_top_stays_exact_after_writes(catalog: tuple[str, int, list[int]]) -> None:
    """After updates, removals and inserts (the statistics triggers change df, lengths and the average length, and
    the stored impacts of the untouched postings stay as they were), bm25_top() still returns the full sum's rows."""
    dsn, catalog_id, _ = catalog
    rng = random.Random(5)
    tools = catalog_tools(1500)
    changed = [
        Tool(id=t.id, name=t.name, description=" ".join(words(rng) + ["data"] * rng.randint(0, 6)) or "noop")
        for t in tools[::5]
    ]
    added = [
        Tool(id=f"new{i:03d}", name=" ".join(words(rng)[:3]) or "noop", description=" ".join(words(rng)) or "x")
        for i in range(150)
    ]
    with ToolStore(dsn, embedder=None, catalog="top") as store:
        store.upsert(changed + added)
        for t in tools[1::9]:
            store.remove(t.id)
    checked = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        for _ in range(25):
            query = rng.sample(COMMON, rng.randint(1, 3)) + rng.sample(MIDDLE, rng.randint(0, 3))
            for field in (1, 2):
                terms = term_params(conn, catalog_id, field, query)
                params = {**terms, "n": 10, "kept": None, "dropped": False, "budget": 200.0}
                full = sorted(conn.execute(FULL, params).fetchall())
                assert sorted(conn.execute(TOP, params).fetchall()) == full, (query, field)
                checked += len(full)
    assert checked > 400


def test_bm25_tf_bound_bounds_bm25_tf(dsn: str) -> None:
    """The bound of a posting's term-frequency part, from its impact, at any average length: never below the
    real value, and below its trivial bound (2.2) for most postings, so that it prunes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set search_path = toolstore, public")
        row = conn.execute(
            """
            select count(*) filter (where bm25_tf(g.tf, g.dl, a.avgdl)
                                          > bm25_tf_bound(f.field, bm25_impact(f.field, g.tf, g.dl), a.avgdl)),
                   count(*) filter (where bm25_tf_bound(f.field, bm25_impact(f.field, g.tf, g.dl), a.avgdl) < 2),
                   count(*)
            from (values (1::smallint), (2::smallint), (3::smallint)) f (field)
            cross join (select tf, dl from generate_series(1, 40) tf, generate_series(0, 400, 3) dl where dl >= tf) g
            cross join unnest(array[0.5, 1, 3, 8, 16, 20, 33.3, 40, 77, 150, 900]::float8[]) a (avgdl)
            """
        ).fetchone()
    assert row is not None
    above, useful, total = row
    assert total > 100_000
    assert above == 0
    assert useful > total // 2
