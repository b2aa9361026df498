"""AsyncToolStore: the same answers as ToolStore, under concurrent gather, with embedding off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from toolstore import (
    AsyncToolStore,
    EmbedderError,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    StoreClosedError,
    Tool,
    ToolStore,
    UnknownCatalogError,
    UnknownToolError,
)
from toolstore._connect import AsyncConnector
from toolstore._replicas import replica_names

TOOLS = [
    Tool(id="slack.send_message", name="send_message", provider="slack", description="Post a message to a channel"),
    Tool(id="gmail.send_email", name="send_email", provider="gmail", description="Send an email to someone"),
    Tool(id="cal.create_event", name="create_event", provider="cal", description="Create a calendar event"),
    Tool(id="gh.create_issue", name="create_issue", provider="gh", description="Open an issue in a repository"),
    Tool(id="jira.create_issue", name="create_issue", provider="jira", description="Create a Jira ticket"),
    Tool(id="weather.forecast", name="forecast", provider="weather", description="Weather forecast for a city"),
]
QUERIES = [
    "let the team know the build is green",
    "email my landlord",
    "schedule a meeting tomorrow",
    "file a bug about the login page",
    "will it rain in Paris",
    "send_email",
]


class ThreadRecorder(HashingEmbedder):
    """A local-style embedder (no Postgres query cache) that records the threads it ran on."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.threads: set[int] = set()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.add(threading.get_ident())
        return super().embed_batch(texts)


def test_async_store_matches_the_sync_store_under_gather(dsn: str) -> None:
    embedder = ThreadRecorder()

    async def main() -> tuple[list[list[str]], list[list[float]], int]:
        async with AsyncToolStore(dsn, embedder=embedder, catalog="async") as store:
            report = await store.upsert(TOOLS)
            assert sorted(report.inserted) == sorted(t.id for t in TOOLS)
            await store.add_examples([IntentExample("weather.forecast", "do I need an umbrella")])
            loop_thread = threading.get_ident()
            embedder.threads.clear()
            results = await asyncio.gather(*[store.route(q, k=3, token_budget=500) for q in QUERIES * 4])
            assert loop_thread not in embedder.threads  # embedding ran in worker threads
            assert (await store.get("gh.create_issue")).provider == "gh"
            assert [t.id for t in await store.tools()] == sorted(t.id for t in TOOLS)
            assert (await store.resolve("jira__create_issue")).id == "jira.create_issue"
            info = await store.info()
            assert (info.n_tools, info.n_examples) == (6, 1)
            await store.remove("cal.create_event")
            with pytest.raises(UnknownToolError):
                await store.get("cal.create_event")
            return [r.ids for r in results], [[x.score for x in r] for r in results], len(results)

    ids, scores, n = asyncio.run(main())
    assert n == len(QUERIES) * 4
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="async") as sync:
        sync.upsert([t for t in TOOLS if t.id == "cal.create_event"])  # put back what the async store removed
        expected = [sync.route(q, k=3, token_budget=500) for q in QUERIES * 4]
    assert ids == [r.ids for r in expected]
    assert sum(scores, []) == pytest.approx([x.score for r in expected for x in r])
    assert ids[5][0] == "gmail.send_email"  # exact name first, as in the sync store


def test_async_store_degrades_and_reports_errors(dsn: str) -> None:
    class Failing(HashingEmbedder):
        fail = False

        def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
            if self.fail:
                raise EmbedderError("provider down")
            return super().embed_batch(texts)

    embedder = Failing(64)

    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=embedder, catalog="degrade")
        with pytest.raises(InvalidInputError, match="not open"):
            await store.route("x")
        async with store:
            await store.upsert(TOOLS)
            embedder.fail = True
            result = await store.route("a brand new request never embedded", k=2)
            assert not result.dense_used and "provider down" in (result.degraded_reason or "")
            with pytest.raises(InvalidInputError, match="k must be"):
                await store.route("x", k=0)
        async with AsyncToolStore(dsn, embedder=None, catalog="missing", create=False) as missing:
            with pytest.raises(UnknownCatalogError):
                await missing.route("x")

    asyncio.run(main())


