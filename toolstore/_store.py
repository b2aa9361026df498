"""ToolStore: a catalog of tools in Postgres, and route() over it. The sync driver of the route core."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from . import _catalog, _housekeeping
from ._anchors import AnchorMethods
from ._breaker import BREAKER_COOLDOWN
from ._catalog_cache import CatalogCache
from ._catalog_methods import CatalogMethods
from ._closing import close_all
from ._connect import DEFAULT_TIMEOUT, Connector, check_pool_size, check_timeout
from ._drive import drive
from ._dsn import resolve_dsn
from ._embedders.base import Embedder
from ._embedders.local import LocalEmbedder
from ._errors import InvalidInputError, StoreClosedError
from ._input import check_catalog_name, check_tool_id, flag, listed
from ._metrics import Judgement, LabelledSession, load_judgements, load_sessions
from ._migrate import DEFAULT_SCHEMA, check_schema_name, ensure_schema
from ._models import ImportReport, IntentExample, Tool
from ._observe import logger, span
from ._reads import ReadMethods
from ._replicas import Replicas, Written, answer_within, replica_dsns
from ._request import RouteCall
from ._result import RouteResult
from ._route import check_calls, check_options, check_route, route_method
from ._rows import CREATE_IT
from ._session_methods import SessionMethods
from ._setup import Configure, check_configure
from ._steps import (
    DEFAULT_STATEMENT_TIMEOUT,
    Step,
    answer_sync,
    resolve_steps,
    route_steps,
    statement_timeout_ms,
)
from ._tune import TuneReport, tune
from ._vectors import QueryVectors

T = TypeVar("T")
Work = Callable[[psycopg.Connection[Any]], T]

DEFAULT = "default"
#: A forked child's stores' pools inherited from its parent (``ToolStore._open``), kept so they are never closed there.
_INHERITED: list[tuple[Connector, Replicas]] = []
CLOSED = "this ToolStore is closed: make another (`with ToolStore(...) as store:` closes it when the block ends)"


class ToolStore(ReadMethods, AnchorMethods, SessionMethods, CatalogMethods):
    """A named tool catalog in Postgres.

    ``dsn``: a libpq DSN or URI; None means ``$TOOLSTORE_DSN``, else the embedded server (an empty one is refused).
    ``embedder``: the model for dense and intent retrieval; ``"default"`` is the shipped local model,
    None turns both off (lexical only). ``catalog`` is created by the first write (in that write's transaction,
    so a failed first write leaves nothing behind) unless ``create=False``. ``schema``: the Postgres schema of
    toolstore's tables (lower case). ``migrate``: bring it to head when it is behind (``False``: raise instead).
    ``pool_size``: the most connections the store holds at once (the primary's pool, and each replica's).
    ``timeout``: seconds any call may wait for a database connection (up to a day) before it raises
    :class:`DatabaseError`, and for each answer of the server (``statement_timeout`` when longer): past it, the server
    is asked on a fresh connection, given as long, whether it still runs the statement, and the wait ends (the
    connection closed, a DatabaseError naming the database) unless it does; after a server restart the store
    reconnects by itself.
    ``statement_timeout``: seconds each statement of a route (route(), route_messages(), resolve_calls()) may run
    before Postgres cancels it, a :class:`StatementTimeoutError` (None, the default: no limit); nothing else is capped.
    ``embedder_cooldown``: after the embedder fails at route time, routes answer lexically (and say so) without
    asking it for this many seconds; then one route probes it again.
    ``read_dsn``: one or several read replicas (hot standbys). route(), info(), tools(), get(), resolve(),
    resolve_calls(), anchors() and catalogs() read from them in turn; writes go to ``dsn``. A replica that is down, or
    that has not yet replayed a catalog (or its switch to another model, a tool or value a route filter names, a tool
    that resolve(), get() or tools(ids) asks for, or one a call in route()'s messages or resolve_calls() names, unless
    it streams from the primary and has replayed all it received and this store's last write of tools), hands the read
    to the next replica and finally to the primary (one whose pool fails to connect is left out, no read waiting for
    it, until its pool connects; one that gave no connection within ``timeout``, or no answer to a statement within
    ``timeout`` (``statement_timeout`` when longer), for 10 s; a warning names it by host,
    port and dbname; one whose pool is busy is asked after the free ones and not left out; the store opens while a
    replica is down); otherwise a read may lag the primary by the replica's replay delay.
    ``transaction_pooling``: ``dsn`` (and ``read_dsn``) is a pooler in PgBouncer's ``pool_mode = transaction``; without
    it, a store there raises TransactionPoolingError once its session is found lost (README, "Connection poolers").
    ``configure``: called with each new connection of the store's pools (primary and replicas) after toolstore's set-up
    (a role, settings); what it raises is a DatabaseError naming it, at once when the store opens.
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
        configure: Configure | None = None,
    ) -> None:
        self.catalog = check_catalog_name(catalog)
        self.schema = check_schema_name(schema)
        self.create, migrate = flag(create, "create"), flag(migrate, "migrate")
        timeout, pool_size = check_timeout(timeout), check_pool_size(pool_size)
        self.transaction_pooling = flag(transaction_pooling, "transaction_pooling")
        configure = check_configure(configure)
        self._timeout_ms = statement_timeout_ms(statement_timeout)  # a route's statements' cap, 0: none
        read_dsns = replica_dsns(read_dsn)
        if embedder == "default":
            embedder = LocalEmbedder()
        elif embedder is not None and not isinstance(embedder, Embedder):  # a str, or a spec such as 'hashing'
            raise InvalidInputError(f"embedder must be an Embedder, 'default' or None, got {embedder!r:.80}")
        self.embedder: Embedder | None = embedder
        self._query_vectors = QueryVectors(cooldown=embedder_cooldown)
        self.dsn = resolve_dsn(dsn)
        ensure_schema(self.dsn, self.schema, auto=migrate, timeout=timeout)
        pool_options: dict[str, Any] = {"max_size": pool_size, "timeout": timeout}
        pool_options.update(transaction_pooling=self.transaction_pooling, configure=configure)
        self._closed, self._pid, self._fork_lock = False, os.getpid(), threading.Lock()

        within = answer_within(timeout, self._timeout_ms)  # each wait for a server's answer (``_deadline``)

        def connect() -> tuple[Connector, Replicas]:
            db = Connector(self.dsn, schema=self.schema, tenant=catalog, answer_within=within, ask=True, **pool_options)
            try:
                return db, Replicas(read_dsns, schema=self.schema, tenant=catalog, answer_within=within, **pool_options)
            except BaseException:
                db.close()
                raise

        self._connect = connect
        self._db, self._replicas = connect()
        self._written = Written(bool(self._replicas.connectors))  # what a replica must replay to say a call is unknown
        self._routing = CatalogCache()  # the catalog row route() routes with

    @property
    def pool(self) -> ConnectionPool[Any]:
        """The connection pool (connections have pgvector registered and the schema on their search_path)."""
        return self._open().pool

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection (autocommit, pgvector registered, toolstore's schema first on the search_path),
        waited for at most ``timeout`` seconds; psycopg's failures inside the block become DatabaseError. Its
        transactions are psycopg's (a COMMIT lost with the connection raises, settled or retried by nothing), and a
        ``SET`` there stays for the store's later calls: see README, "Your own SQL"."""
        return self._open().connection()

    @property
    def db(self) -> Connector:
        """The primary's connector (as AsyncToolStore's): ``db.run(work)`` runs ``work(conn)`` as the store's writes."""
        return self._open()

    def _open(self) -> Connector:
        """The primary's connector, or StoreClosedError once the store is closed (its pools are)."""
        if self._closed:
            raise StoreClosedError(CLOSED)
        if self._pid != os.getpid():  # a child forked after the store was made (gunicorn --preload)
            with self._fork_lock:
                if self._pid != os.getpid():  # the parent's pools, mid-protocol on sockets it shares: left to it
                    _INHERITED.append((self._db, self._replicas))  # never closed here (that would end its sessions)
                    self._db, self._replicas = self._connect()
                    self._pid = os.getpid()
        return self._db

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        return self._open().run(work)

    def _read(self, work: Work[T], primary: Work[T] | None = None) -> T:
        """A read on the replicas in turn (``_replicas.Rotation``), then on the primary (``primary`` when given: what
        a replica that lacks something, so hands on, would answer there)."""
        db = self._open()
        answered, result = self._replicas.run(work)
        return result if answered else db.run(primary or work)  # type: ignore[return-value]

    # -- lifecycle -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store's pools; a later call raises StoreClosedError saying it is closed (close() again: none)."""
        self._closed = True
        if self._pid != os.getpid():  # forked, never used here: the pools are the parent's
            return
        close_all([("the primary's pool", self._db.close), *self._replicas.closers()])  # each, then the first error

    def __enter__(self) -> ToolStore:
        self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catalogs (the rest: _catalog_methods) ---------------------------------------------------------

    def tune(
        self,
        examples: str | os.PathLike[str] | Sequence[tuple[str, Judgement]] = (),
        *,
        sessions: str | os.PathLike[str] | Sequence[LabelledSession] = (),
        seed: int = 0,
        folds: int = 5,
        save: bool = True,
        negatives: str | os.PathLike[str] | Sequence[str] | None = None,
    ) -> TuneReport:
        """Learn this catalog's fusion weights from labelled requests and/or labelled sessions (which tune the
        conversation signals too) and (unless ``save=False``) store them.

        ``examples``: a ``train.jsonl`` path or ``(query, Judgement)`` pairs; ``sessions``: a
        ``train_sessions.jsonl`` path or LabelledSessions. ``negatives``: requests no tool of the catalog fits (a
        file, see ``toolstore tune --negatives``, or a list of strings); with them, abstention is calibrated on those
        against ``examples`` and stored beside the fusion. See ``toolstore tune``.
        """
        save = flag(save, "save")
        if isinstance(examples, (str, os.PathLike)):
            examples = load_judgements(examples)
        if isinstance(sessions, (str, os.PathLike)):
            sessions = load_sessions(sessions)
        return tune(self, examples, sessions=sessions, seed=seed, folds=folds, save=save, negatives=negatives)

    # -- tools -----------------------------------------------------------------------------------------

    def upsert(
        self, tools: Iterable[Tool], *, prune: bool = False, examples: Iterable[IntentExample] = ()
    ) -> ImportReport:
        """Insert or update tools (unchanged ones are skipped by content hash); ``prune`` removes the rest;
        ``examples``, intent examples of these tools or the catalog's others, are added with them (as
        :meth:`add_examples`; counted in the report's ``examples``).

        One transaction: on any error (an embedder failing on the examples too) nothing is written. A bulk load
        (more than a thousand new vectors of tools, or of examples) drops the catalog's HNSW index there before the
        transaction and builds it once after it commits.
        """
        tools, examples, prune = listed(tools, "tools"), listed(examples, "intent examples"), flag(prune, "prune")
        embedder = self.embedder
        if examples and embedder is None:
            raise InvalidInputError("intent examples need an embedder; this store was made with embedder=None")

        def write(conn: psycopg.Connection[Any]) -> ImportReport:
            if not examples or embedder is None:
                return _catalog.upsert_tools(conn, self.catalog, tools, embedder, prune=prune, create=self.create)
            return _catalog.upsert_with_examples(  # both or neither, in one transaction
                conn, self.catalog, tools, examples, embedder, prune=prune, create=self.create
            )

        with span("toolstore.import", catalog=self.catalog, tools=len(tools)):
            report = self._run(write)
        self.note_tools_written()  # committed: a replica says a call names no tool only once it has replayed it
        logger.debug("import catalog=%s %s", self.catalog, report.as_dict())
        return report

    def note_tools_written(self) -> None:
        """Note where the primary's WAL is after a write of this catalog's tools other than :meth:`upsert` (an MCP
        sync): a replica says a call names no tool only once it has replayed it. One round trip; none without replicas.
        """
        if self._written.active:
            self._run(self._written.note)

    def add_examples(self, examples: Iterable[IntentExample]) -> int:
        """Add labelled example requests (intent examples); returns how many were written."""
        examples = listed(examples, "intent examples")
        if self.embedder is None:
            raise InvalidInputError("intent examples need an embedder; this store was made with embedder=None")
        embedder = self.embedder
        return self._run(lambda conn: _catalog.add_examples(conn, self.catalog, examples, embedder))

    def resolve_calls(self, names: Sequence[str], *, namespaces: Sequence[str | None] = ()) -> list[str | None]:
        """The tool id each name a model called means across the catalog (as :meth:`resolve`), None for a name that
        matches no tool or several. ``namespaces``: one per name, the Responses namespace the call was made in (a
        function_call item's ``namespace``; None: none), which only the tools in it answer."""
        names, spaces = check_calls(names, namespaces)

        def work(replica: int | None) -> Work[list[str | None]]:  # on a replica: one that may lack a tool hands on
            steps = partial(resolve_steps, names=names, namespaces=spaces, replica=replica)
            return lambda conn: drive(steps(self._info(conn)), self._answer(conn))

        return self._read(work(self._written.lsn), work(None))

    def remove(self, tool_id: str) -> None:
        """Remove one tool (its vector, examples and BM25 statistics go with it)."""
        tool_id = check_tool_id(tool_id)
        self._run(lambda conn: _housekeeping.remove_tool(conn, self.catalog, tool_id))

    # -- routing -----------------------------------------------------------------------------------

    @route_method(check_route)
    def route(self, query: str | None = None, **options: Any) -> RouteResult:
        """The tools for one request, best first, packed into ``token_budget`` tokens when given.

        ``k`` routed tools at most, plus the catalog's always-on tools first. The request is ``query``, or the latest
        user turn of ``messages`` (OpenAI Chat, Responses or Anthropic messages; dicts or SDK objects), whose last
        ``turns`` turns (default 4) are read: earlier turns feed ``context``, their tool calls (``result.unresolved``:
        those that match nothing) ``recent`` and ``transition``; with ``session``, the calls come from its log (see
        :meth:`record_calls`). A compound request is also retrieved clause by clause (``result.sub_requests``): a tool's
        best fused score in one clause, times ``split``, is added to its score. ``weights`` (per signal of ``SIGNALS``;
        0 switches one off), ``k_rrf``, ``overfetch``, ``split`` (0: never split) and ``avoid`` (the avoid-when
        penalty's weight, 0 to 1) override the catalog's tuned fusion. ``allow``/``block`` restrict by tool id (``*``
        and ``?`` are wildcards: ``"slack.*"``), ``categories``, ``providers`` and ``tags`` keep tools with any of the
        given values; one that matches no tool of the catalog is an InvalidInputError naming it. The catalog's anchors
        and its tools' avoid-when text adjust the fused scores. ``explore=True`` gives the last slot to a tool drawn
        from the fused ranks k+1..2k (``explored``; the same for the same ``seed`` and request). ``reranker(query,
        candidates) -> scores`` reorders the fused top ``k * rerank_depth`` (default 3, given only with a reranker; one
        that raises degrades to the fused order; unusable scores are an InvalidInputError). With ``abstain``, when the
        evidence says no tool fits, the result is ``abstained`` and holds only the always-on tools
        (``result.abstention``: the evidence; the model is the catalog's from ``tune(negatives=...)``, else the shipped
        default). ``fmt`` is the format the tools go to the model in (``result.definitions()``): each is counted in the
        budget as it comes there (a Responses namespace once, with its description). ``dialect``: the format of
        ``messages`` (``auto``: told apart); ``turns`` or ``dialect`` without ``messages`` is an InvalidInputError.
        ``result.explain()`` says why.
        """
        check_options("route", options)  # a misspelt option named as Python names one, with the option meant
        return self.route_checked(check_route(query, **options))

    def route_checked(self, call: RouteCall) -> RouteResult:
        """:meth:`route` of arguments checked once, a :class:`RouteCall` (``route_messages``: before it records calls).
        Every route goes through it, route()'s and ``route_messages``' alike: a subclass that wraps routing (tracing,
        default options) overrides this, not :meth:`route`, which ``route_messages`` does not call, and passes the
        call on to ``super().route_checked(call)``."""

        def work(replica: int | None) -> Work[RouteResult]:  # on a replica: one that may lack a called tool hands on
            steps = partial(route_steps, self._routing, self.embedder, call, replica=replica)
            return lambda conn: drive(steps(), self._answer(conn))

        return self._read(work(self._written.lsn), work(None))

    def _answer(self, conn: psycopg.Connection[Any]) -> Callable[[Step], Any]:
        """What answers a route step (``_steps``) on ``conn``."""
        return answer_sync(
            conn, self.embedder, self._query_vectors, lambda: self._info(conn, hint=CREATE_IT), self._timeout_ms
        )
