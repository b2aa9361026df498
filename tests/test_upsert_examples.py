"""``upsert(tools, examples=...)``: a catalog's tools and their intent examples in one transaction, on both stores:
both written, or (an embedder failing on the examples) neither."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import toolstore._bulk_load
import toolstore._catalog
import toolstore._indexes
import toolstore._reembed
from toolstore import (
    AsyncToolStore,
    EmbedderUnavailableError,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    InvalidToolError,
    OpenAIEmbedder,
    Tool,
    ToolStore,
    UnknownToolError,
)
from toolstore._indexes import VECTOR_TABLES
from toolstore.testing.fake_openai import FakeOpenAI

from catalog_gen import generated_tools

TOOLS = [
    Tool(id="gmail.send_email", name="send_email", description="Send an email to a recipient"),
    Tool(id="weather.forecast", name="forecast", description="Weather forecast for a city"),
]
EXAMPLES = [
    IntentExample(tool_id="gmail.send_email", query="mail my landlord"),
    IntentExample(tool_id="weather.forecast", query="will it rain in Oslo"),
]


def _embedder(server: FakeOpenAI) -> OpenAIEmbedder:
    return OpenAIEmbedder(model="bge", api_key=server.api_key, base_url=server.base_url, max_retries=0)


def _written(dsn: str, catalog: str) -> tuple[list[str], int]:
    with ToolStore(dsn, embedder=None, catalog=catalog) as store:
        return [t.id for t in store.tools()], store.info().n_examples


def test_upsert_writes_tools_and_examples_together(dsn: str) -> None:
    with FakeOpenAI(models={"bge": 64}) as server, ToolStore(dsn, embedder=_embedder(server), catalog="both") as store:
        report = store.upsert(TOOLS, examples=EXAMPLES)
    assert (len(report.inserted), report.examples, report.as_dict()["examples"]) == (2, 2, 2)
    assert _written(dsn, "both") == (["gmail.send_email", "weather.forecast"], 2)


@pytest.mark.parametrize("store_class", [ToolStore, AsyncToolStore])
def test_an_embedder_failing_on_the_examples_leaves_the_catalog_as_it_was(dsn: str, store_class: type) -> None:
    """Written in two calls, upsert then add_examples, the tools stayed without their examples."""
    with ToolStore(dsn, embedder=None, catalog="neither") as store:
        store.upsert([Tool(id="mine.tool", name="mine", description="a tool of my own")])
    with FakeOpenAI(models={"bge": 64}) as server:
        server.pass_next(1)  # the tools' one request
        server.fail_next(503, times=50)

        async def upsert_async() -> None:
            async with AsyncToolStore(dsn, embedder=_embedder(server), catalog="neither") as store:
                await store.upsert(TOOLS, prune=True, examples=EXAMPLES)

        with pytest.raises(EmbedderUnavailableError):
            if store_class is ToolStore:
                with ToolStore(dsn, embedder=_embedder(server), catalog="neither") as store:
                    store.upsert(TOOLS, prune=True, examples=EXAMPLES)
            else:
                asyncio.run(upsert_async())
        assert len(server.embedding_batches()) > 1  # it did get to the examples
    assert _written(dsn, "neither") == (["mine.tool"], 0)


def test_examples_without_an_embedder_are_refused_before_any_write(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="none") as store:
        with pytest.raises(InvalidInputError, match="intent examples need an embedder"):
            store.upsert(TOOLS, examples=EXAMPLES)
        assert all(c["name"] != "none" for c in store.catalogs())


@pytest.mark.parametrize("with_examples", [False, True])
def test_a_bulk_upsert_without_examples_still_drops_the_indexes_first(
    dsn: str, monkeypatch: pytest.MonkeyPatch, with_examples: bool
) -> None:
    """upsert ran every write in an outer transaction (for the examples' sake), so a bulk load of tools alone no
    longer dropped the catalog's HNSW indexes before it (one build after it beats updating them row by row); with
    examples it does too, before the transaction."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 20)
    monkeypatch.setattr(toolstore._bulk_load, "BULK_VECTORS", 10)
    dropped: list[str] = []
    drop_indexes = toolstore._bulk_load.drop_indexes
    monkeypatch.setattr(
        toolstore._bulk_load, "drop_indexes", lambda *a, **kw: dropped.append("drop") or drop_indexes(*a, **kw)
    )
    tools = generated_tools(60, seed=3)
    examples = [IntentExample(tool_id=tools[0].id, query="a request")] if with_examples else []
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="bulk") as store:
        store.upsert(tools[:25])  # an index: 25 vectors, at least HNSW_MIN_ROWS
        assert dropped == []
        report = store.upsert(tools, examples=examples)
        assert len(report.inserted) == 35 and store.info().n_tools == 60
    assert dropped == ["drop"]  # with examples too: dropped before their one transaction