def test_sync_and_async_pools_set_up_their_sessions_alike(dsn: str) -> None:
    """Both pools (toolstore/_connect.py) put the schema first, set the tenant and run generic plans."""
    from toolstore._connect import AsyncConnector, Connector

    settings = (
        "select (current_schemas(false))[1], current_setting('toolstore.tenant'), current_setting('plan_cache_mode')"
    )
    sync = Connector(dsn, schema="toolstore", tenant="acme", max_size=1)
    try:
        assert sync.run(lambda conn: conn.execute(settings).fetchone()) == ("toolstore", "acme", "force_generic_plan")
    finally:
        sync.pool.close()

    async def main() -> tuple[str, str, str]:
        db = await AsyncConnector.open(dsn, schema="toolstore", tenant="acme", max_size=1)
        try:
            return await db.run(lambda conn: _fetch_one(conn, settings))
        finally:
            await db.close()

    assert asyncio.run(main()) == ("toolstore", "acme", "force_generic_plan")


async def _fetch_one(conn: psycopg.AsyncConnection[Any], statement: str) -> tuple[str, str, str]:
    cursor = await conn.execute(statement)
    row = await cursor.fetchone()
    assert row is not None
    return row


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name, None))}


#: What AsyncToolStore has that ToolStore does not: ``open`` (a ToolStore opens in its constructor; an
#: AsyncToolStore cannot await there). ``db`` is the async connector, a property as ToolStore's ``pool``.
ASYNC_ONLY = {"open"}


def test_async_store_has_the_same_methods_as_the_sync_store() -> None:
    """README: "AsyncToolStore has the same methods for asyncio"; each of them a coroutine function, as ToolStore's
    (``connection`` returns an async context manager, as ToolStore's a sync one)."""
    assert public_methods(AsyncToolStore) - ASYNC_ONLY == public_methods(ToolStore)
    for name in public_methods(ToolStore) - {"connection"}:
        assert asyncio.iscoroutinefunction(getattr(AsyncToolStore, name)), name


def test_async_store_takes_the_same_arguments_as_the_sync_store() -> None:
    """ "Arguments as for ToolStore": the constructor's and every public method's parameters (names, kinds, defaults,
    annotations) are the same in both stores."""
    for name in sorted(public_methods(ToolStore)):
        sync, aio = inspect.signature(getattr(ToolStore, name)), inspect.signature(getattr(AsyncToolStore, name))
        assert list(aio.parameters.values()) == list(sync.parameters.values()), name
    assert own_configure(AsyncToolStore) == own_configure(ToolStore)
    configure = inspect.signature(AsyncToolStore).parameters["configure"]
    assert configure.kind is inspect.Parameter.KEYWORD_ONLY and configure.default is None
    assert list(inspect.signature(AsyncToolStore).parameters)[-2:] == ["configure", "write_configure"]


def own_configure(store: type) -> list[inspect.Parameter]:
    """The constructor's parameters but ``configure`` and ``write_configure``, which differ on purpose (README, "Your
    connection set-up": an async function for the async pools, a plain one for the writer's sync pool)."""
    return [p for p in inspect.signature(store).parameters.values() if p.name not in ("configure", "write_configure")]


def test_every_async_method_is_documented_as_the_sync_ones_are() -> None:
    """help(AsyncToolStore.upsert), tune, record_calls and 30 more said nothing, where ToolStore's say what they take
    and do; each public method has a docstring, its own or ToolStore's."""
    undocumented = [name for name in public_methods(AsyncToolStore) if not getattr(AsyncToolStore, name).__doc__]
    assert undocumented == []
    assert AsyncToolStore.upsert.__doc__ == ToolStore.upsert.__doc__
    assert AsyncToolStore.route.__doc__ != ToolStore.route.__doc__  # its own kept


