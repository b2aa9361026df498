"""ToolStore: a catalog of tools in Postgres, and route() over it. The sync driver of the route core."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from . import _access, _catalog, _sql
from ._connect import DEFAULT_TIMEOUT, Connector, first_line, resolve_dsn
from ._embedders.base import Embedder
from ._embedders.local import LocalEmbedder
from ._errors import DatabaseError, InvalidInputError, ModelMismatchError, UnknownCatalogError, UnknownToolError
from ._fusion import DEFAULT_K_RRF, Fusion, check_fusion, check_weights
from ._metrics import Judgement, load_judgements
from ._migrate import DEFAULT_SCHEMA, HEAD_REVISION, check_schema_name, current_revision, migrate
from ._models import CatalogInfo, ImportReport, IntentExample, Tool
from ._names import resolve_among, resolve_name
from ._observe import RouteTrace, logger, span
from ._reembed import reembed
from ._result import RouteResult
from ._route import ROUTE_ATTEMPTS, catalog_changed, embedder_failed, prepare_route, route_result, statement_params
from ._rows import name_row, unknown_catalog
from ._tune import TuneReport, tune
from ._vectors import BREAKER_COOLDOWN, QueryVectors

T = TypeVar("T")

DEFAULT = "default"
MAX_CATALOG_CHARS = 200


class ToolStore:
    """A named tool catalog in Postgres.

    ``dsn``: a libpq DSN or URI; None means ``$TOOLSTORE_DSN``, else the embedded server.
    ``embedder``: the model for dense and intent retrieval; ``"default"`` is the shipped local model,
    None turns both off (lexical only). ``catalog`` is created by the first write (in that write's transaction,
    so a failed first write leaves nothing behind) unless ``create=False``.
    ``migrate``: bring toolstore's schema to head when it is behind (``False``: raise instead).
    ``timeout``: seconds any call may wait for the database before it raises :class:`DatabaseError`; after a
    server restart the store reconnects by itself.
    ``embedder_cooldown``: after the embedder fails at route time, routes answer lexically (and say so) without
    asking it for this many seconds; then one route probes it again.
    ``read_dsn``: one or several read replicas (hot standbys). route(), info(), tools(), get(), resolve() and
    catalogs() read from them in turn; writes go to ``dsn``. A replica that is down, or that has not yet replayed a
    catalog, hands the read to the next replica and finally to the primary; otherwise a read may lag the primary
    by the replica's replay delay.
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
    ) -> None:
        self.catalog = check_catalog_name(catalog)
        self.schema = check_schema_name(schema)
        self.create = create
        if embedder == "default":
            embedder = LocalEmbedder()
        elif isinstance(embedder, str):
            raise InvalidInputError(f"embedder must be an Embedder, 'default' or None, got {embedder!r}")
        self.embedder: Embedder | None = embedder
        self._query_vectors = QueryVectors(cooldown=embedder_cooldown)
        self.dsn = resolve_dsn(dsn)
        self.ensure_schema(self.dsn, self.schema, auto=migrate, timeout=timeout)
        self._db = Connector(self.dsn, schema=self.schema, tenant=catalog, max_size=pool_size, timeout=timeout)
        replicas = [read_dsn] if isinstance(read_dsn, str) else list(read_dsn or [])
        try:
            self._replicas = [
                Connector(d, schema=self.schema, tenant=catalog, max_size=pool_size, timeout=timeout) for d in replicas
            ]
        except BaseException:
            self._db.close()
            raise
        self._turn, self._turn_lock = -1, threading.Lock()
        self._routing: CatalogInfo | None = None  # the catalog row route() routes with (see _routing_info)

    @staticmethod
    def ensure_schema(dsn: str, schema: str, *, auto: bool, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Migrate ``schema`` to head when behind (``auto``), else raise DatabaseError naming the revision."""
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, math.ceil(timeout))) as conn:
                revision = current_revision(conn, schema)
        except psycopg.Error as exc:
            raise DatabaseError(f"cannot connect to the database: {first_line(exc)}") from exc
        if revision == HEAD_REVISION:
            return
        if not auto:
            raise DatabaseError(
                f"toolstore schema {schema!r} is at {revision or 'nothing'}, not {HEAD_REVISION}: "
                "run `toolstore migrate`"
            )
        migrate(dsn, schema=schema)

    @property
    def pool(self) -> ConnectionPool[Any]:
        """The connection pool (connections have pgvector registered and the schema on their search_path)."""
        return self._db.pool

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection (autocommit, pgvector registered, toolstore's schema first on the search_path),
        waited for at most ``timeout`` seconds; psycopg's failures inside the block become DatabaseError."""
        return self._db.connection()

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        return self._db.run(work)

    def _read(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """A read on the replicas in turn, then on the primary: a replica that is down, or has not replayed this
        catalog yet (UnknownCatalogError), hands the read on."""
        if self._replicas:
            with self._turn_lock:
                self._turn = (self._turn + 1) % len(self._replicas)
                first = self._turn
            for offset in range(len(self._replicas)):
                replica = self._replicas[(first + offset) % len(self._replicas)]
                try:
                    return replica.run(work)
                except (UnknownCatalogError, DatabaseError) as exc:
                    logger.debug("read on a replica failed, trying the next: %s", exc)
        return self._db.run(work)

    # -- lifecycle -----------------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()
        for replica in self._replicas:
            replica.close()

    def __enter__(self) -> ToolStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catalogs ------------------------------------------------------------------------------------

    def info(self, *, counts: bool = True) -> CatalogInfo:
        """This catalog's id, model, dimension, settings and (unless ``counts=False``) tool and example counts."""
        return self._read(lambda conn: self._info(conn, counts=counts))

    def _info(self, conn: psycopg.Connection[Any], *, counts: bool = False) -> CatalogInfo:
        info = _catalog.catalog_info(conn, self.catalog, counts=counts)
        if info is None:
            raise unknown_catalog(self.catalog)
        return info

    def catalogs(self) -> list[dict[str, Any]]:
        """Every catalog in the database with its model and counts."""

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(_sql.query("list_catalogs")).fetchall()

        return self._read(work)

    def drop_catalog(self) -> None:
        """Delete this catalog with its tools, vectors, examples and statistics."""
        self._run(lambda conn: _catalog.drop_catalog(conn, self.catalog))

    def set_fusion(
        self, *, weights: Mapping[str, float], k_rrf: float = DEFAULT_K_RRF, overfetch: int | None = None
    ) -> None:
        """Store fusion settings in the catalog; route() uses them when not given weights explicitly."""
        fusion = check_fusion(Fusion(weights=check_weights(weights), k_rrf=float(k_rrf), overfetch=overfetch))
        self._run(lambda conn: _catalog.set_settings(conn, self.catalog, {"fusion": fusion.as_dict()}))

    def reembed(self, embedder: Embedder) -> dict[str, Any]:
        """Switch the catalog to ``embedder``'s model: every tool and example re-embedded, nothing dropped.

        The store routes with ``embedder`` afterwards.
        """
        report = self._run(lambda conn: reembed(conn, self.catalog, embedder))
        self.embedder = embedder
        return report

    def tune(
        self,
        examples: str | os.PathLike[str] | Sequence[tuple[str, Judgement]],
        *,
        seed: int = 0,
        folds: int = 5,
        save: bool = True,
    ) -> TuneReport:
        """Learn this catalog's fusion weights from labelled requests and (unless ``save=False``) store them.

        ``examples``: a ``train.jsonl`` path or ``(query, Judgement)`` pairs. See ``toolstore tune``.
        """
        if isinstance(examples, (str, os.PathLike)):
            examples = load_judgements(examples)
        return tune(self, examples, seed=seed, folds=folds, save=save)

    def grant(self, role: str, *, write: bool = False, tenant: bool = False) -> None:
        """Let database role ``role`` see this catalog (``write``: and change it), enforced by row-level security.

        ``tenant``: instead make ``role`` a tenant role, which sees whichever catalog its connection names
        (``ToolStore`` names its own catalog on every connection); for applications with one login role.
        Run as the role that owns toolstore's tables.
        """
        self._run(lambda conn: _access.grant(conn, self.schema, None if tenant else self.catalog, role, write=write))

    def revoke(self, role: str, *, tenant: bool = False) -> bool:
        """Take this catalog (``tenant``: the tenant role) away from ``role``; False when it had no such grant."""
        return self._run(lambda conn: _access.revoke(conn, self.schema, None if tenant else self.catalog, role))

    def grants(self) -> list[dict[str, Any]]:
        """Every grant in the database: ``{"catalog": name (None for a tenant role), "role", "write"}``."""
        return self._run(_access.grants)

    def analyze(self) -> None:
        """Refresh the planner's statistics of toolstore's tables (writes of more than a few hundred rows do it)."""
        self._run(_catalog.analyze)

    # -- tools -----------------------------------------------------------------------------------------

    def upsert(self, tools: Iterable[Tool], *, prune: bool = False) -> ImportReport:
        """Insert or update tools (unchanged ones are skipped by content hash); ``prune`` removes the rest.

        One transaction: on any error nothing is written.
        """
        tools = list(tools)
        with span("toolstore.import", catalog=self.catalog, tools=len(tools)):
            report = self._run(
                lambda conn: _catalog.upsert_tools(
                    conn, self.catalog, tools, self.embedder, prune=prune, create=self.create
                )
            )
        logger.debug("import catalog=%s %s", self.catalog, report.as_dict())
        return report

    def add_examples(self, examples: Iterable[IntentExample]) -> int:
        """Add labelled example requests (intent examples); returns how many were written."""
        examples = list(examples)
        if self.embedder is None:
            raise InvalidInputError("intent examples need an embedder; this ToolStore has embedder=None")
        embedder = self.embedder
        return self._run(lambda conn: _catalog.add_examples(conn, self.catalog, examples, embedder))

    def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        """All tools of the catalog (or those with the given ids), ordered by id."""
        return self._read(lambda conn: _catalog.list_tools(conn, self._info(conn), ids))

    def get(self, tool_id: str) -> Tool:
        """One tool by id; UnknownToolError when the catalog has no such tool."""
        found = self.tools([tool_id])
        if not found:
            raise UnknownToolError(f"no tool {tool_id!r} in catalog {self.catalog!r}")
        return found[0]

    def resolve(self, name: str, *, among: Sequence[str] | None = None) -> Tool:
        """The tool a model called by ``name`` in any turn: a name ``RouteResult.definitions`` gave (``provider__name``
        when namespaced), the tool's id or its own name. ``among``: the ids of the tools the model was offered, in
        the order offered (``result.ids``), which makes any offered name exact. UnknownToolError when no tool (or
        more than one) matches."""

        def work(conn: psycopg.Connection[Any]) -> Tool:
            info = self._info(conn)
            if among is not None:
                return resolve_among(name, _catalog.list_tools(conn, info, list(among)), among)
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(_sql.query("tool_names"), {"catalog": info.id}).fetchall()
            found = resolve_name(name, [name_row(r) for r in rows], offered=False)
            return _catalog.list_tools(conn, info, [found.id])[0]

        return self._read(work)

    def remove(self, tool_id: str) -> None:
        """Remove one tool (its vector, examples and BM25 statistics go with it)."""
        self._run(lambda conn: _catalog.remove_tool(conn, self.catalog, tool_id))

    # -- routing -----------------------------------------------------------------------------------

    def route(
        self,
        query: str,
        *,
        k: int = 8,
        token_budget: int | None = None,
        weights: Mapping[str, float] | None = None,
        k_rrf: float | None = None,
        overfetch: int | None = None,
        allow: Sequence[str] | None = None,
        block: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
    ) -> RouteResult:
        """The tools for one request, best first, packed into ``token_budget`` tokens when given.

        ``k`` routed tools at most, plus the catalog's always-on tools first. ``weights`` (per signal:
        name, description, expansion, dense, intent; 0 switches one off), ``k_rrf`` and ``overfetch``
        override the catalog's tuned fusion. ``allow``/``block`` restrict by tool id, ``categories``
        keeps tools in any of the given categories.
        """

        def work(conn: psycopg.Connection[Any]) -> RouteResult:
            for attempt in range(ROUTE_ATTEMPTS):
                info, fresh = self._routing_info(conn, refresh=attempt > 0)
                try:
                    request, reason = prepare_route(
                        info,
                        self.embedder,
                        query,
                        k=k,
                        token_budget=token_budget,
                        weights=weights,
                        k_rrf=k_rrf,
                        overfetch=overfetch,
                        allow=allow,
                        block=block,
                        categories=categories,
                    )
                except ModelMismatchError:
                    if fresh:
                        raise
                    continue  # the cached row may predate a model switch
                with RouteTrace(self.catalog, query, k) as trace:
                    qvec: np.ndarray | None = None
                    if reason is None and self.embedder is not None:
                        try:
                            with trace.stage("embed"):
                                qvec = self._query_vectors.get(self.embedder, query)
                        except Exception as exc:  # provider down, timeout, bad response: degrade, and say so
                            reason = embedder_failed(exc)
                    try:
                        with trace.stage("statement"), conn.cursor(row_factory=dict_row) as cur:
                            rows = cur.execute(_sql.query("route"), statement_params(info, request, qvec)).fetchall()
                    except psycopg.Error as exc:
                        if catalog_changed(exc) and attempt + 1 < ROUTE_ATTEMPTS:
                            continue
                        raise
                    with trace.stage("pack"):
                        result = route_result(request, rows, dense_used=qvec is not None, degraded_reason=reason)
                    return trace.done(result)
            raise AssertionError("unreachable")

        return self._read(work)

    def _routing_info(self, conn: psycopg.Connection[Any], *, refresh: bool) -> tuple[CatalogInfo, bool]:
        """The catalog row route() uses: the cached one, or (first use, ``refresh``) read now and cached; and whether
        it was read now. The route statement checks the cached row's version, so a stale one is never routed with."""
        if not refresh and self._routing is not None:
            return self._routing, False
        self._routing = self._info(conn)
        return self._routing, True


def check_catalog_name(name: object) -> str:
    """A catalog name: a non-empty string of at most 200 characters, without control characters."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_CATALOG_CHARS
        or any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in name)
    ):
        raise InvalidInputError(
            f"catalog name must be a non-empty string of at most {MAX_CATALOG_CHARS} printable characters, "
            f"got {name!r:.80}"
        )
    return name