def _index_oids(store: ToolStore) -> dict[str, int]:
    info = store.info()
    assert info.embed_dim is not None
    names = {table: toolstore._indexes.index_name(table, info.id, info.embed_dim) for table in VECTOR_TABLES}
    with store.connection() as conn:
        rows = conn.execute(
            "select c.relname, c.oid from pg_class c join pg_index i on i.indexrelid = c.oid "
            "where c.relname = any(%s) and i.indisvalid",
            [list(names.values())],
        ).fetchall()
    found = dict(rows)
    return {table: found[name] for table, name in names.items() if name in found}


def _bulk_catalog(monkeypatch: pytest.MonkeyPatch, store: ToolStore) -> list[Tool]:
    """A catalog with both HNSW indexes (25 tools, 25 examples; indexes from 20 rows, bulk loads past 10)."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 20)
    monkeypatch.setattr(toolstore._bulk_load, "BULK_VECTORS", 10)
    tools = generated_tools(60, seed=5)
    store.upsert(tools[:25], examples=[IntentExample(t.id, f"please {t.description}") for t in tools[:25]])
    assert set(_index_oids(store)) == set(VECTOR_TABLES)
    return tools


def test_a_bulk_upsert_with_examples_builds_both_indexes_once_after_it(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction kept the catalog's HNSW indexes through the load, updated row by row (slower than upsert then
    add_examples, which drop them before and build them once after); now each index the write loads in bulk is
    dropped before the transaction and built again after it: a new index."""
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="bulk-both") as store:
        tools = _bulk_catalog(monkeypatch, store)
        before = _index_oids(store)
        examples = [IntentExample(t.id, f"could you {t.description}") for t in tools[25:]]
        report = store.upsert(tools, examples=examples)
        assert (len(report.inserted), report.examples) == (35, 35)
        after = _index_oids(store)
        info = store.info()
    assert set(after) == set(VECTOR_TABLES)
    assert all(after[table] != before[table] for table in VECTOR_TABLES), (before, after)
    assert (info.n_tools, info.n_examples) == (60, 60)


def test_a_failed_bulk_upsert_with_examples_writes_nothing_and_puts_the_indexes_back(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="bulk-failed") as store:
        tools = _bulk_catalog(monkeypatch, store)
        examples = [IntentExample(t.id, f"could you {t.description}") for t in tools[25:]]
        examples.append(IntentExample("no.such_tool", "a request for a tool the catalog lacks"))
        with pytest.raises(UnknownToolError):
            store.upsert(tools, examples=examples)
        info = store.info()
        assert set(_index_oids(store)) == set(VECTOR_TABLES)
    assert (info.n_tools, info.n_examples) == (25, 25)


@pytest.mark.parametrize("write", ["upsert", "upsert with examples", "reembed"])
def test_a_failed_bulk_write_whose_indexes_cannot_be_put_back_raises_its_own_error(
    dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, write: str
) -> None:
    """A failed bulk write builds the HNSW indexes it dropped again; when that build failed too (here a deadlock
    victim four times), its DatabaseError ('a concurrent write kept conflicting') was raised in place of the write's
    own error. The write's error is raised, with a note saying the indexes were not built and how to build them
    (logged as a warning too), which ``upsert([])`` then does."""
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="bulk-unrestored") as store:
        tools = _bulk_catalog(monkeypatch, store)
        failing = [True]
        ensure = toolstore._indexes.ensure_indexes

        def deadlocked(conn: Any, info: Any) -> None:
            if failing[0]:
                raise psycopg.errors.DeadlockDetected("deadlock detected")
            ensure(conn, info)

        def clash(*args: Any) -> None:
            if failing[0]:
                raise InvalidToolError("a namespace clash")

        monkeypatch.setattr(toolstore._indexes, "ensure_indexes", deadlocked)
        monkeypatch.setattr(toolstore._catalog, "_check_namespaces", clash)
        monkeypatch.setattr(toolstore._reembed, "write_tool_vectors", clash)
        examples = [IntentExample(t.id, f"could you {t.description}") for t in tools[25:]]
        with pytest.raises(InvalidToolError, match="a namespace clash") as raised:
            if write == "reembed":
                store.reembed(HashingEmbedder(32))
            else:
                store.upsert(tools, examples=examples if write == "upsert with examples" else [])
        notes = getattr(raised.value, "__notes__", [])
        assert len(notes) == 1, notes
        assert "HNSW indexes, dropped before this write, were not built again" in notes[0]
        assert "a concurrent write kept conflicting" in notes[0] and "ToolStore.upsert([]) will do" in notes[0]
        assert notes[0] in caplog.text
        dropped = {
            "upsert": {"tool_vectors"},
            "upsert with examples": set(VECTOR_TABLES),
            "reembed": set(VECTOR_TABLES),
        }[write]
        assert set(_index_oids(store)) == set(VECTOR_TABLES) - dropped
        failing[0] = False
        store.upsert([])
        assert set(_index_oids(store)) == set(VECTOR_TABLES)
        assert (store.info().n_tools, store.info().n_examples) == (25, 25)


