"""Observability: one DEBUG record per route (timings, signals, counts; the request only when enabled, never a
secret) and OpenTelemetry spans, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolstore import AsyncToolStore, Tool, ToolStore

TOOLS = [
    Tool(id="mail.send_email", name="send_email", provider="mail", description="Send an email"),
    Tool(id="cal.create_event", name="create_event", provider="cal", description="Create a calendar event"),
]


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # once per process: OpenTelemetry refuses a second provider
    return exporter


def test_route_logs_one_debug_record(
    store: ToolStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.upsert(TOOLS)
    monkeypatch.delenv("TOOLSTORE_LOG_REQUESTS", raising=False)
    with caplog.at_level(logging.INFO, logger="toolstore"):
        store.route("send an email to my secret landlord")
    assert [r for r in caplog.records if r.name == "toolstore"] == []  # nothing above DEBUG
    with caplog.at_level(logging.DEBUG, logger="toolstore"):
        caplog.clear()
        store.route("send an email to my secret landlord", k=2)
    records = [r for r in caplog.records if r.getMessage().startswith("route ")]
    assert len(records) == 1
    data = records[0].toolstore  # type: ignore[attr-defined]
    assert data["tools"] == 2 and data["catalog"] == "test" and data["dense_used"] is True
    assert set(data["ms"]) == {"embed", "statement", "pack", "total"}
    assert data["signals"]["description"] >= 1
    assert "landlord" not in records[0].getMessage() and "query" not in data  # request text is opt-in
    monkeypatch.setenv("TOOLSTORE_LOG_REQUESTS", "1")
    with caplog.at_level(logging.DEBUG, logger="toolstore"):
        caplog.clear()
        store.route("send an email to my secret landlord", k=2)
    record = next(r for r in caplog.records if r.getMessage().startswith("route "))
    assert "landlord" in record.getMessage() and record.toolstore["query"].endswith("landlord")  # type: ignore[attr-defined]


def test_spans(store: ToolStore, exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    store.upsert(TOOLS)
    store.route("send an email", k=1)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"toolstore.import", "toolstore.route", "toolstore.embed", "toolstore.statement", "toolstore.pack"} <= set(
        spans
    )
    root = spans["toolstore.route"]
    for child in ("toolstore.embed", "toolstore.statement", "toolstore.pack"):
        assert spans[child].parent is not None and spans[child].parent.span_id == root.context.span_id
    assert root.attributes["toolstore.catalog"] == "test" and root.attributes["toolstore.tools"] == 1
    assert spans["toolstore.import"].attributes["toolstore.tools"] == 2


def test_a_cancelled_async_route_ends_its_spans_where_it_ran(
    dsn: str, store: ToolStore, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    """An AsyncToolStore.route() cancelled mid-way (asyncio.wait_for, a web request's timeout, an MCP client's
    cancellation) left its steps suspended with their spans attached to the task's context; they were ended when the
    steps were collected, in another context, and OpenTelemetry logged "Failed to detach context" with a traceback
    for each span. The steps are closed where the cancellation reaches them: the spans end there, and nothing is
    logged."""
    store.upsert(TOOLS)
    exporter.clear()
    reranking = asyncio.Event()

    async def stuck(query: str, candidates: list[Any]) -> list[float]:
        reranking.set()
        await asyncio.Event().wait()  # a reranker service that does not answer
        return []

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=store.embedder, catalog=store.catalog) as astore:
            task = asyncio.create_task(astore.route("send an email", k=1, reranker=stuck))
            await reranking.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
        gc.collect()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    ended = {s.name for s in exporter.get_finished_spans()}
    assert {"toolstore.route", "toolstore.rerank"} <= ended
