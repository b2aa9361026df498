"""Lexical retrieval in the route statement: each BM25 field's ranking is the exact top n (the over-fetch) by score,
ties broken by id, even where a tie straddles the n-th place (the statement keeps every tool tied at the n-th score,
then breaks ties by id); with filters, the exact top n of the tools they keep. The reference is tests/retrievers.sql's
``bm25_field``, a plain join over every posting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from toolstore import ToolStore
from toolstore._fusion import Fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import query
from toolstore._text import query_text

from catalog_gen import generated_queries, generated_tools
from retrievers import block

FIELDS = {1: "name", 2: "description", 3: "expansion"}
DEPTH = 40


@pytest.fixture(scope="module")
def big(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_test_lexical_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    with ToolStore(dsn, embedder=None, catalog="big") as store:
        store.upsert(generated_tools(600, seed=11))
        yield store
    drop_database(server_dsn, name)


def field_ranking(
    conn: psycopg.Connection[Any], store: ToolStore, text: str, field: int, heavy: bool = False, **filters: Any
) -> list[str]:
    """One field's BM25 ranking as route computes it (that field's weight alone), DEPTH deep; ``heavy``: every part
    and field through bm25_top() (migration 0017), which the statement otherwise calls only from HEAVY_POSTINGS
    (10,000) postings."""
    weights = {s: 0.0 for s in ("name", "description", "expansion", "dense", "intent")} | {FIELDS[field]: 1.0}
    request = route_request(text, Fusion(weights=weights, overfetch=DEPTH), **filters)
    params = statement_params(store.info(), request, None)
    params |= {"identifiers": [], "limit": DEPTH}
    if heavy:
        params |= {"heavy_postings": 0, "heavy_share": 0.0}
    return [r[0] for r in conn.execute(query("route"), params).fetchall()]


def exact_scores(conn: psycopg.Connection[Any], store: ToolStore, text: str, field: int) -> dict[str, float]:
    params = {"catalog": store.info().id, "field": field, "query_text": query_text(text)}
    return {r[0]: float(r[1]) for r in conn.execute(block("bm25_field"), params).fetchall()}


def exact_top(scores: dict[str, float], keep: set[str] | None = None) -> list[str]:
    kept = [t for t in scores if keep is None or t in keep]
    return sorted(kept, key=lambda t: (-round(scores[t] * 1e9), t))[:DEPTH]


def straddles(scores: dict[str, float]) -> bool:
    """A tie at the DEPTH-th score with a tool below the cut: the cut must keep the ties and break them by id."""
    ranked = sorted((round(s * 1e9) for s in scores.values()), reverse=True)
    return len(ranked) > DEPTH and ranked[DEPTH - 1] == ranked[DEPTH]


HEAVY = pytest.mark.parametrize("heavy", [False, True], ids=["sum", "bm25_top"])


@HEAVY
def test_field_rankings_are_the_exact_bm25_top_with_ties_broken_by_id(big: ToolStore, heavy: bool) -> None:
    full = straddling = 0
    with big.connection() as conn:
        for text in generated_queries(16, seed=23):
            for field in FIELDS:
                scores = exact_scores(conn, big, text, field)
                got = field_ranking(conn, big, text, field, heavy)
                assert got == exact_top(scores), (text, field)
                full += len(got) == DEPTH
                straddling += straddles(scores)
    assert straddling >= 3, "no query had a tie at the cut: the test would not see a wrong tie-break"
    assert full >= 24, "most rankings should be cut at DEPTH, or the cut goes untested"


@HEAVY
def test_filtered_field_rankings_are_the_exact_top_of_the_kept_tools(big: ToolStore, heavy: bool) -> None:
    kept = {t.id for t in generated_tools(600, seed=11) if "finance" in t.categories}
    with big.connection() as conn:
        for text in generated_queries(8, seed=24):
            for field in (1, 2):
                scores = exact_scores(conn, big, text, field)
                got = field_ranking(conn, big, text, field, heavy, categories=["finance"])
                assert got == exact_top(scores, kept), (text, field)
                assert exact_top(scores, kept) != exact_top(scores)[: len(got)]  # the filter changed the ranking


@HEAVY
def test_a_filter_that_keeps_no_matching_tool_leaves_the_field_empty(big: ToolStore, heavy: bool) -> None:
    """Allowing only tools that have none of the request's terms in a field: that field ranks nothing (through
    bm25_top() too, where no candidate once read as no filter: migration 0018)."""
    ids = [t.id for t in generated_tools(600, seed=11)]
    with big.connection() as conn:
        for text in generated_queries(4, seed=25):
            for field in (1, 2):
                scores = exact_scores(conn, big, text, field)
                others = [i for i in ids if i not in scores][:3]
                assert scores and others, (text, field)
                assert field_ranking(conn, big, text, field, heavy, allow=others) == [], (text, field)