def test_a_reembed_drops_only_the_index_of_a_table_it_loads_in_bulk(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """reembed dropped both HNSW indexes before it when its tools and examples together passed BULK_VECTORS, where
    upsert and add_examples drop a table's index only when that table takes more than BULK_VECTORS vectors: a
    reembed of 1,001 tools and 25 examples left the examples' index missing for the whole reembed (intent routes
    searched exactly meanwhile; a reembed killed then left it missing until the next write) and built it again for
    nothing. It follows their rule now: the tools' index is built anew, the examples' index is kept."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 20)
    tools = generated_tools(toolstore._bulk_load.BULK_VECTORS + 1, seed=7)
    examples = [IntentExample(t.id, f"please {t.description}") for t in tools[:25]]
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="reembed-one-bulk") as store:
        store.upsert(tools, examples=examples)
        before = _index_oids(store)
        assert set(before) == set(VECTOR_TABLES)
        report = store.reembed(HashingEmbedder(32))
        after = _index_oids(store)
    assert (report["tools"], report["examples"]) == (len(tools), 25)
    assert set(after) == set(VECTOR_TABLES)
    assert after["tool_vectors"] != before["tool_vectors"]  # more than BULK_VECTORS: dropped, built once after
    assert after["intent_examples"] == before["intent_examples"], (before, after)


def test_a_failed_reembed_that_dropped_no_index_says_nothing_of_indexes(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reembed that dropped no index (too few vectors for a bulk load) tried to put them back after a failure all
    the same, and since 7cc0bcd, when that failed too, noted on its error that indexes dropped before it were not
    built: none were. It builds nothing then, and its error carries no such note."""
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="reembed-small") as store:
        store.upsert(generated_tools(5, seed=6))
        built: list[str] = []

        def deadlocked(conn: Any, info: Any) -> None:
            built.append(info.name)
            raise psycopg.errors.DeadlockDetected("deadlock detected")

        def failing(*args: Any) -> None:
            raise InvalidToolError("a failed write")

        monkeypatch.setattr(toolstore._indexes, "ensure_indexes", deadlocked)
        monkeypatch.setattr(toolstore._reembed, "write_tool_vectors", failing)
        with pytest.raises(InvalidToolError, match="a failed write") as raised:
            store.reembed(HashingEmbedder(32))
        assert (built, getattr(raised.value, "__notes__", [])) == ([], [])


def test_a_bulk_upsert_with_examples_looks_at_its_tools_once_before_the_lock(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """upsert(tools, examples=...) of more than BULK_VECTORS tools checked and hashed them (the first look: stored
    hashes, expansions to carry, vectorless tools) to decide which indexes to drop, then upsert_tools did it all
    again; it reuses that look: one check and one look before the lock, one under it, and the same report."""
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="bulk-once") as store:
        tools = _bulk_catalog(monkeypatch, store)
        calls: list[str] = []
        for module in (toolstore._bulk_load, toolstore._catalog):  # the first look's, the write's
            for name in ("check_tools", "tool_changes"):
                original = getattr(module, name)

                def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                    calls.append(_name)
                    return _original(*args, **kwargs)

                monkeypatch.setattr(module, name, counted)
        hashed = []
        content_hash = Tool.content_hash
        monkeypatch.setattr(Tool, "content_hash", lambda tool: hashed.append(tool.id) or content_hash(tool))
        examples = [IntentExample(t.id, f"could you {t.description}") for t in tools[25:]]
        report = store.upsert(tools, examples=examples, prune=True)
        assert (len(report.inserted), report.unchanged, report.examples, report.removed) == (35, 25, 35, [])
        assert calls == ["check_tools", "tool_changes", "tool_changes"]  # the first look, then the locked one
        assert len(hashed) == 2 * len(tools)  # each tool hashed once per look
