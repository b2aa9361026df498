"""route() is one round trip: the store caches its catalog's row, and the route statement checks the cached version
first, so a change made by anyone (weights, model, the catalog dropped or recreated) is noticed by the next route,
which re-reads the row and routes with it. Never with the stale one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pytest

from toolstore import (
    AsyncToolStore,
    DatabaseError,
    HashingEmbedder,
    ModelMismatchError,
    ToolStore,
    UnknownCatalogError,
)
from toolstore._catalog_cache import ROUTE_ATTEMPTS, STALE_CATALOG, CatalogCache
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import query

from catalog_gen import generated_queries, generated_tools

LEXICAL_ONLY = {"name": 1.0, "description": 1.0, "expansion": 1.0, "dense": 0.0, "intent": 0.0}
DENSE_ONLY = {"name": 0.0, "description": 0.0, "expansion": 0.0, "dense": 1.0, "intent": 0.0}


@contextmanager
def statements() -> Iterator[list[str]]:
    """The statements this process sends meanwhile."""
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self, statement, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(str(statement)[:80])
        return original(self, statement, *args, **kwargs)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]


def test_route_is_one_statement_once_the_catalog_is_cached(store: ToolStore) -> None:
    store.upsert(generated_tools(40))
    queries = generated_queries(5, seed=2)
    store.route(queries[0])
    with statements() as sent:
        for q in queries[1:]:
            assert store.route(q).tools
    assert len(sent) == 4, sent


def test_weights_changed_elsewhere_are_used_by_the_next_route(dsn: str) -> None:
    embedder = HashingEmbedder(64)
    query_ = generated_queries(1, seed=5)[0]
    with ToolStore(dsn, embedder=embedder, catalog="c") as a, ToolStore(dsn, embedder=embedder, catalog="c") as b:
        a.upsert(generated_tools(60))
        before = a.route(query_)
        assert any(t.signals.name is not None for t in before.tools)
        b.set_fusion(weights=DENSE_ONLY)
        with statements() as sent:
            after = a.route(query_)
        assert len(sent) == 3, sent  # refused (stale), the row read again, routed
        assert all(t.signals.dense is not None and t.signals.name is None for t in after.tools)
        with ToolStore(dsn, embedder=embedder, catalog="c") as fresh:
            assert after.ids == fresh.route(query_).ids


def test_a_model_switched_elsewhere_is_refused_not_routed_with(dsn: str) -> None:
    query_ = generated_queries(1, seed=6)[0]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="m") as a:
        a.upsert(generated_tools(30))
        a.route(query_)
        with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="m") as b:
            b.reembed(HashingEmbedder(32))
        with pytest.raises(ModelMismatchError):
            a.route(query_)


def test_a_model_switched_elsewhere_is_routed_with_by_a_store_embedding_with_it(dsn: str) -> None:
    """The cached row names the old model; the store's embedder is the new one: the row is read again, not refused."""
    query_ = generated_queries(1, seed=9)[0]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="m2") as a:
        a.upsert(generated_tools(30))
        assert a.route(query_, weights=DENSE_ONLY).dense_used
        with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="m2") as b:
            b.reembed(HashingEmbedder(32))
        a.embedder = HashingEmbedder(32)
        after = a.route(query_, weights=DENSE_ONLY)
        assert after.dense_used and after.tools
        with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="m2") as fresh:
            assert after.ids == fresh.route(query_, weights=DENSE_ONLY).ids


def test_a_catalog_that_keeps_changing_gives_up_with_a_clear_error(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every try finds the catalog changed (here: every row read comes back one version behind): bounded tries."""
    store.upsert(generated_tools(10))
    keep = CatalogCache.keep
    monkeypatch.setattr(CatalogCache, "keep", lambda self, info: keep(self, replace(info, version=info.version - 1)))
    with statements() as sent, pytest.raises(DatabaseError, match="changed during each of 3 tries"):
        store.route("send an email")
    assert len(sent) == 2 * ROUTE_ATTEMPTS  # per try: the row read, the refused statement


def test_a_dropped_and_recreated_catalog_is_found_again(dsn: str) -> None:
    embedder = HashingEmbedder(64)
    old, new = generated_tools(20, seed=1), generated_tools(20, seed=2)
    query_ = generated_queries(1, seed=7)[0]
    with ToolStore(dsn, embedder=embedder, catalog="r") as a, ToolStore(dsn, embedder=embedder, catalog="r") as b:
        a.upsert(old)
        a.route(query_)
        b.drop_catalog()
        with pytest.raises(UnknownCatalogError):
            a.route(query_)
        b.upsert(new)
        assert set(a.route(query_).ids) <= {t.id for t in new}


def test_the_statement_refuses_a_stale_version(store: ToolStore) -> None:
    store.upsert(generated_tools(10))
    info = store.info()
    params = statement_params(info, route_request("send an email", stored_fusion(info.settings)), None)
    with store.connection() as conn:
        assert conn.execute(query("route"), params).fetchall()
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(query("route"), params | {"version": info.version + 1})
        assert caught.value.sqlstate == STALE_CATALOG


def test_the_version_goes_up_with_every_change_of_the_row(store: ToolStore) -> None:
    store.upsert(generated_tools(10))
    first = store.info().version
    store.set_fusion(weights=LEXICAL_ONLY)
    second = store.info().version
    store.reembed(HashingEmbedder(32))
    assert first < second < store.info().version


def test_async_routes_see_changes_too(dsn: str) -> None:
    embedder = HashingEmbedder(64)
    query_ = generated_queries(1, seed=8)[0]
    with ToolStore(dsn, embedder=embedder, catalog="async") as b:
        b.upsert(generated_tools(40))

        async def run() -> None:
            async with AsyncToolStore(dsn, embedder=embedder, catalog="async") as a:
                await a.route(query_)
                b.set_fusion(weights=DENSE_ONLY)
                after = await a.route(query_)
                assert all(t.signals.name is None for t in after.tools)
                assert after.ids == b.route(query_).ids

        asyncio.run(run())
