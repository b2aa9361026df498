"""route() is one round trip: the store caches its catalog's row, and the route statement checks the cached version
first, so a change made by anyone (weights, model, the catalog dropped or recreated) is noticed by the next route,
which re-reads the row and routes with it. Never with the stale one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import psycopg
import pytest

from toolstore import (
    AsyncToolStore,
    DatabaseError,
    HashingEmbedder,
    InvalidInputError,
    ModelMismatchError,
    StatementTimeoutError,
    ToolStore,
    UnknownCatalogError,
    _steps,
)
from toolstore._catalog_cache import ROUTE_ATTEMPTS, STALE_CATALOG, CatalogCache
from toolstore._fusion import stored_fusion
from toolstore._replicas import Rotation
from toolstore._route import route_request, statement_params
from toolstore._sql import query

from catalog_gen import generated_queries, generated_tools

LEXICAL_ONLY = {"name": 1.0, "description": 1.0, "expansion": 1.0, "dense": 0.0, "intent": 0.0}
DENSE_ONLY = {"name": 0.0, "description": 0.0, "expansion": 0.0, "dense": 1.0, "intent": 0.0}


@contextmanager
def statements() -> Iterator[list[str]]:
    """The round trips this process makes meanwhile, each as the statements it sends: one, or those sent together in
    a pipeline (a route's statement_timeout and the statement it caps), joined by ' + '."""
    sent: list[str] = []
    original, original_pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline
    piped = {"open": False, "first": False}

    def execute(self, statement, *args, **kwargs):  # type: ignore[no-untyped-def]
        text = str(statement)[:80]
        if piped["open"] and not piped["first"]:
            sent[-1] += " + " + text
        else:
            sent.append(text)
        piped["first"] = False
        return original(self, statement, *args, **kwargs)

    @contextmanager
    def pipeline(self):  # type: ignore[no-untyped-def]
        with original_pipeline(self) as pipe:
            piped.update(open=True, first=True)
            try:
                yield pipe
            finally:
                piped.update(open=False, first=False)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.Connection.pipeline = pipeline  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]
        psycopg.Connection.pipeline = original_pipeline  # type: ignore[method-assign]


def test_route_is_one_statement_once_the_catalog_is_cached(store: ToolStore, dsn: str) -> None:
    """One round trip a route once the catalog's row is cached: the statement alone by default, and with the store's
    statement_timeout in a pipeline when it has one."""
    store.upsert(generated_tools(40))
    queries = generated_queries(5, seed=2)
    store.route(queries[0])
    with statements() as sent:
        for q in queries[1:]:
            assert store.route(q).tools
    assert len(sent) == 4 and not any(" + " in s for s in sent), sent  # no cap by default: nothing rides along
    with ToolStore(dsn, embedder=store.embedder, catalog=store.catalog, statement_timeout=10) as capped:
        capped.route(queries[0])
        with statements() as sent:
            for q in queries[1:]:
                assert capped.route(q).tools
    assert len(sent) == 4, sent
    assert all(s.count(" + ") == 1 and "statement_timeout" in s for s in sent), sent  # the cap rides along


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


def _sleeping_route(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the route statement a pg_sleep of a minute (a route the catalog made pathological); returns the list of
    route statements run, one entry each."""
    runs: list[str] = []
    raw = _steps.raw_query

    def raw_query(name: str) -> tuple[str, tuple[str, ...]]:
        if name != "route":
            return raw(name)
        runs.append(name)
        return "select pg_sleep(60)", ()

    monkeypatch.setattr(_steps, "raw_query", raw_query)
    return runs


def test_a_route_past_its_statement_timeout_is_cancelled_once(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A route had no server-side limit (``timeout`` bounds the wait for a connection only), so a statement a catalog
    made slow ran as long as it took; past ``statement_timeout`` Postgres cancels it, a StatementTimeoutError naming
    the limit, the statement run once (not tried again), and the connection's own statement_timeout left as it was."""
    query_ = generated_queries(1, seed=3)[0]
    # one connection: the one cancelled is the one whose statement_timeout is read after
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="slow", statement_timeout=0.2, pool_size=1) as store:
        store.upsert(generated_tools(20))
        store.route(query_)
        runs = _sleeping_route(monkeypatch)
        with pytest.raises(StatementTimeoutError, match=r"'route' statement ran past the store's statement_timeout "):
            store.route(query_)
        assert runs == ["route"]
        monkeypatch.undo()
        assert store.route(query_).tools
        with store.connection() as conn:
            assert conn.execute("show statement_timeout").fetchone() == ("0",)


def test_an_async_route_past_its_statement_timeout_is_cancelled_once(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """AsyncToolStore's routes are capped the same way."""
    query_ = generated_queries(1, seed=4)[0]

    async def main() -> list[str]:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="slow", statement_timeout=0.2) as store:
            await store.upsert(generated_tools(20))
            await store.route(query_)
            runs = _sleeping_route(monkeypatch)
            with pytest.raises(StatementTimeoutError, match=r"statement_timeout of 0.2 s"):
                await store.route(query_)
            monkeypatch.undo()
            assert (await store.route(query_)).tools
            return runs

    assert asyncio.run(main()) == ["route"]


def test_a_route_cancelled_by_another_before_its_statement_timeout_is_no_statement_timeout(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Postgres says "query canceled" (QueryCanceled) for a statement past statement_timeout and for one cancelled by
    someone (pg_cancel_backend, a client's cancel on Ctrl-C) alike: a route of a capped store cancelled so, long before
    its cap, was a StatementTimeoutError saying it ran past the cap, which a replica does not hand on. It is the
    driver's error, a plain DatabaseError."""
    query_ = generated_queries(1, seed=5)[0]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="slow", statement_timeout=3600) as store:
        store.upsert(generated_tools(20))
        store.route(query_)
        runs = _sleeping_route(monkeypatch)
        failed: list[BaseException] = []

        def route() -> None:
            try:
                store.route(query_)
            except Exception as exc:
                failed.append(exc)

        routing = threading.Thread(target=route)
        routing.start()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(600):  # a bound on a hang (30 s), nothing timed: until the sleeping route is seen
                sleeping = (
                    "select pid from pg_stat_activity where query = 'select pg_sleep(60)' and state = 'active'"
                    " and datname = current_database()"
                )
                pids = [pid for (pid,) in conn.execute(sleeping)]
                if pids:
                    break
                time.sleep(0.05)
            assert pids, "the route never ran"
            conn.execute("select pg_cancel_backend(%s)", [pids[0]])
        routing.join(timeout=60)
        assert runs == ["route"] and len(failed) == 1, failed
        assert isinstance(failed[0], DatabaseError) and not isinstance(failed[0], StatementTimeoutError), failed[0]
        assert "canceling statement due to user request" in str(failed[0]), failed[0]


def test_a_statement_timeout_is_handed_to_no_other_replica() -> None:
    """A route a replica cancelled past its statement_timeout would cost as much on the next server: not handed on."""
    assert not Rotation(2).hands_over(0, StatementTimeoutError("route cancelled"))


@pytest.mark.parametrize("bad", [0, -1, True, float("nan"), float("inf"), "10", 86_401])
def test_a_statement_timeout_must_be_positive_seconds_or_none(dsn: str, bad: object) -> None:
    with pytest.raises(InvalidInputError, match="statement_timeout must be a positive number of seconds"):
        ToolStore(dsn, embedder=None, statement_timeout=bad)  # type: ignore[arg-type]
