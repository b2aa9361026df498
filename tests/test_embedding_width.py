"""The width of an OpenAI-compatible server's vectors against the cache and the catalog: a server briefly down, a
server restarted serving its model at another width, a role that may not write the cache."""

from __future__ import annotations

import logging

import numpy as np
import psycopg
import pytest

from toolstore import (
    EmbedderUnavailableError,
    HashingEmbedder,
    IntentExample,
    Judgement,
    ModelMismatchError,
    OpenAIEmbedder,
    ToolStore,
)
from toolstore._breaker import BREAKER_COOLDOWN
from toolstore._catalog_row import catalog_info
from toolstore._progress import reporting
from toolstore._vectors import record_model
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
        assert store.upsert(tools).cached == len(tools)
        assert store.add_examples([example]) == 1
        info = store.info()
        with store.connection() as conn:
            stored = conn.execute("select count(distinct catalog_id) from tool_vectors").fetchone()
    assert (info.embed_model, info.embed_dim, info.n_examples) == ("openai/bge", 384, 1) and stored == (2,)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("APIConnectionError" in w and "cache, at 384 dimensions" in w for w in warnings)


def test_writes_the_cache_answers_probe_a_down_server_once_a_cooldown(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The server down, every text cached: the first write waits through its probe's retries; a write within the
    cool-down after it takes the cache's width at once (warned, no request), and one after the cool-down probes."""
    tools = generated_tools(3, seed=18)
    examples = [IntentExample(tools[0].id, "the first request"), IntentExample(tools[1].id, "the second request")]
    with FakeOpenAI(models={"bge": 384}) as server, ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
        store.upsert(tools)
        store.add_examples(examples)
        address = server.base_url
    retries: list[float] = []
    now = [0.0]
    down = embedder(server, address, max_retries=2, sleep=retries.append, clock=lambda: now[0])
    with ToolStore(dsn, embedder=down, catalog="down") as store, caplog.at_level(logging.WARNING, "toolstore"):
        assert store.upsert(tools).cached == len(tools)
        assert len(retries) == 2  # the probe's three attempts
        now[0] = BREAKER_COOLDOWN - 1
        assert store.add_examples(examples[:1]) == 1
        assert len(retries) == 2
        now[0] = 2 * BREAKER_COOLDOWN
        assert store.add_examples(examples[1:]) == 1
        assert len(retries) == 4
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolstore" and r.levelno >= logging.WARNING]
    assert len(warnings) == 3 and all("APIConnectionError" in w and "cache, at 384 dimensions" in w for w in warnings)
    assert "not retried for another 1 s" in warnings[1]


def test_a_write_after_a_probe_found_the_server_unavailable_fails_at_once(dsn: str) -> None:
    """The server unavailable (503) through the probe's retries: a write of cached texts takes their width; the next
    write, within the cool-down, has a text to embed: it fails at once with the probe's error, no request, nothing
    written. After the cool-down the server answers again: a write is embedded."""
    tools = generated_tools(3, seed=23)
    example = IntentExample(tools[0].id, "a request never embedded")
    now = [0.0]
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
            store.upsert(tools)
        down = embedder(server, max_retries=2, clock=lambda: now[0])
        with ToolStore(dsn, embedder=down, catalog="down") as store:
            server.fail_next(503, times=3)
            assert store.upsert(tools).cached == len(tools)  # from the cache
            assert len(server.requests_to("/embeddings")) == 1 + 3  # the up write's, the probe's three attempts
            server.fail_next(503, times=3)  # still unavailable
            now[0] = BREAKER_COOLDOWN - 1
            with pytest.raises(EmbedderUnavailableError, match="after 3 attempts.*not retried for another 1 s"):
                store.add_examples([example])
            assert len(server.requests_to("/embeddings")) == 4 and store.info().n_examples == 0
            server._script.clear()  # the server is back
            now[0] = BREAKER_COOLDOWN
            assert store.add_examples([example]) == 1 and len(server.requests_to("/embeddings")) == 5


def test_routes_and_writes_share_what_they_found_of_the_server(dsn: str) -> None:
    """One breaker per embedder (its server's), which route() and writes share, in any store: the probe unavailable
    through its retries, a route answers lexically without a request; a route's failed attempt, a write of cached
    texts takes their width without a probe request, but a write with a text to embed is still sent (the server may
    only have been slow), and its answer closes the breaker for routes too."""
    tools = generated_tools(3, seed=29)
    now = [0.0]
    with FakeOpenAI(models={"bge": 384}) as server:
        sent = lambda: len(server.requests_to("/embeddings"))  # noqa: E731
        with ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
            store.upsert(tools)
        probed = embedder(server, max_retries=2, clock=lambda: now[0])
        with ToolStore(dsn, embedder=probed, catalog="probed") as store:
            server.fail_next(503, times=3)
            assert store.upsert(tools).cached == len(tools) and sent() == 1 + 3  # the probe's three attempts
            result = store.route("send an email")
            assert not result.dense_used and "not retried for another 30 s" in (result.degraded_reason or "")
            assert sent() == 4
        routed = embedder(server, max_retries=2, clock=lambda: now[0])
        with ToolStore(dsn, embedder=routed, catalog="up", create=False) as store:
            server.fail_next(503)
            assert not store.route("send an email").dense_used and sent() == 5  # its one attempt
            with ToolStore(dsn, embedder=routed, catalog="routed") as other:
                assert other.upsert(tools).cached == len(tools) and sent() == 5  # no probe: the cache's width
            assert store.add_examples([IntentExample(tools[0].id, "a new request")]) == 1 and sent() == 6
            assert store.route("send an email").dense_used and sent() == 7


def test_a_reembed_the_cache_answers_finishes_while_the_server_is_down(dsn: str) -> None:
    """A reembed to a model whose vectors of every text are cached, its server down: made from the cache (as an
    import), the catalog switched to the cached vectors' width."""
    tools = generated_tools(4, seed=17)
    with FakeOpenAI(models={"bge": 384}) as server, ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
        store.upsert(tools)
        address = server.base_url
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="hashed") as store:
        store.upsert(tools)
        report = store.reembed(embedder(server, address, max_retries=0))
        info = store.info()
    assert (report["dim"], info.embed_model, info.embed_dim, report["tools"]) == (384, "openai/bge", 384, len(tools))


