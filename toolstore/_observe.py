"""Logging and tracing: the ``toolstore`` logger, and OpenTelemetry spans when ``opentelemetry-api`` is installed.

One DEBUG record per route (:class:`RouteTrace`): per-stage timings, how many tools each signal contributed, counts,
and whether dense retrieval ran. The request's text is added only when ``TOOLSTORE_LOG_REQUESTS=1`` (it may hold
user data); nothing toolstore logs holds a secret. Spans: ``toolstore.route`` with ``toolstore.embed``,
``toolstore.statement``, ``toolstore.rerank`` (with a reranker) and ``toolstore.pack`` inside it, and
``toolstore.import`` around an upsert. The stage timings also go into the result (``RouteResult.timings``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from functools import cache
from typing import TYPE_CHECKING, Any

from ._fusion import SIGNALS

if TYPE_CHECKING:  # annotations only: _result renders through _formats, which logs here
    from ._result import RouteResult

logger = logging.getLogger("toolstore")
#: psycopg_pool's logger, whose warnings of each attempt to connect ``_outages`` says at DEBUG for toolstore's pools.
pool_logger = logging.getLogger("psycopg.pool")


def quiet(name: str) -> None:
    """Set the logger ``name``, a library's that toolstore drives and whose INFO is its own detail (the embedded
    server's package: ``_embedded``), to WARNING, unless the application gave it a level of its own."""
    chatty = logging.getLogger(name)
    if chatty.level == logging.NOTSET:
        chatty.setLevel(logging.WARNING)


@cache
def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("toolstore")


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """An OpenTelemetry span named ``name`` (a no-op without ``opentelemetry-api``); None-valued attributes skipped."""
    tracer = _tracer()
    if tracer is None:
        return nullcontext()
    attrs = {f"toolstore.{k}": v for k, v in attributes.items() if v is not None}
    return tracer.start_as_current_span(name, attributes=attrs)


def log_requests() -> bool:
    """True when request texts may be logged (``TOOLSTORE_LOG_REQUESTS=1``), at DEBUG only."""
    return os.environ.get("TOOLSTORE_LOG_REQUESTS", "").strip().lower() in ("1", "true", "yes", "on")


class RouteTrace:
    """Times one route() call's stages, inside a ``toolstore.route`` span, and logs it once when done."""

    def __init__(self, catalog: str, query: str, k: int) -> None:
        self.catalog = catalog
        self.query = query
        self.k = k
        self.stages: dict[str, float] = {}
        self._start = time.perf_counter()
        self._span = span("toolstore.route", catalog=catalog, k=k)
        self._current: Any = None

    def __enter__(self) -> RouteTrace:
        self._current = self._span.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._span.__exit__(*exc)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name`` (``embed``, ``statement``, ``rerank``, ``pack``), in a
        ``toolstore.<name>`` span; a stage that raised (an embedder that timed out) is timed too."""
        start = time.perf_counter()
        try:
            with span(f"toolstore.{name}", catalog=self.catalog):
                yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + (time.perf_counter() - start) * 1000

    def done(self, result: RouteResult) -> RouteResult:
        """Record the outcome on the span and in one DEBUG record; returns ``result`` with its stage timings."""
        total = (time.perf_counter() - self._start) * 1000
        contributed = {s: sum(1 for r in result.tools if getattr(r.signals, s) is not None) for s in SIGNALS}
        summary: dict[str, Any] = {
            "catalog": self.catalog,
            "k": self.k,
            "tools": len(result.tools),
            "skipped": len(result.skipped),
            "tokens_used": result.tokens_used,
            "dense_used": result.dense_used,
            "degraded_reason": result.degraded_reason,
            "signals": contributed,
            "ms": {**{k: round(v, 3) for k, v in self.stages.items()}, "total": round(total, 3)},
        }
        if self._current is not None and hasattr(self._current, "set_attribute"):
            for key in ("tools", "skipped", "tokens_used", "dense_used"):
                self._current.set_attribute(f"toolstore.{key}", summary[key])
        if logger.isEnabledFor(logging.DEBUG):
            if log_requests():
                summary["query"] = self.query
            timings = " ".join(f"{k}={v:.1f}ms" for k, v in summary["ms"].items())
            signals = " ".join(f"{k}={v}" for k, v in contributed.items())
            note = f" degraded: {result.degraded_reason}" if result.degraded_reason else ""
            text = f" query={self.query!r}" if "query" in summary else ""
            logger.debug(
                "route catalog=%s tools=%d skipped=%d dense=%s %s signals[%s]%s%s",
                self.catalog,
                len(result.tools),
                len(result.skipped),
                result.dense_used,
                timings,
                signals,
                note,
                text,
                extra={"toolstore": summary},
            )
        return replace(result, timings=dict(summary["ms"]))
