"""The SQL loader's raw form of a block, and the route statement run through it as through psycopg's own parsing."""

from __future__ import annotations

import pytest
from psycopg import pq
from psycopg.adapt import PyFormat
from psycopg.rows import dict_row

from toolstore import HashingEmbedder, IntentExample, ToolStore
from toolstore._connect import VectorArray
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import number_placeholders, queries, query, raw_query
from toolstore._steps import Fetch, fetch_rows

from catalog_gen import generated_queries, generated_tools


def test_placeholders_are_numbered_by_first_use_and_percent_signs_unescaped() -> None:
    text, names = number_placeholders("select %(a)s, %(b)b::vector, %(a)s || '50%%' where x = %(c)s")
    assert text == "select $1, $2::vector, $1 || '50%' where x = $3"
    assert names == ("a", "b", "c")


@pytest.mark.parametrize("bad", ["select %s", "select %(a)t", "select 50% off"])
def test_other_placeholders_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="placeholder other than"):
        number_placeholders(bad)


def test_every_block_has_a_raw_form() -> None:
    for name in queries():
        text, names = raw_query(name)
        assert "%(" not in text and len(set(names)) == len(names), name


def test_the_route_statement_returns_the_same_rows_through_the_raw_cursor(dsn: str) -> None:
    """``fetch_rows`` (raw cursor, numbered placeholders, vectors as VectorArray) against psycopg's own parsing of the
    named placeholders, on split and single requests."""
    tools = generated_tools(300, seed=3)
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="raw") as store:
        store.upsert(tools)
        store.add_examples([IntentExample(t.id, q) for t, q in zip(tools[::2], generated_queries(150, seed=4))])
        info = store.info()
        texts = generated_queries(12, seed=9) + ["create an invoice and then email the customer about it"]
        with store.pool.connection() as conn:
            for text in texts:
                request = route_request(text, stored_fusion(info.settings), k=8)
                vectors = store.embedder.embed_many([text, *request.parts])
                params = statement_params(info, request, vectors[0], part_vecs=list(vectors[1:]))
                assert isinstance(params["part_vecs"], VectorArray)
                raw = fetch_rows(conn, Fetch("route", params))
                with conn.cursor(row_factory=dict_row) as cur:
                    named = cur.execute(query("route"), params).fetchall()
                assert raw == named and raw, text


def test_pool_connections_send_a_vector_array_in_binary(dsn: str) -> None:
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="raw") as store, store.pool.connection() as conn:
        assert conn.adapters.get_dumper(VectorArray, PyFormat.AUTO).format == pq.Format.BINARY
        assert conn.adapters.get_dumper(list, PyFormat.AUTO).format == pq.Format.TEXT  # what a plain list would get
