"""ToolStore: a catalog of tools in Postgres, and route() over it. The sync driver of the route core."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from . import _catalog, _sql
from ._connect import make_pool, resolve_dsn
from ._embedders.base import Embedder
from ._embedders.local import LocalEmbedder
from ._errors import DatabaseError, InvalidInputError, UnknownToolError
from ._fusion import DEFAULT_K_RRF, check_weights
from ._metrics import Judgement, load_judgements
from ._migrate import DEFAULT_SCHEMA, HEAD_REVISION, check_schema_name, current_revision, migrate
from ._models import CatalogInfo, ImportReport, IntentExample, Tool
from ._names import resolve_among, resolve_name
from ._observe import RouteTrace, logger, span
from ._reembed import reembed
from ._result import RouteResult
from ._route import embedder_failed, prepare_route, route_result, statement_params
from ._rows import catalog_info, name_row
from ._tune import TuneReport, tune
from ._vectors import QueryVectors

DEFAULT = "default"


def check_catalog_name(catalog: object) -> str:
    if not isinstance(catalog, str) or not catalog.strip() or "\x00" in catalog or len(catalog) > 200:
        raise InvalidInputError(f"catalog name must be a non-empty string of at most 200 characters, got {catalog!r}")
    return catalog


class ToolStore:
    """A named tool catalog in Postgres.

    ``dsn``: a libpq DSN or URI; None means ``$TOOLSTORE_DSN``, else the embedded server.
    ``embedder``: the model for dense and intent retrieval; ``"default"`` is the shipped local model,
    None turns both off (lexical only). ``catalog`` is created on first use unless ``create=False``.
    ``migrate``: bring toolstore's schema to head when it is behind (``False``: raise instead).
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
    ) -> None:
        self.catalog = check_catalog_name(catalog)
        self.schema = check_schema_name(schema)
        if embedder == "default":
            embedder = LocalEmbedder()
        elif isinstance(embedder, str):
            raise InvalidInputError(f"embedder must be an Embedder, 'default' or None, got {embedder!r}")
        self.embedder: Embedder | None = embedder
        self._query_vectors = QueryVectors()
        self.dsn = resolve_dsn(dsn)
        self.ensure_schema(self.dsn, self.schema, auto=migrate)
        self.pool = make_pool(self.dsn, schema=self.schema, max_size=pool_size)
        if create:
            with self.pool.connection() as conn:
                conn.execute(_sql.query("ensure_catalog"), {"name": catalog})

    @staticmethod
    def ensure_schema(dsn: str, schema: str, *, auto: bool) -> None:
        """Migrate ``schema`` to head when behind (``auto``), else raise DatabaseError naming the revision."""
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                revision = current_revision(conn, schema)
        except psycopg.OperationalError as exc:
            raise DatabaseError(f"cannot connect to the database: {str(exc).strip().splitlines()[0]}") from exc
        if revision == HEAD_REVISION:
            return
        if not auto:
            raise DatabaseError(
                f"toolstore schema {schema!r} is at {revision or 'nothing'}, not {HEAD_REVISION}: "
                "run `toolstore migrate`"
            )
        migrate(dsn, schema=schema)

    # -- lifecycle -----------------------------------------------------------------------------------

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> ToolStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catalogs ------------------------------------------------------------------------------------

    def info(self, *, counts: bool = True) -> CatalogInfo:
        """This catalog's id, model, dimension, settings and (unless ``counts=False``) tool and example counts."""
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            block = "get_catalog" if counts else "get_catalog_light"
            row = cur.execute(_sql.query(block), {"name": self.catalog}).fetchone()
        return catalog_info(row, self.catalog)

    def catalogs(self) -> list[dict[str, Any]]:
        """Every catalog in the database with its model and counts."""
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(_sql.query("list_catalogs")).fetchall()

    def drop_catalog(self) -> None:
        """Delete this catalog with its tools, vectors, examples and statistics."""
        with self.pool.connection() as conn:
            info = self.info(counts=False)
            with conn.transaction():
                conn.execute(_sql.query("drop_vector_indexes"), {"catalog": info.id})
                conn.execute(_sql.query("drop_catalog"), {"name": self.catalog})

    def set_fusion(
        self, *, weights: Mapping[str, float], k_rrf: float = DEFAULT_K_RRF, overfetch: int | None = None
    ) -> None:
        """Store fusion settings in the catalog; route() uses them when not given weights explicitly."""
        fusion = {"weights": check_weights(weights), "k_rrf": float(k_rrf), "overfetch": overfetch}
        info = self.info(counts=False)
        settings = {**info.settings, "fusion": fusion}
        with self.pool.connection() as conn:
            conn.execute(_sql.query("set_catalog_settings"), {"catalog": info.id, "settings": json.dumps(settings)})

    def reembed(self, embedder: Embedder) -> dict[str, Any]:
        """Switch the catalog to ``embedder``'s model: every tool and example re-embedded, nothing dropped.

        The store routes with ``embedder`` afterwards.
        """
        with self.pool.connection() as conn:
            report = reembed(conn, self.info(counts=False), embedder)
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

    def analyze(self) -> None:
        """Refresh the planner's statistics of toolstore's tables (writes of more than a few hundred rows do it)."""
        with self.pool.connection() as conn:
            _catalog.analyze(conn)

    # -- tools -----------------------------------------------------------------------------------------

    def upsert(self, tools: Iterable[Tool], *, prune: bool = False) -> ImportReport:
        """Insert or update tools (unchanged ones are skipped by content hash); ``prune`` removes the rest.

        One transaction: on any error nothing is written.
        """
        tools = list(tools)
        with span("toolstore.import", catalog=self.catalog, tools=len(tools)), self.pool.connection() as conn:
            report = _catalog.upsert_tools(conn, self.info(counts=False), tools, self.embedder, prune=prune)
        logger.debug("import catalog=%s %s", self.catalog, report.as_dict())
        return report

    def add_examples(self, examples: Iterable[IntentExample]) -> int:
        """Add labelled example requests (intent examples); returns how many were written."""
        examples = list(examples)
        if self.embedder is None:
            raise InvalidInputError("intent examples need an embedder; this ToolStore has embedder=None")
        with self.pool.connection() as conn:
            return _catalog.add_examples(conn, self.info(counts=False), examples, self.embedder)

    def tools(self, ids: Sequence[str] | None = None) -> list[Tool]:
        """All tools of the catalog (or those with the given ids), ordered by id."""
        with self.pool.connection() as conn:
            return _catalog.list_tools(conn, self.info(counts=False), ids)

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
        info = self.info(counts=False)
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            if among is not None:
                return resolve_among(name, _catalog.list_tools(conn, info, list(among)), among)
            rows = cur.execute(_sql.query("tool_names"), {"catalog": info.id}).fetchall()
            found = resolve_name(name, [name_row(r) for r in rows], offered=False)
            return _catalog.list_tools(conn, info, [found.id])[0]

    def remove(self, tool_id: str) -> None:
        """Remove one tool (its vector, examples and BM25 statistics go with it)."""
        info = self.info(counts=False)
        with self.pool.connection() as conn:
            _catalog.remove_tool(conn, info, tool_id)

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
        info = self.info(counts=False)
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
        with RouteTrace(self.catalog, query, k) as trace, self.pool.connection() as conn:
            qvec: np.ndarray | None = None
            if reason is None and self.embedder is not None:
                try:
                    with trace.stage("embed"):
                        qvec = self._query_vectors.get(conn, self.embedder, query)
                except Exception as exc:  # provider down, timeout, bad response: degrade, and say so
                    reason = embedder_failed(exc)
            with trace.stage("statement"), conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(_sql.query("route"), statement_params(info, request, qvec)).fetchall()
            with trace.stage("pack"):
                result = route_result(request, rows, dense_used=qvec is not None, degraded_reason=reason)
            return trace.done(result)