def test_async_store_grants_retention_and_connection_and_writes_before_open(dsn: str) -> None:
    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=None, catalog="forwarded")
        with pytest.raises(InvalidInputError, match="not open"):  # as reads, not an AttributeError
            await store.upsert([Tool(id="a", name="a")])
        async with store:
            await store.upsert([Tool(id="a", name="a")])
            await store.set_session_retention(max_calls=7, max_age_days=2)
            assert await store.session_retention() == {"max_calls": 7, "max_age_days": 2.0}
            async with store.connection() as conn:
                cursor = await conn.execute("select (current_schemas(false))[1]")
                assert await cursor.fetchone() == ("toolstore",)
            await store.grant(role)
            assert {"catalog": "forwarded", "role": role, "write": False} in await store.grants()
            assert await store.revoke(role) is True
        with pytest.raises(StoreClosedError, match="is closed"):  # closed again
            await store.remove("a")

    role = f"ts_async_{uuid.uuid4().hex[:8]}"  # roles are cluster-wide: uniquely named, dropped afterwards
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("create role {}").format(sql.Identifier(role)))
    try:
        asyncio.run(main())
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def test_async_reads_by_id_check_the_ids(dsn: str) -> None:
    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="async-ids") as store:
            await store.upsert(TOOLS[:1])
            with pytest.raises(InvalidInputError, match="tool id contains a NUL byte"):
                await store.get("a\x00")
            with pytest.raises(InvalidInputError, match="tool ids must be a list of strings, got str"):
                await store.tools("slack.send_message")  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="tool id #1 must be a string, got int"):
                await store.resolve("send_message", among=[5])  # type: ignore[list-item]
            with pytest.raises(InvalidInputError, match="need an embedder; this store was made with embedder=None"):
                await store.add_examples([IntentExample(TOOLS[0].id, "post a message")])  # not "this ToolStore"

    asyncio.run(main())


def test_concurrent_opens_make_one_pool_and_close_it(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pools = []
    original = AsyncConnector.open.__func__  # type: ignore[attr-defined]

    async def spy(cls: type[AsyncConnector], *args: Any, **kwargs: Any) -> AsyncConnector:
        connector = await original(cls, *args, **kwargs)
        pools.append(connector.pool)
        return connector

    monkeypatch.setattr(AsyncConnector, "open", classmethod(spy))

    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=None, catalog="c")
        opened = await asyncio.gather(store.open(), store.open(), store.open())
        assert all(s is store for s in opened)
        await store.close()

    asyncio.run(main())
    assert len(pools) == 1 and pools[0].closed


def test_a_closed_store_says_it_is_closed(dsn: str) -> None:
    """A call on a closed ToolStore is an InvalidInputError saying so (it was "database error: the pool 'pool-1' is
    already closed", a DatabaseError that reads as the server's), as on an AsyncToolStore never opened; on an
    AsyncToolStore closed, a StoreClosedError as README says (it was the never-opened InvalidInputError, "is not
    open"), saying open() opens it again; closing again does nothing, and an AsyncToolStore opens again."""
    store = ToolStore(dsn, embedder=None, catalog="closed")
    store.upsert(TOOLS[:1])
    store.close()
    calls = [
        lambda: store.route("post a message"),
        lambda: store.info(),
        lambda: store.upsert(TOOLS[:1]),
        lambda: store.record_calls("s", ["slack.send_message"]),
        lambda: store.connection(),
        lambda: store.pool,
        lambda: store.__enter__(),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match="ToolStore is closed"):
            call()
    store.close()

    async def main() -> None:
        astore = AsyncToolStore(dsn, embedder=None, catalog="closed")
        for acall in (astore.route("post a message"), astore.info(), astore.upsert(TOOLS[:1])):
            with pytest.raises(InvalidInputError, match="AsyncToolStore is not open") as never_opened:
                await acall
            assert not isinstance(never_opened.value, StoreClosedError)
        async with astore:
            assert (await astore.route("post a message")).ids == ["slack.send_message"]
        for acall in (astore.route("post a message"), astore.info(), astore.upsert(TOOLS[:1])):
            with pytest.raises(StoreClosedError, match=r"AsyncToolStore is closed: `await store.open\(\)`"):
                await acall
        await astore.close()
        async with astore:
            assert (await astore.info()).n_tools == 1

    asyncio.run(main())


