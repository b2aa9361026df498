"""The width of an OpenAI-compatible server's vectors against the cache and the catalog: a server briefly down, a
server restarted serving its model at another width, a role that may not write the cache."""

from __future__ import annotations

import logging

import pytest

from toolstore import IntentExample, OpenAIEmbedder, ToolStore
from toolstore.testing.fake_openai import FakeOpenAI

from catalog_gen import generated_tools


def embedder(server: FakeOpenAI, base_url: str | None = None, **options: object) -> OpenAIEmbedder:
    """A new embedder of "bge" at ``server`` (a new process's: the width not learnt yet), retries without waiting."""
    url = base_url or server.base_url
    options = {"api_key": server.api_key, "base_url": url, "sleep": lambda _: None, **options}
    return OpenAIEmbedder(model="bge", **options)  # type: ignore[arg-type]


def test_a_write_the_cache_answers_finishes_while_the_server_is_down(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A write whose texts are all cached asks the server for the width it learns (one probe request): the server
    unreachable through the probe's retries, the write finishes from the cache, whose width the catalog records or
    checks, and a warning says the width was not checked."""
    tools = generated_tools(5, seed=11)
    example = IntentExample(tools[0].id, "what is the weather like")
    with FakeOpenAI(models={"bge": 384}) as server, ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
        store.upsert(tools)
        store.add_examples([example])
        address = server.base_url
    down = embedder(server, address, max_retries=1)  # the server stopped: nothing listens at its address
    with ToolStore(dsn, embedder=down, catalog="down") as store, caplog.at_level(logging.WARNING, "toolstore"):
        assert store.upsert(tools).embedded == len(tools)
        assert store.add_examples([example]) == 1
        info = store.info()
        with store.connection() as conn:
            stored = conn.execute("select count(distinct catalog_id) from tool_vectors").fetchone()
    assert (info.embed_model, info.embed_dim, info.n_examples) == ("openai/bge", 384, 1) and stored == (2,)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("APIConnectionError" in w and "cache, at 384 dimensions" in w for w in warnings)
