"""AsyncToolStore: ToolStore's methods for asyncio, the async driver of the same route core.

Reads and routing run on psycopg's async pool (``_connect.AsyncConnector``: the same connection setup, bounded waits,
errors and reconnection as the sync store's), or the read replicas' by the sync store's rule (``_replicas.Rotation``),
through the sans-I/O core in ``_route``, ``_rows`` and ``_names``; the embedder runs off the event loop
(``asyncio.to_thread``), behind the same circuit breaker (``_vectors.QueryVectors``).
Writes (upsert, examples, reembed, tune, ...) are bulk, transactional and rare: they run the sync write path of a
:class:`ToolStore` on the same database in a worker thread, so the write path exists once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import psycopg

from ._anchors import AsyncAnchorMethods
from ._breaker import BREAKER_COOLDOWN
from ._caller import to_thread
from ._catalog_cache import CatalogCache
from ._catalog_methods import AsyncCatalogMethods
from ._closing import aclose_all
from ._connect import DEFAULT_TIMEOUT, AsyncConnector, check_pool_size, check_timeout
from ._drive import adrive
from ._dsn import resolve_dsn
from ._embedders.base import Embedder
from ._embedders.local import LocalEmbedder
from ._errors import InvalidInputError, StoreClosedError
from ._input import check_catalog_name, flag, given_dsn, listed
from ._migrate import DEFAULT_SCHEMA, check_schema_name, ensure_schema
from ._models import ImportReport, IntentExample, Tool
from ._reads import AsyncReadMethods
from ._replicas import AsyncReplicas, Written, answer_within, replica_dsns
from ._request import RouteCall
from ._result import RouteResult
from ._route import check_calls, check_options, check_route, route_method
from ._rows import CREATE_IT
from ._session_methods import AsyncSessionMethods
from ._setup import AsyncConfigure, Configure, check_configure
from ._steps import (
    DEFAULT_STATEMENT_TIMEOUT,
    Step,
    answer_async,
    resolve_steps,
    route_steps,
    statement_timeout_ms,
)
from ._store import DEFAULT, ToolStore
from ._vectors import QueryVectors

if TYPE_CHECKING:
    pass

T = TypeVar("T")
Work = Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]

NOT_OPEN = "AsyncToolStore is not open: use `async with AsyncToolStore(...)` or `await open()`"
CLOSED = "AsyncToolStore is closed: `await store.open()` (or `async with store:`) opens it again"
WRITE = "write_configure"
WRITE_CONFIGURE = (
    "configure sets up the async pools' connections only: AsyncToolStore's writes run on a pool of sync connections "
    "(a ToolStore's), so give write_configure too, a plain function of a psycopg.Connection (lambda conn: None leaves "
    "them as toolstore sets them up)"
)
CLOSED_MEANWHILE = "AsyncToolStore was closed while its {method}() was under way: open() it again to {method}()"
OTHER_LOOP = (
    "AsyncToolStore was opened in another event loop (each asyncio.run() starts a new one) and its pools work in that "
    "loop only: open, use and close the store in one event loop, e.g. `async with AsyncToolStore(...) as store:` in "
    "the coroutine asyncio.run() runs"
)


class AsyncToolStore(AsyncReadMethods, AsyncAnchorMethods, AsyncSessionMethods, AsyncCatalogMethods):
    """:class:`ToolStore` for asyncio: ``async with AsyncToolStore(...) as store: await store.route(...)``.

    Arguments as for ToolStore (``read_dsn`` included: reads go to the replicas the same way; ``pool_size`` bounds the
    async pool and, apart, the writer's, opened on the first write). Nothing touches the database until :meth:`open`
    (``async with`` calls it). ``configure``: an async function awaited with each new connection of the async pools
    (routes and reads, primary and replicas); ``write_configure``, which it requires, a plain one called with each of
    the writer's (sync) connections.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        embedder: Embedder | str | None = "default",
        catalog: str = DEFAULT,
        schema: str = DEFAULT_SCHEMA,
        create: bool = True,
        migrate: bool = True,
        pool_size: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
        embedder_cooldown: float = BREAKER_COOLDOWN,
        read_dsn: str | Sequence[str] | None = None,
        statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT,
        transaction_pooling: bool = False,
        configure: AsyncConfigure | None = None,
        write_configure: Configure | None = None,
    ) -> None:
        self.catalog = check_catalog_name(catalog)
        self.schema = check_schema_name(schema)
        self._timeout, self._pool_size = check_timeout(timeout), check_pool_size(pool_size)  # as ToolStore's, in order
        self._timeout_ms = statement_timeout_ms(statement_timeout)
        self.transaction_pooling = flag(transaction_pooling, "transaction_pooling")
        self._configure, self._write_configure = check_configure(configure), check_configure(write_configure, WRITE)
        if configure is not None and write_configure is None:
            raise InvalidInputError(WRITE_CONFIGURE)
        self._read_dsns = replica_dsns(read_dsn)
        if embedder == "default":
            embedder = LocalEmbedder()
        elif embedder is not None and not isinstance(embedder, Embedder):  # a str, or a spec such as 'hashing'
            raise InvalidInputError(f"embedder must be an Embedder, 'default' or None, got {embedder!r:.80}")
        self.embedder: Embedder | None = embedder
        self._dsn, self._create, self._migrate = given_dsn(dsn), flag(create, "create"), flag(migrate, "migrate")
        self._query_vectors = QueryVectors(cooldown=embedder_cooldown)
        self._written = Written(bool(self._read_dsns))  # noted after each write of tools, read by the routes
        self._db: AsyncConnector | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop open() opened the pools in
        self._closed = False  # close() was called since the last open(): a call says so (StoreClosedError)
        self._replicas = AsyncReplicas([])
        self._writer: ToolStore | None = None
        self._writer_lock = asyncio.Lock()
        self._open_lock = asyncio.Lock()
        self._routing = CatalogCache()  # the catalog row route() routes with, as ToolStore's

    # -- lifecycle -----------------------------------------------------------------------------------

    async def open(self) -> AsyncToolStore:
        """Resolve the DSN, migrate when behind (in a thread: alembic is sync) and open the async pools (the
        replicas' connect in the background, as ToolStore's)."""
        async with self._open_lock:  # opens at once (asyncio.gather) make one pool, not one each
            if self._db is not None:
                self._check_loop()
                return self
            self.dsn = await asyncio.to_thread(resolve_dsn, self._dsn)
            await to_thread(ensure_schema, self.dsn, self.schema, auto=self._migrate, timeout=self._timeout)
            options: dict[str, Any] = dict(schema=self.schema, tenant=self.catalog, timeout=self._timeout)
            options.update(transaction_pooling=self.transaction_pooling, configure=self._configure)
            within = answer_within(self._timeout, self._timeout_ms)  # each wait for a server's answer (``_deadline``)
            options.update(answer_within=within)
            db = await AsyncConnector.open(self.dsn, max_size=self._pool_size, ask=True, **options)
            try:
                self._replicas = await AsyncReplicas.open(self._read_dsns, max_size=self._pool_size, **options)
            except BaseException:
                await db.close()
                raise
            self._db, self._closed, self._loop = db, False, asyncio.get_running_loop()
        return self

    async def close(self) -> None:
        """Close the pools (the writer's too), after an open() or a writer's opening under way; open() opens again."""
        if self._db is not None:
            self._check_loop()  # the pools cannot close in another loop: the store stays open in its own
        async with self._open_lock, self._writer_lock:
            db, replicas, writer = self._db, self._replicas, self._writer
            self._db, self._replicas, self._writer = None, AsyncReplicas([]), None
            self._closed = True
            primary = [("the primary's pool", db.close)] if db is not None else []
            written = [("the writer's pools", partial(asyncio.to_thread, writer.close))] if writer is not None else []
            await aclose_all([*primary, *replicas.closers(), *written])  # each, then the first error

    async def __aenter__(self) -> AsyncToolStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def db(self) -> AsyncConnector:
        """The primary's async connector, for reads: ``await db.run(work)`` awaits ``work(conn)`` and, when its
        connection was lost, once more on a fresh one, without asking whether a COMMIT lost with it took effect (as
        ToolStore.db.run does: this store's writes run there, in worker threads)."""
        if self._db is None:
            raise self._not_open()
        self._check_loop()
        return self._db

    def _check_loop(self) -> None:
        """InvalidInputError (OTHER_LOOP) when called in an event loop other than the one open() ran in; nothing
        outside one (``pool`` read from sync code)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is not self._loop:
            raise InvalidInputError(OTHER_LOOP)

    def _not_open(self) -> InvalidInputError:
        """The error of a call while the store is not open: a StoreClosedError after close(), else NOT_OPEN."""
        return StoreClosedError(CLOSED) if self._closed else InvalidInputError(NOT_OPEN)

    @property
    def pool(self) -> Any:
        """The async connection pool (as ToolStore.pool)."""
        return self.db.pool

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A pooled async connection (as ToolStore.connection): ``async with store.connection() as conn:``."""
        return self.db.connection()

    async def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run ToolStore.<method> (the one write path) in a worker thread, on a sync store opened on first use."""
        async with self._writer_lock:
            if self._db is None:  # as reads (close() too takes the lock): the writer opens on the DSN open() resolved
                raise self._not_open()
            self._check_loop()  # as reads: the store is used in the loop it was opened in
            if self._writer is None:
                self._writer = await _opened(
                    partial(
                        ToolStore,
                        self.dsn,
                        embedder=self.embedder,
                        catalog=self.catalog,
                        schema=self.schema,
                        create=self._create,
                        migrate=False,
                        pool_size=self._pool_size,  # as many writes at once as reads
                        timeout=self._timeout,
                        transaction_pooling=self.transaction_pooling,
                        configure=self._write_configure,
                    )
                )
            writer = self._writer  # a close() meanwhile closes it: the call then says this store was closed
        writer.embedder = self.embedder
        try:
            result = await to_thread(getattr(writer, method), *args, **kwargs)
        except StoreClosedError:  # the writer's: say this store was closed
            raise StoreClosedError(CLOSED_MEANWHILE.format(method=method)) from None
        self.embedder = writer.embedder  # reembed switches it
        return result

    # -- reads ---------------------------------------------------------------------------------------

    async def _read(self, work: Work[T], primary: Work[T] | None = None) -> T:
        """A read on the replicas in turn, then on the primary: :meth:`ToolStore._read` for asyncio."""
        db = self.db
        answered, result = await self._replicas.run(work)
        return result if answered else await db.run(primary or work)  # type: ignore[return-value]

    # -- routing -------------------------------------------------------------------------------------

    @route_method(check_route)
    async def route(self, query: str | None = None, **options: Any) -> RouteResult:
        """See :meth:`ToolStore.route`: the same statement, fusion, packing and degradation; ``reranker`` may also
        be a coroutine function (a plain one runs in a worker thread)."""
        check_options("route", options)  # see ToolStore.route
        return await self.route_checked(check_route(query, **options))

    async def route_checked(self, call: RouteCall) -> RouteResult:
        """See :meth:`ToolStore.route_checked`."""

        def work(replica: int | None) -> Work[RouteResult]:  # see ToolStore.route
            steps = partial(route_steps, self._routing, self.embedder, call, replica=replica)
            return lambda conn: adrive(steps(), self._answer(conn))

        return await self._read(work(self._written.lsn), work(None))

    async def resolve_calls(self, names: Sequence[str], *, namespaces: Sequence[str | None] = ()) -> list[str | None]:
        """See :meth:`ToolStore.resolve_calls`."""
        names, spaces = check_calls(names, namespaces)

        def work(replica: int | None) -> Work[list[str | None]]:  # see ToolStore.resolve_calls
            async def resolve(conn: psycopg.AsyncConnection[Any]) -> list[str | None]:
                steps = resolve_steps(await self._info(conn), names, spaces, replica=replica)
                return await adrive(steps, self._answer(conn))

            return resolve

        return await self._read(work(self._written.lsn), work(None))

    def _answer(self, conn: psycopg.AsyncConnection[Any]) -> Callable[[Step], Awaitable[Any]]:
        """What answers a route step (``_steps``) on ``conn``: :meth:`ToolStore._answer` for asyncio."""
        return answer_async(
            conn, self.embedder, self._query_vectors, lambda: self._info(conn, hint=CREATE_IT), self._timeout_ms
        )

    # -- writes (the sync write path, in a worker thread; anchors: _anchors, the catalog's: _catalog_methods) ---

    async def upsert(
        self, tools: Iterable[Tool], *, prune: bool = False, examples: Iterable[IntentExample] = ()
    ) -> ImportReport:
        tools, examples, prune = listed(tools, "tools"), listed(examples, "intent examples"), flag(prune, "prune")
        report = cast("ImportReport", await self._write("upsert", tools, prune=prune, examples=examples))
        await self.note_tools_written()  # the writer (a ToolStore without replicas) notes nothing
        return report

    async def note_tools_written(self) -> None:
        if self._written.active:
            await self.db.run(self._written.anote)

    async def add_examples(self, examples: Iterable[IntentExample]) -> int:
        return cast("int", await self._write("add_examples", listed(examples, "intent examples")))

    async def remove(self, tool_id: str) -> None:
        await self._write("remove", tool_id)


async def _opened(make: Callable[[], ToolStore]) -> ToolStore:
    """``make()``, a writer, opened in a worker thread; when the wait for it is cancelled (the write's caller gave up),
    the thread, which cannot be stopped, goes on, and the writer it makes is closed then (its pool and threads)."""
    opening = asyncio.ensure_future(to_thread(make))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_unkept)
        raise


def _close_unkept(opening: asyncio.Future[ToolStore]) -> None:
    """Close the writer a cancelled :func:`_opened` made (in a worker thread: it joins the pool's threads)."""
    if opening.cancelled() or opening.exception() is not None:
        return
    writer = opening.result()
    try:
        asyncio.get_running_loop().run_in_executor(None, writer.close)
    except RuntimeError:  # the loop's executor is shut down (asyncio.run ending): here, then
        writer.close()


def _share_docs() -> None:
    """Each public method of AsyncToolStore (and of its mixins) that has no docstring of its own takes ToolStore's, so
    ``help(AsyncToolStore.upsert)`` says what ``help(ToolStore.upsert)`` does (it said nothing)."""
    for name in dir(AsyncToolStore):
        method, sync = getattr(AsyncToolStore, name), getattr(ToolStore, name, None)
        if not name.startswith("_") and callable(method) and not method.__doc__ and getattr(sync, "__doc__", None):
            method.__doc__ = sync.__doc__


_share_docs()