def test_an_open_cancelled_while_the_pool_waits_for_the_server_closes_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled AsyncConnector.open (``asyncio.wait_for``, ``asyncio.timeout`` around ``async with
    AsyncToolStore(...)``) left its pool open, connecting in the background for good; it is closed, as after a
    failure."""
    from toolstore._lending import AsyncCountedPool

    pools: list[AsyncCountedPool] = []

    class Recorded(AsyncCountedPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr("toolstore._connect.AsyncCountedPool", Recorded)
    down = "postgresql://postgres@/postgres?host=/nonexistent-socket-dir"

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):  # TimeoutError from 3.11 on, not on 3.10
            await asyncio.wait_for(AsyncConnector.open(down, schema="toolstore", timeout=30), 0.5)

    asyncio.run(main())
    assert len(pools) == 1 and pools[0].closed


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ({"read_dsn": 5}, "read_dsn must be a DSN or a list of DSNs, got int"),
        ({"read_dsn": [None]}, "read_dsn must be a DSN or a list of DSNs"),
        ({"read_dsn": ["host=replica port"]}, "malformed DSN"),
        ({"embedder": "openai", "pool_size": 0}, "pool_size must be"),
        ({"embedder": "openai", "timeout": 0}, "timeout must be"),
        # past about 1e9: 'cannot connect to the database: timestamp out of range for platform time_t'
        ({"timeout": 1e10}, "timeout must be a positive number of seconds up to 86,400, got 10000000000.0"),
    ],
)
def test_both_stores_refuse_bad_arguments_alike_when_made(dsn: str, arguments: dict[str, Any], problem: str) -> None:
    """The same InvalidInputError from either store's constructor (AsyncToolStore took any read_dsn until open(), where
    a malformed one failed after the primary's pool opened, and checked the embedder before the pool's size)."""
    for store in (ToolStore, AsyncToolStore):
        with pytest.raises(InvalidInputError, match=problem):
            store(dsn, catalog="args", **arguments)


def test_an_empty_read_dsn_is_no_replica(dsn: str) -> None:
    """``read_dsn=""`` (an unset variable) is no replica, as ``dsn=""`` is no DSN; it was a replica at libpq's defaults
    (a local server on port 5432) that every read waited for."""
    with ToolStore(dsn, embedder=None, catalog="args", read_dsn="") as store:
        assert store._replicas.connectors == []

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="args", read_dsn="") as astore:
            assert astore._replicas.connectors == []

    asyncio.run(main())


def test_a_close_while_the_store_opens_leaves_it_closed(dsn: str) -> None:
    """close() called while open() is under way (a shutdown beside a first request) returned at once, and the open
    then finished: the store stayed open, its pools with it. close() now waits for the open, then closes."""

    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=None, catalog="c")
        await asyncio.gather(store.open(), store.close())
        with pytest.raises(StoreClosedError, match="is closed"):
            await store.info()

    asyncio.run(main())


def waiting_for_a_connection(pool: Any) -> None:
    """Until a call waits for one of ``pool``'s connections (its stats, popped: counted from the last pop)."""
    for _ in range(6000):
        if pool.get_stats().get("requests_waiting", 0):
            return
        threading.Event().wait(0.01)
    raise AssertionError("no call waited for a connection")


def test_a_route_a_close_overtakes_says_the_store_was_closed(dsn: str) -> None:
    """A route (or read) waiting for a connection when the store's close() ran raised "database error: the pool
    'pool-1' is closed", a DatabaseError, which reads as the server's failure (alerts, a retry), on both stores: an
    application's shutdown with requests in flight. It is a StoreClosedError saying the store was closed meanwhile."""
    closed_meanwhile = r"^this store was closed while the call was under way \(its connection pool is closed\)$"
    store = ToolStore(dsn, embedder=None, catalog="overtaken", pool_size=1, timeout=60)
    store.upsert(TOOLS[:2])
    holding, release = threading.Event(), threading.Event()

    def hold(_query: str, candidates: list[Any]) -> list[float]:  # keeps the one connection until released
        holding.set()
        release.wait(60)
        return [0.0] * len(candidates)

    held = threading.Thread(target=store.route, args=("post a message",), kwargs={"reranker": hold})
    held.start()
    assert holding.wait(60)
    failures: list[BaseException] = []
    waiting = threading.Thread(target=lambda: failures.extend(_raised(lambda: store.route("send an email"))))
    waiting.start()
    waiting_for_a_connection(store.pool)
    store.close()
    waiting.join(60)
    release.set()
    held.join(60)
    assert len(failures) == 1 and isinstance(failures[0], StoreClosedError), failures
    assert re.match(closed_meanwhile, str(failures[0]))

    async def main() -> None:
        astore = AsyncToolStore(dsn, embedder=None, catalog="overtaken", pool_size=1, timeout=60)
        await astore.open()
        aholding, arelease = asyncio.Event(), asyncio.Event()

        async def ahold(_query: str, candidates: list[Any]) -> list[float]:
            aholding.set()
            await arelease.wait()
            return [0.0] * len(candidates)

        first = asyncio.ensure_future(astore.route("post a message", reranker=ahold))
        await aholding.wait()
        second = asyncio.ensure_future(astore.route("send an email"))
        pool = astore.pool
        await asyncio.to_thread(waiting_for_a_connection, pool)
        closing = asyncio.ensure_future(astore.close())
        with pytest.raises(StoreClosedError, match=closed_meanwhile):
            await second
        arelease.set()
        await asyncio.gather(first, closing, return_exceptions=True)

    asyncio.run(main())