def test_a_tune_the_cache_answers_finishes_while_the_server_is_down(dsn: str) -> None:
    """Tuning embeds its requests through the cache: every one cached, the server down, it waits through one probe's
    retries and tunes on the cached vectors (no second probe for the width, which failed the tune)."""
    tools = generated_tools(6, seed=19)
    labelled = [(f"{t.name} please", Judgement(f"q{i}", (t.id,))) for i, t in enumerate(tools)]
    with FakeOpenAI(models={"bge": 384}) as server, ToolStore(dsn, embedder=embedder(server), catalog="up") as store:
        store.upsert(tools)
        store.tune(labelled, folds=2, save=False)  # caches the requests' vectors
        address = server.base_url
    retries: list[float] = []
    down = embedder(server, address, max_retries=2, sleep=retries.append)
    with ToolStore(dsn, embedder=down, catalog="up", create=False) as store:
        report = store.tune(labelled, folds=2, save=False)
    assert (report.n_examples, len(retries)) == (len(labelled), 2)  # one probe: its three attempts


def test_a_write_of_cached_and_new_vectors_of_two_widths_records_neither(dsn: str) -> None:
    """The vectors of a catalog's first write, some from the cache while the server could not be asked for its width
    and some from the server since, at another width: refused, not recorded under the first one's width."""
    with ToolStore(dsn, embedder=None, catalog="fresh") as store, store.connection() as conn:
        store.upsert(generated_tools(2, seed=16))
        info = catalog_info(conn, "fresh")
        assert info is not None and info.embed_model is None
        with pytest.raises(ModelMismatchError, match="384 and 768 dimensions"):
            record_model(conn, info, "openai/bge", [np.ones(384, np.float32), np.ones(768, np.float32)])
        assert store.info().embed_model is None


def test_a_write_the_cache_answers_is_refused_when_the_server_proves_another_width(dsn: str) -> None:
    """All texts cached at the catalog's width, the probe finds the server serving the model at another: the write is
    refused without embedding them again."""
    tools = generated_tools(6, seed=12)
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server), catalog="a") as store:
            store.upsert(tools[:3])
        with ToolStore(dsn, embedder=embedder(server), catalog="b") as store:
            store.upsert(tools[3:])  # tools[3:]'s texts cached at 384
        server.models["bge"] = 768
        asked = len(server.embedding_batches())
        with ToolStore(dsn, embedder=embedder(server), catalog="a", create=False) as store:
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768"):
                store.upsert(tools)
            assert store.info().n_tools == 3
        assert server.embedding_batches()[asked:] == [["dimension probe"]]


