"""Bounded lexical retrieval (``lexical_cap``): each query term reads at most that many of its postings, highest impact
first, and the best partial sums are completed from the tools' own documents. What it returns is scored exactly: a
capped field ranking is in exact BM25 order; a cap above every posting list changes nothing; filters read everything.
How close capped rankings are to exact ones on real and large catalogs is measured, not tested (bench/route.py)."""

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
CAP = 6


@pytest.fixture(scope="module")
def big(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_test_cap_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    with ToolStore(dsn, embedder=None, catalog="big") as store:
        store.upsert(generated_tools(600, seed=11))
        yield store
    drop_database(server_dsn, name)


def field_ranking(conn: psycopg.Connection[Any], store: ToolStore, text: str, field: int, cap: int | None) -> list[str]:
    """One field's BM25 ranking as route computes it (that field's weight alone), 40 deep."""
    info = store.info()
    weights = {s: 0.0 for s in ("name", "description", "expansion", "dense", "intent")} | {FIELDS[field]: 1.0}
    params = statement_params(info, route_request(text, Fusion(weights=weights)), None)
    params |= {"lexical_cap": cap, "identifiers": [], "limit": params["n"]}
    return [r[0] for r in conn.execute(query("route"), params).fetchall()]


def exact_scores(conn: psycopg.Connection[Any], store: ToolStore, text: str, field: int) -> dict[str, float]:
    params = {"catalog": store.info().id, "field": field, "query_text": query_text(text)}
    return {r[0]: float(r[1]) for r in conn.execute(block("bm25_field"), params).fetchall()}


def cut_terms(conn: psycopg.Connection[Any], store: ToolStore, text: str, field: int, cap: int) -> int:
    row = conn.execute(
        "select count(*) from lexeme_stats where catalog_id = %s and field = %s and df > %s "
        "and lexeme = any (tsvector_to_array(to_tsvector('english', %s)))",
        [store.info().id, field, cap, query_text(text)],
    ).fetchone()
    return int(row[0])  # type: ignore[index]


def test_capped_rankings_are_in_exact_bm25_order(big: ToolStore) -> None:
    compared = cut = 0
    with big.connection() as conn:
        for text in generated_queries(12, seed=21):
            for field in FIELDS:
                got = field_ranking(conn, big, text, field, CAP)
                exact = exact_scores(conn, big, text, field)
                assert set(got) <= set(exact), "a capped ranking returned a tool that does not match the query"
                assert got == sorted(got, key=lambda t: (-round(exact[t] * 1e9), t)), (text, field)
                compared += len(got)
                cut += cut_terms(conn, big, text, field, CAP)
    assert compared > 500 and cut > 20  # long posting lists really were cut


def test_capped_rankings_find_most_of_the_exact_top(big: ToolStore) -> None:
    """Not the measured overlap (bench/route.py; this catalog's tiny vocabulary makes every query term a long list),
    a floor that catches a broken impact order."""
    cap = 30
    found = total = 0
    with big.connection() as conn:
        for text in generated_queries(12, seed=22):
            for field in (1, 2):
                exact = exact_scores(conn, big, text, field)
                top = sorted(exact, key=lambda t: (-round(exact[t] * 1e9), t))[:10]
                found += len(set(top) & set(field_ranking(conn, big, text, field, cap)[:10]))
                total += len(top)
    assert found >= 0.8 * total


def test_a_cap_above_every_posting_list_changes_nothing(big: ToolStore) -> None:
    with big.connection() as conn:
        for text in generated_queries(8, seed=23):
            for field in FIELDS:
                exact = exact_scores(conn, big, text, field)
                top = sorted(exact, key=lambda t: (-round(exact[t] * 1e9), t))[:40]
                assert field_ranking(conn, big, text, field, 10**6) == top
                assert field_ranking(conn, big, text, field, None) == top


def test_filtered_routes_read_every_posting(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstore import _route
    from toolstore._models import CatalogInfo

    monkeypatch.setattr(_route, "LEXICAL_CAP", 50)
    info = CatalogInfo(id=1, name="x", embed_model=None, embed_dim=None, settings={})
    fusion = Fusion(weights=dict.fromkeys(("name", "description", "expansion", "dense", "intent"), 1.0))
    assert statement_params(info, route_request("q", fusion), None)["lexical_cap"] == 50
    filtered = statement_params(info, route_request("q", fusion, categories=["a"]), None)
    assert filtered["lexical_cap"] is None