def _raised(call: Any) -> list[BaseException]:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test looks at what was raised
        return [exc]
    return []


def test_a_write_a_close_overtakes_says_the_async_store_was_closed(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write under way when close() runs finds the store's writer (a ToolStore) closed: its InvalidInputError named
    that ToolStore, which the caller never made, and told them to make another with `with ToolStore(...)`. It now says
    that this AsyncToolStore was closed during the write, and how to open it again."""
    entered, released = threading.Event(), threading.Event()
    upsert = ToolStore.upsert

    def held(self: ToolStore, *args: Any, **kwargs: Any) -> Any:  # the write's thread, until close() has run
        entered.set()
        released.wait(30)
        return upsert(self, *args, **kwargs)

    async def main() -> None:
        store = AsyncToolStore(dsn, embedder=None, catalog="overtaken")
        await store.open()
        await store.upsert(TOOLS[:1])  # the writer exists
        monkeypatch.setattr(ToolStore, "upsert", held)
        write = asyncio.ensure_future(store.upsert(TOOLS[1:2]))
        await asyncio.to_thread(entered.wait, 30)
        await store.close()
        released.set()
        with pytest.raises(InvalidInputError) as refused:
            await write
        assert str(refused.value).startswith("AsyncToolStore was closed while its upsert() was under way"), refused
        async with store:
            assert [t.id for t in await store.tools()] == [TOOLS[0].id]

    asyncio.run(main())


def _closed(store: ToolStore) -> bool:
    """Whether ``store`` was closed (its pool with it)."""
    try:
        return bool(store.pool.closed)
    except StoreClosedError:
        return True


def test_a_write_cancelled_while_its_writer_opens_leaves_no_writer_open(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write opens the store's writer (a ToolStore, its pool and threads) in a worker thread. A write
    cancelled meanwhile (asyncio.wait_for's timeout) left that thread to finish opening a writer nobody kept, so nobody
    closed it: its pool held its connections (and its threads ran) until the process ended. It is closed once made."""
    entered, released, made = threading.Event(), threading.Event(), []
    opens = ToolStore.__init__

    def held(self: ToolStore, *args: Any, **kwargs: Any) -> None:  # the writer's opening, until the write is cancelled
        entered.set()
        released.wait(30)
        opens(self, *args, **kwargs)
        made.append(self)

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="cancelled-writer") as store:
            monkeypatch.setattr(ToolStore, "__init__", held)
            write = asyncio.ensure_future(store.upsert(TOOLS[:1]))
            await asyncio.to_thread(entered.wait, 30)
            write.cancel()
            with pytest.raises(asyncio.CancelledError):
                await write
            released.set()
            for _ in range(600):  # the thread ends its opening, then the made writer's close runs in another
                if made and _closed(made[0]):
                    break
                await asyncio.sleep(0.05)
        assert len(made) == 1 and _closed(made[0]), "the writer made for the cancelled write is still open"

    asyncio.run(main())


def test_the_writer_takes_pool_size_connections(dsn: str) -> None:
    """Writes at once hold a connection each, up to pool_size (the writer's pool was 2 whatever pool_size said): with
    the catalog's row locked, pool_size writes wait for the lock, each on its own connection of the writer."""
    app = make_conninfo(dsn, application_name="writer-count")
    waiting = (
        "select count(*) from pg_stat_activity where application_name = 'writer-count' and wait_event_type = 'Lock'"
        " and datname = current_database()"
    )

    async def main() -> int:
        async with AsyncToolStore(app, embedder=None, catalog="w", pool_size=3, timeout=60) as store:
            await store.upsert(TOOLS)
            with psycopg.connect(dsn, autocommit=True) as holder, psycopg.connect(dsn, autocommit=True) as watcher:
                with holder.transaction():
                    holder.execute("select 1 from toolstore.catalogs where name = 'w' for update")
                    writes = [asyncio.create_task(store.set_fusion(weights={"name": w})) for w in (1, 2, 3)]
                    most = 0
                    for _ in range(200):  # until all three wait on the lock (or 20 s, when they never will)
                        most = max(most, watcher.execute(waiting).fetchone()[0])  # type: ignore[index]
                        if most == 3:
                            break
                        await asyncio.sleep(0.1)
                await asyncio.gather(*writes)
            return most

    assert asyncio.run(main()) == 3