def test_a_width_change_is_refused_after_the_first_batch(dsn: str) -> None:
    """A catalog's model served at another width since: an import, or examples, of many new texts is refused from the
    first request's answer, before the other texts are sent, and nothing of it is cached."""
    tools = generated_tools(10, seed=13)
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server, batch_size=2), catalog="bge") as store:
            store.upsert(tools[:2])
        server.models["bge"] = 768
        asked = len(server.embedding_batches())
        examples = [IntentExample(tools[0].id, f"an example request number {i}") for i in range(8)]
        with ToolStore(dsn, embedder=embedder(server, batch_size=2), catalog="bge", create=False) as store:
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768"):
                store.upsert(tools)
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768"):
                store.add_examples(examples)
            info = store.info()
            with store.connection() as conn:
                widths = conn.execute("select distinct vector_dims(embedding) from embedding_cache").fetchall()
        assert [len(batch) for batch in server.embedding_batches()[asked:]] == [2]  # the examples: width learnt
        assert (info.n_tools, info.n_examples, widths) == (2, 0, [(384,)])


def test_a_role_that_may_not_write_the_cache_is_told_once_of_vectors_it_cannot_replace(
    dsn: str, login_role: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A granted writer cannot replace the cache's vectors of a width its model's server no longer serves: each of its
    writes embeds those texts again (as any it lacks), and one warning says so and who can replace them."""
    name, login = login_role
    tools = generated_tools(4, seed=14)
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server), catalog="alpha") as owner:
            owner.upsert(tools)
            owner.grant(name, write=True)
        server.models["bge"] = 768
        asked = len(server.embedding_batches())
        with ToolStore(login, embedder=embedder(server), catalog="alpha", create=False, migrate=False) as store:
            with caplog.at_level(logging.WARNING, "toolstore"):
                for _ in range(2):
                    assert store.reembed(embedder(server))["dim"] == 768
        texts = [text for batch in server.embedding_batches()[asked:] for text in batch]
        with psycopg.connect(dsn) as conn:
            widths = conn.execute("select vector_dims(embedding), count(*) from toolstore.embedding_cache group by 1")
            assert widths.fetchall() == [(384, len(tools))]  # not the writer's to replace
    assert len(texts) == 2 * (len(tools) + 1)  # each reembed: its probe, and every text again
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and name in warnings[0] and "another width" in warnings[0], warnings


def test_an_import_checked_from_its_first_batch_reports_its_progress_as_one_run(dsn: str) -> None:
    """An import to a catalog that records a width, by an embedder that learns it, embeds its first batch alone to
    check that width: its progress still counts one run, up to all its texts."""
    tools = generated_tools(7, seed=15)
    reports: list[tuple[int, int]] = []
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server), catalog="bge") as store:
            store.upsert(tools[:1])
        with ToolStore(dsn, embedder=embedder(server, batch_size=2), catalog="bge", create=False) as store:
            with reporting(lambda done, total: reports.append((done, total))):
                assert store.upsert(tools).embedded == len(tools) - 1
    assert reports == [(done, len(tools) - 1) for done in (2, 4, 6)]


def test_tuning_against_a_catalog_of_another_width_is_refused_after_the_first_batch(dsn: str) -> None:
    """Tuning embeds its labelled requests with the catalog's model: served at another width since, it is refused from
    the first request's answer (as a write is), before the other requests are sent."""
    from toolstore._metrics import Judgement
    from toolstore._tune import tune

    tools = generated_tools(4, seed=18)
    examples = [(f"a labelled request number {i}", Judgement(f"q{i}", (tools[i % 4].id,))) for i in range(10)]
    with FakeOpenAI(models={"bge": 384}) as server:
        with ToolStore(dsn, embedder=embedder(server), catalog="tuned") as store:
            store.upsert(tools)
        server.models["bge"] = 768
        asked = len(server.embedding_batches())
        with ToolStore(dsn, embedder=embedder(server, batch_size=2), catalog="tuned", create=False) as store:
            with pytest.raises(ModelMismatchError, match=r"384 dimensions.*768"):
                tune(store, examples, save=False)
        assert [len(batch) for batch in server.embedding_batches()[asked:]] == [2]