def test_the_async_route_statement_is_prepared_at_its_first_run_on_a_connection(dsn: str) -> None:
    """As the sync store's (tests/test_route.py): two routes on one connection run the route statement's one generic
    plan twice, prepared at its first run rather than psycopg's sixth."""

    async def main() -> list[tuple[int, int]]:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(16), catalog="prepared", pool_size=1) as store:
            await store.upsert(TOOLS)
            await store.route("open an issue")
            await store.route("what is the weather tomorrow")
            async with store.pool.connection() as conn:
                cur = await conn.execute(
                    "select generic_plans, custom_plans from pg_prepared_statements"
                    " where statement like '%route_catalog(%'"
                )
                return await cur.fetchall()

    assert asyncio.run(main()) == [(2, 0)]


def _failing_once(connector: Any, text: str) -> None:
    """``connector.close`` closes its pool, then (the first time only) raises RuntimeError(text)."""
    close, failed = connector.close, []

    def sync_close() -> None:
        close()
        if not failed:
            failed.append(text)
            raise RuntimeError(text)

    async def async_close() -> None:
        await close()
        if not failed:
            failed.append(text)
            raise RuntimeError(text)

    connector.close = async_close if inspect.iscoroutinefunction(close) else sync_close


def test_a_close_that_fails_closes_every_pool_then_raises_the_first_error(dsn: str) -> None:
    """close() stopped at the first pool whose close raised, leaving the others (read replicas, the AsyncToolStore's
    writer) open; every pool is closed now, then the first error raised, the later ones noted on it. Closing again
    is fine."""
    store = ToolStore(dsn, embedder=None, catalog="close-all", read_dsn=[dsn, dsn])
    _failing_once(store._db, "the primary failed")
    _failing_once(store._replicas.connectors[0], "replica 1 failed")
    with pytest.raises(RuntimeError, match="the primary failed") as raised:
        store.close()
    assert raised.value.__notes__ == [
        "raised closing the primary's pool",
        f"closing {replica_names([dsn])[0]}'s pool failed too: RuntimeError: replica 1 failed",
    ]
    assert store._db.pool.closed and all(c.pool.closed for c in store._replicas.connectors)
    store.close()

    async def main() -> None:
        astore = AsyncToolStore(dsn, embedder=None, catalog="close-all", read_dsn=[dsn, dsn])
        await astore.open()
        await astore.upsert(TOOLS[:1])  # opens the writer, a ToolStore
        db, replicas, writer = astore._db, astore._replicas.connectors, astore._writer
        assert db is not None and writer is not None
        _failing_once(replicas[1], "replica 2 failed")
        _failing_once(writer._db, "the writer failed")
        with pytest.raises(RuntimeError, match="replica 2 failed") as araised:
            await astore.close()
        assert araised.value.__notes__ == [
            f"raised closing {replica_names([dsn, dsn])[1]}'s pool",
            "closing the writer's pools failed too: RuntimeError: the writer failed",
        ]
        assert db.pool.closed and all(c.pool.closed for c in replicas) and writer._db.pool.closed
        await astore.close()

    asyncio.run(main())


def test_a_store_opened_in_one_event_loop_says_so_when_used_or_closed_in_another(dsn: str) -> None:
    """Each asyncio.run() starts a new event loop, and the store's pools belong to the one that opened them: a close()
    in a later asyncio.run() raised RuntimeError('Event loop is closed') from inside psycopg_pool, and routes, reads
    and writes there ran on a pool whose workers had ended with the first loop (it never grew past its one
    connection). Each, and an open() there, is now an InvalidInputError naming the problem and the fix."""
    store = AsyncToolStore(dsn, embedder=None, catalog="loops")

    async def opened() -> None:
        await store.open()
        await store.upsert(TOOLS[:1])

    asyncio.run(opened())
    for call in (
        lambda: store.route("post a message"),
        lambda: store.info(),
        lambda: store.upsert(TOOLS[:1]),
        lambda: store.open(),
        lambda: store.close(),
    ):
        with pytest.raises(InvalidInputError, match=r"opened in another event loop.*async with AsyncToolStore"):
            asyncio.run(call())
