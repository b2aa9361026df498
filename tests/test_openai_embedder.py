"""OpenAIEmbedder through the real ``openai`` SDK against the local FakeOpenAI server (no network)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import openai
import pytest

from toolstore import EmbedderError, EmbedderUnavailableError, InvalidInputError, OpenAIEmbedder
from toolstore._breaker import BREAKER_COOLDOWN, Breaker
from toolstore._vectors import QueryVectors
from toolstore.testing.fake_openai import MALFORMED_KINDS, FakeOpenAI, fake_token_count, fake_vector

TEXTS = ["search the web", "send an email", "create a calendar event", "convert currency", "weather forecast"]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def delays() -> list[float]:
    return []


def make(server: FakeOpenAI, delays: list[float], **options: Any) -> OpenAIEmbedder:
    options.setdefault("api_key", server.api_key)
    options.setdefault("timeout", 5.0)
    return OpenAIEmbedder(base_url=server.base_url, sleep=delays.append, **options)


# -- vectors ------------------------------------------------------------------------------------


def test_vectors_are_normalised_float32_deterministic_and_in_input_order(server, delays):
    embedder = make(server, delays)
    assert embedder.model == "openai/text-embedding-3-small"
    assert embedder.dim == 1536 and not server.requests  # known model: no probe call

    vectors = embedder.embed_many(TEXTS)

    assert vectors.shape == (len(TEXTS), 1536) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.stack([fake_vector(t, 1536) for t in TEXTS])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_array_equal(embedder.embed_many(TEXTS), vectors)
    np.testing.assert_allclose(embedder.embed(TEXTS[2]), expected[2], atol=1e-6)
    body = server.requests[0].body
    assert body["encoding_format"] == "float" and "dimensions" not in body
    assert server.requests[0].headers["authorization"] == f"Bearer {server.api_key}"


def test_results_are_ordered_by_the_index_field_not_response_order():
    rows = {0: [3.0, 4.0], 1: [0.0, 2.0], 2: [1.0, 0.0]}
    data = [SimpleNamespace(index=i, embedding=rows[i]) for i in (2, 0, 1)]
    client = SimpleNamespace(embeddings=SimpleNamespace(create=lambda **kw: SimpleNamespace(data=data)))
    embedder = OpenAIEmbedder(model="custom", client=client)

    vectors = embedder.embed_batch(["a", "b", "c"])

    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 1.0], [1.0, 0.0]], atol=1e-6)
    assert embedder.dim == 2


def test_dimensions_are_sent_and_honoured(server, delays):
    embedder = make(server, delays, model="text-embedding-3-large", dimensions=256)
    assert embedder.model == "openai/text-embedding-3-large@256" and embedder.dim == 256

    vectors = embedder.embed_many(TEXTS[:2])

    assert vectors.shape == (2, 256)
    np.testing.assert_allclose(vectors[0], fake_vector(TEXTS[0], 256), atol=1e-6)
    assert server.requests[0].body["dimensions"] == 256


def test_known_default_dims_and_lazy_dim_for_other_models(delays):
    assert OpenAIEmbedder(model="text-embedding-3-large", api_key="k").dim == 3072
    assert OpenAIEmbedder(model="text-embedding-ada-002", api_key="k").dim == 1536
    with FakeOpenAI(models={"nomic-embed-text": 768}) as server:
        embedder = make(server, delays, model="nomic-embed-text")
        assert embedder.model == "openai/nomic-embed-text"
        assert embedder.dim == 768  # learnt by one probe request
        assert len(server.requests) == 1
        assert embedder.embed_many(TEXTS).shape == (len(TEXTS), 768)


def test_a_width_learnt_past_a_pgvector_column_is_refused_before_anything_is_written(delays):
    """check_width held the widths a spec gives to pgvector's 16,000, but not one learnt from the server's first
    answer: embedding went on and failed later in pgvector (found by review37). The first answer is refused, an
    EmbedderError naming the width and the limit, and no width is learnt."""
    with FakeOpenAI(models={"wide-model": 16_001}) as server:
        embedder = make(server, delays, model="wide-model")
        with pytest.raises(EmbedderError, match=r"dimension 16001, past a pgvector column's 16,000"):
            embedder.embed_many(TEXTS[:1])
        assert embedder.known_dim is None


def test_a_probe_that_finds_the_server_unavailable_is_not_sent_again_for_a_cooldown(delays):
    """The width probe, unavailable through its retries, opens the breaker: reading dim again raises at once, with no
    request, until BREAKER_COOLDOWN has passed; then one read probes. A refusal (401) is an answer: no breaker."""
    now = [0.0]
    with FakeOpenAI(models={"nomic-embed-text": 768}) as server:
        embedder = make(server, delays, model="nomic-embed-text", max_retries=1, clock=lambda: now[0])
        server.fail_next(503, times=2)
        with pytest.raises(EmbedderUnavailableError, match="after 2 attempts"):
            _ = embedder.dim
        now[0] = BREAKER_COOLDOWN - 1
        with pytest.raises(EmbedderUnavailableError, match="not retried for another 1 s"):
            _ = embedder.dim
        assert len(server.requests) == 2
        now[0] = BREAKER_COOLDOWN
        assert embedder.dim == 768 and len(server.requests) == 3
        refused = make(server, delays, model="nomic-embed-text", clock=lambda: now[0])
        server.fail_next(401)
        with pytest.raises(EmbedderError, match="401"):
            _ = refused.dim
        assert refused.dim == 768 and len(server.requests) == 5


def test_a_write_whose_retries_were_spent_in_vain_opens_the_breaker_for_the_next_writes(server, delays):
    """A write unavailable through its own retries opened nothing: each next write of a run (`sync mcp` of several
    servers, an import then its examples) waited through all its retries again. It opens the breaker as the width
    probe's do: a write within the cool-down fails at once, no request; one after it is sent and embedded."""
    now = [0.0]
    embedder = make(server, delays, max_retries=2, clock=lambda: now[0])
    server.fail_next(503, times=3)
    with pytest.raises(EmbedderUnavailableError, match="after 3 attempts"):
        embedder.embed_many(TEXTS[:2])
    assert len(server.requests) == 3
    now[0] = BREAKER_COOLDOWN - 1
    with pytest.raises(EmbedderUnavailableError, match="after 3 attempts.*not retried for another 1 s"):
        embedder.embed_many(TEXTS[2:])
    assert len(server.requests) == 3 and len(delays) == 2
    now[0] = BREAKER_COOLDOWN
    assert embedder.embed_many(TEXTS[2:]).shape == (3, 1536) and len(server.requests) == 4


def test_the_breakers_error_names_the_failure_it_repeats_once(server, delays):
    """Within the cool-down the breaker raised its remembered failure with that failure's type name before it, also
    when it raised the same type: a write said "EmbedderUnavailableError: OpenAI embeddings request ... failed after 3
    attempts ...", and a route's degraded_reason "embedder failed (EmbedderUnavailableError: EmbedderUnavailableError:
    ...)". The type is named only when it is another than the error raised (a TimeoutError behind an EmbedderError)."""
    now = [0.0]
    embedder = make(server, delays, max_retries=2, clock=lambda: now[0])
    server.fail_next(503, times=3)
    with pytest.raises(EmbedderUnavailableError) as first:
        embedder.embed_many(TEXTS[:2])
    with pytest.raises(EmbedderUnavailableError) as again:
        embedder.embed_many(TEXTS[2:])
    assert str(again.value) == f"{first.value} (not retried for another 30 s)"
    breaker = Breaker(clock=lambda: now[0])
    breaker.failed(TimeoutError("the read timed out"))
    with pytest.raises(EmbedderError) as other:
        breaker.admit()
    assert str(other.value) == "TimeoutError: the read timed out (not retried for another 30 s)"


def test_batching_splits_at_batch_size(server, delays):
    embedder = make(server, delays, batch_size=2)

    vectors = embedder.embed_many(TEXTS)

    assert server.embedding_batches() == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    np.testing.assert_allclose(vectors[4], fake_vector(TEXTS[4], 1536), atol=1e-6)


def test_batches_are_cut_under_the_apis_300000_tokens_per_request(server, delays):
    """2,048 inputs of about 180 tokens each, 370,000 in all: one request of them all is refused. Requests are cut at
    300,000 UTF-8 bytes, and a byte-level BPE tokenizer never counts more tokens than bytes."""
    texts = [f"tool {i} " + "lorem " * 120 for i in range(2048)]
    embedder = make(server, delays, dimensions=8)

    vectors = embedder.embed_many(texts)

    batches = server.embedding_batches()
    assert [text for batch in batches for text in batch] == texts and len(batches) == 5
    assert all(sum(len(text.encode()) for text in batch) <= 300_000 for batch in batches)
    np.testing.assert_allclose(vectors[[0, 2047]], [fake_vector(texts[0], 8), fake_vector(texts[-1], 8)], atol=1e-6)
    np.testing.assert_array_equal(embedder.embed_batch(texts), vectors)  # one batch of 2,048 texts, five requests
    assert len(server.embedding_batches()) == 10


def test_a_request_refused_as_over_the_servers_token_total_is_split(delays):
    """A compatible server may allow fewer tokens per request than OpenAI: a refused request is halved until taken."""
    with FakeOpenAI(max_request_tokens=500) as server:
        texts = [f"tool {i} " + "lorem " * 30 for i in range(40)]  # 47 tokens each, 1,880 in all
        vectors = make(server, delays).embed_many(texts)
        assert server.embedding_batches()[0] == texts  # refused
        assert [len(batch) for batch in server.embedding_batches()[1:]] == [20, 10, 10, 20, 10, 10]  # halved
    np.testing.assert_allclose(vectors[5], fake_vector(texts[5], 1536), atol=1e-6)


def test_texts_over_the_models_context_are_embedded_truncated_with_a_warning(server, delays, caplog):
    """OpenAI refuses an input over 8,191 tokens and names it; the rest of the request is embedded as it is."""
    long, longer = "lorem " * 10_000, "dolor sit " * 8_000  # 15,000 and 20,000 tokens as the fake counts them
    texts = ["send an email", long, "weather forecast", longer, "x" * 9_000]  # the last, 2,250 tokens, fits

    with caplog.at_level(logging.WARNING, logger="toolstore"):
        vectors = make(server, delays).embed_many(texts)

    batches = server.embedding_batches()
    assert batches[0] == texts  # refused: input[1]
    kept = {text for batch in batches[1:] for text in batch if text not in texts}
    assert len(kept) == 2 and batches[-1] == [texts[0], texts[2], texts[4]]  # the others, whole
    for original in (long, longer):
        head = next(k for k in kept if original.startswith(k))
        assert 8_191 < len(head.encode()) and fake_token_count(head) <= 8_191  # truncated, to more than the bound
        np.testing.assert_allclose(vectors[texts.index(original)], fake_vector(head, 1536), atol=1e-6)
    for i in (0, 2, 4):
        np.testing.assert_allclose(vectors[i], fake_vector(texts[i], 1536), atol=1e-6)
    assert "2 of 5 texts were over the input limit of openai/text-embedding-3-small" in caplog.text
    assert len(batches) <= 8


def test_a_long_text_within_the_context_is_sent_whole(server, delays, caplog):
    """9,000 bytes of ~2,250 tokens: far over 8,191 bytes, within the context. Nothing is cut, nothing warned."""
    text = "lorem " * 1_500
    with caplog.at_level(logging.WARNING, logger="toolstore"):
        vector = make(server, delays).embed(text)
    assert server.embedding_batches() == [[text]] and not caplog.text
    np.testing.assert_allclose(vector, fake_vector(text, 1536), atol=1e-6)


def test_a_refusal_naming_no_input_finds_the_long_ones_by_halving(delays, caplog):
    """The API's earlier message ("This model's maximum context length is 8192 tokens, however you requested ...")
    does not say which input; halving the request does."""
    texts = [f"tool {i}" for i in range(8)]
    texts[2], texts[5] = "lorem " * 10_000, "ipsum " * 9_000
    with FakeOpenAI(legacy_errors=True) as server, caplog.at_level(logging.WARNING, logger="toolstore"):
        vectors = make(server, delays).embed_many(texts)
        batches = server.embedding_batches()
    for i, text in enumerate(texts):
        sent = next(t for b in reversed(batches) for t in b if text.startswith(t))  # the text or what was kept
        assert (sent == text) == (i not in (2, 5))
        np.testing.assert_allclose(vectors[i], fake_vector(sent, 1536), atol=1e-6)
    assert "2 of 8 texts" in caplog.text


def test_a_small_context_of_a_compatible_server_is_read_from_its_refusal(delays):
    """vLLM serves models of 512 tokens and says so; the cut follows the context the message states."""
    with FakeOpenAI(models={"bge-small": 384}, max_input_tokens=511) as server:
        text = "lorem " * 2_000  # 3,000 tokens
        vector = make(server, delays, model="bge-small").embed(text)
        head = server.embedding_batches()[-1][0]
    assert text.startswith(head) and 511 < len(head) and fake_token_count(head) <= 511
    np.testing.assert_allclose(vector, fake_vector(head, 384), atol=1e-6)


def test_a_refusal_naming_an_input_too_short_to_be_over_is_not_believed(server, delays, caplog):
    """A text of fewer bytes than the context has fewer tokens: a server naming it is found out by halving, and no
    text is cut for its word."""
    message = "Invalid 'input[0]': maximum input length is 8192 tokens."
    server.fail_next(400, body={"error": {"message": message, "type": "invalid_request_error"}})
    with caplog.at_level(logging.WARNING, logger="toolstore"):
        vectors = make(server, delays).embed_many(TEXTS[:2])
    assert server.embedding_batches() == [TEXTS[:2], TEXTS[:1], TEXTS[1:2]] and not caplog.text
    np.testing.assert_allclose(vectors, [fake_vector(t, 1536) for t in TEXTS[:2]], atol=1e-6)


def test_an_input_refused_at_every_length_raises_after_a_few_tries(server, delays):
    body = {"error": {"message": "This model's maximum context length is 512 tokens.", "type": "invalid_request_error"}}
    server.fail_next(400, times=100, body=body)
    with pytest.raises(EmbedderError, match=r"refused a text of 60,000 UTF-8 bytes.*down to 67 bytes"):
        make(server, delays).embed("lorem " * 10_000)
    assert len(server.requests) < 15 and delays == []


def test_route_time_texts_over_the_context_are_cut_at_once(server, delays, caplog):
    """At route time a refusal for length would fail the route's dense part and open the breaker for every route: the
    texts over the context's bound in bytes are cut to it and sent again at once, no search."""
    long = "lorem " * 10_000
    with caplog.at_level(logging.WARNING, logger="toolstore"):
        vectors = make(server, delays).embed_queries(["weather forecast", long])
    assert server.embedding_batches() == [["weather forecast", long], ["weather forecast", long[:8191]]]
    np.testing.assert_allclose(vectors, [fake_vector(t, 1536) for t in ("weather forecast", long[:8191])], atol=1e-6)
    assert "1 of 2 texts were over the input limit" in caplog.text


def test_route_time_texts_are_sent_in_requests_under_the_total(server, delays):
    """A conversation's earlier turns (up to 100, of up to 20,000 characters) can be more than 300,000 tokens."""
    turns = [f"turn {i} " + "lorem " * 3_300 for i in range(100)]  # about 5,000 tokens each
    vectors = make(server, delays, dimensions=8, query_timeout=30.0).embed_queries(turns)
    batches = server.embedding_batches()
    assert [t for b in batches for t in b] == turns and all(sum(len(t) for t in b) <= 300_000 for b in batches)
    np.testing.assert_allclose(vectors[99], fake_vector(turns[99], 8), atol=1e-6)


def test_empty_input_makes_no_request(server, delays):
    assert make(server, delays).embed_many([]).shape == (0, 1536)
    assert server.requests == []


# -- retries and errors ---------------------------------------------------------------------------


def test_rate_limit_then_success_is_retried_with_backoff(server, delays):
    server.fail_next(status=429, times=2)
    embedder = make(server, delays, backoff_base=0.5)

    vectors = embedder.embed_many(TEXTS[:2])

    assert vectors.shape == (2, 1536)
    assert len(server.requests) == 3
    assert len(delays) == 2
    assert 0.25 <= delays[0] <= 0.5 and 0.5 <= delays[1] <= 1.0  # base * 2**attempt, jittered to [50%, 100%]


def test_retry_after_header_is_honoured(server, delays):
    server.fail_next(status=429, headers={"retry-after": "3"})
    make(server, delays).embed("hello")
    assert delays and delays[0] >= 3.0


@pytest.mark.parametrize(
    ("status", "headers", "retried"),
    [
        (408, {}, True),  # a request timeout
        (409, {}, True),  # a lock timeout
        (400, {"x-should-retry": "true"}, True),  # the server says so, either way
        (503, {"x-should-retry": "false"}, False),
    ],
)
def test_failures_are_retried_as_the_sdk_would(server, delays, status, headers, retried):
    """The SDK's own retries are off, so the embedder retries what it would: HTTP 408, 409, 429 and 5xx, unless the
    server's x-should-retry header says otherwise."""
    server.fail_next(status=status, headers=headers)
    embedder = make(server, delays)
    if retried:
        assert embedder.embed_many(TEXTS[:2]).shape == (2, 1536)
    else:
        with pytest.raises(EmbedderError, match=f"HTTP {status}"):
            embedder.embed_many(TEXTS[:2])
    assert (len(server.requests), len(delays)) == ((2, 1) if retried else (1, 0))


def test_persistent_server_error_raises_after_max_retries(server, delays):
    server.fail_next(status=500, times=10)
    embedder = make(server, delays, max_retries=3, backoff_base=1.0, backoff_max=2.5)

    with pytest.raises(EmbedderError, match=r"after 4 attempts.*HTTP 500"):
        embedder.embed_many(TEXTS)

    assert len(server.requests) == 4  # one call plus three retries, the SDK itself does not retry
    assert len(delays) == 3
    assert 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0 and 1.25 <= delays[2] <= 2.5  # capped


def test_connection_errors_are_retried_then_raise(delays):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, sleep=delays.append)

    with pytest.raises(EmbedderError, match="after 3 attempts.*APIConnectionError"):
        embedder.embed("hello")
    assert len(delays) == 2


def test_a_connection_error_names_the_server_and_no_secret_of_its_url(delays):
    """An embedder whose server could not be reached said 'APIConnectionError: Connection error.', naming no server;
    it names the server's scheme, host and port, never the URL's credentials, path or query."""
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://user:sk-pw-0001@127.0.0.1:{port}/v1/secret-path?key=sk-query-0002"
    embedder = OpenAIEmbedder(api_key="k", base_url=url, max_retries=0, sleep=delays.append)

    with pytest.raises(EmbedderError) as failed:
        embedder.embed("hello")
    text = str(failed.value)
    assert text.endswith(f": APIConnectionError: Connection error. (server http://127.0.0.1:{port})"), text
    assert not any(secret in text for secret in ("sk-pw-0001", "secret-path", "sk-query-0002")), text


def test_rejected_key_raises_at_once_without_retry(server, delays):
    embedder = make(server, delays, api_key="sk-wrong-key-0000")

    with pytest.raises(EmbedderError, match="OpenAI rejected the API key") as info:
        embedder.embed_many(TEXTS)

    assert isinstance(info.value.__cause__, openai.AuthenticationError)
    assert len(server.requests) == 1 and delays == []


def test_other_client_errors_are_not_retried(server, delays):
    embedder = make(server, delays, model="no-such-model")
    with pytest.raises(EmbedderError, match="HTTP 404.*does not exist"):
        embedder.embed("hello")
    assert len(server.requests) == 1 and delays == []


def test_missing_api_key_is_a_clear_error_when_embedding(monkeypatch):
    """Making the embedder needs no key (route() then answers lexically); embedding without one is an error."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAIEmbedder()
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY"):
        embedder.embed("hello")
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY"):
        embedder.embed_query("hello")


def test_a_missing_key_is_said_at_route_time_whatever_the_query_timeout_left(monkeypatch):
    """The clock of query_timeout started before the SDK client was made: a first route in a fresh process, whose
    import of the SDK took longer than query_timeout on a busy machine, said "not sent: query_timeout (2.0 s) spent"
    instead of the missing key (tests/test_faults.py's CLI route did). The client is made before the clock starts."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAIEmbedder(dimensions=8, query_timeout=0.0)  # no time at all for the requests
    with pytest.raises(EmbedderError, match="no OpenAI API key.*OPENAI_API_KEY"):
        embedder.embed_queries(["hello"])


def test_api_key_falls_back_to_environment(server, delays, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    embedder = OpenAIEmbedder(base_url=server.base_url, sleep=delays.append)
    assert embedder.embed("hello").shape == (1536,)


@pytest.mark.parametrize("options", [{"batch_size": 0}, {"batch_size": 2049}, {"dimensions": 0}, {"max_retries": -1}])
def test_invalid_options_are_rejected(options):
    with pytest.raises(InvalidInputError):
        OpenAIEmbedder(api_key="k", **options)


MALFORMED_MESSAGES = {
    "missing_data": "no 'data' list",
    "wrong_count": "1 embeddings returned for 2 inputs",
    "wrong_dimension": "dimension 1535, expected 1536",
    "non_numeric": "non-numeric",
    "not_json": "no 'data' list",
}


@pytest.mark.parametrize("kind", MALFORMED_KINDS)
def test_malformed_response_raises_naming_the_problem(server, delays, kind):
    server.respond_malformed_next(kind)
    with pytest.raises(EmbedderError, match=MALFORMED_MESSAGES[kind]):
        make(server, delays).embed_many(TEXTS[:2])
    assert len(server.requests) == 1


@pytest.mark.parametrize("script", ["server_error", "malformed"])
def test_failure_in_second_of_three_batches_returns_nothing(server, delays, script):
    server.pass_next(1)
    if script == "server_error":
        server.fail_next(status=503, times=5)
    else:
        server.respond_malformed_next("wrong_count")
    embedder = make(server, delays, batch_size=2, max_retries=1)
    result = None

    with pytest.raises(EmbedderError):
        result = embedder.embed_many(TEXTS)

    assert result is None
    batches = server.embedding_batches()
    assert batches[0] == TEXTS[0:2] and all(b == TEXTS[2:4] for b in batches[1:])  # third batch never sent


# -- the fake itself, through the SDK -------------------------------------------------------------


def test_fake_serves_base64_which_the_sdk_requests_by_default(server):
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    response = client.embeddings.create(model="text-embedding-3-small", input=["hello"])
    assert server.requests[0].body["encoding_format"] == "base64"
    np.testing.assert_allclose(response.data[0].embedding, fake_vector("hello", 1536), atol=1e-6)


def test_fake_rejects_a_wrong_key_like_openai(server):
    client = openai.OpenAI(api_key="sk-nope-nope-nope", base_url=server.base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.embeddings.create(model="text-embedding-3-small", input=["hello"])
    assert info.value.code == "invalid_api_key" and "sk-nope" not in info.value.message


def test_fake_refuses_an_input_over_the_models_context_like_openai(server):
    """The 400 OpenAI answers today (2025-26) names the input; its earlier message named none."""
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    long = "lorem " * 10_000  # 15,000 tokens as the fake counts (a quarter of 60,000 bytes)
    with pytest.raises(openai.BadRequestError) as info:
        client.embeddings.create(model="text-embedding-3-small", input=["hello", long])
    assert info.value.body == {
        "message": "Invalid 'input[1]': maximum input length is 8192 tokens.",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with FakeOpenAI(legacy_errors=True) as legacy:
        client = openai.OpenAI(api_key=legacy.api_key, base_url=legacy.base_url, max_retries=0)
        with pytest.raises(
            openai.BadRequestError, match="maximum context length is 8192 tokens, however you requested 15000"
        ):
            client.embeddings.create(model="text-embedding-3-small", input=["hello", long])


def test_fake_refuses_a_request_over_300000_tokens_like_openai(server):
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.embeddings.create(model="text-embedding-3-small", input=["lorem " * 1000] * 300)  # 300 x 1,500 tokens
    assert info.value.code == "max_tokens_per_request"
    assert info.value.body["message"] == "Requested 450000 tokens, max 300000 tokens per request"  # type: ignore[index]
    response = client.embeddings.create(model="text-embedding-3-small", input=["lorem " * 1000] * 200)
    assert len(response.data) == 200 and response.usage.total_tokens == 300_000


def test_fake_token_count_is_near_a_real_count_and_never_over_the_bytes():
    assert fake_token_count("lorem " * 1500) == 2250  # 9,000 bytes, far under the context: sent whole
    assert fake_token_count("a b c d") == 4 and fake_token_count("12345678") == 3
    assert fake_token_count("\u5929\u6c14\u9884\u62a5" * 100) == 300  # 1,200 bytes
    for text in ["x", "!!", " \n", "\U0001f600", "a_b-c 1.5", "lorem " * 1500, "\u00e9" * 7]:
        assert 1 <= fake_token_count(text) <= len(text.encode())


def test_chat_completions_answer_through_the_sdk():
    seen: list[tuple[list[dict[str, Any]], str]] = []

    def handler(messages: list[dict[str, Any]], model: str) -> str:
        seen.append((messages, model))
        return "alternative phrasings: look up the weather"

    with FakeOpenAI(chat_handler=handler) as server:
        client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "expand: weather forecast"}]
        )

    assert completion.choices[0].message.content == "alternative phrasings: look up the weather"
    assert completion.choices[0].finish_reason == "stop"
    assert seen == [([{"role": "user", "content": "expand: weather forecast"}], "gpt-4o-mini")]
    assert completion.usage is not None and completion.usage.total_tokens == completion.usage.prompt_tokens + 6
    assert len(server.requests_to("/chat/completions")) == 1


def test_chat_default_reply_and_scripted_failure(server):
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    server.fail_next(status=500)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "fake reply to: hi"


def test_timeouts_are_retried(server, delays):
    server.stall_next(1.0)
    embedder = make(server, delays, timeout=0.2, max_retries=1)
    assert embedder.embed("hello").shape == (1536,)
    assert len(delays) == 1 and len(server.requests) == 2


def test_injected_client_gets_sdk_retries_switched_off(server, delays):
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=4)
    server.fail_next(status=500, times=10)
    embedder = OpenAIEmbedder(client=client, max_retries=0, sleep=delays.append)
    with pytest.raises(EmbedderError, match="after 1 attempt:"):
        embedder.embed("hello")
    assert len(server.requests) == 1


def test_an_error_quoting_the_api_key_never_carries_it(delays):
    """A provider's error may quote the key in a form redact() does not know (here a 32-hex Azure-style key)."""
    key = "3f9c2b7a1d6e4f0a8b5c9d2e7f1a4b6c"
    with FakeOpenAI(api_key=key) as server:
        server.fail_next(400, body={"error": {"message": f"invalid request from key {key}"}})
        embedder = OpenAIEmbedder(base_url=server.base_url, api_key=key, sleep=lambda s: None)
        with pytest.raises(EmbedderError, match="invalid request from key") as failed:
            embedder.embed("hello")
    assert key not in str(failed.value)


@pytest.mark.parametrize("spec", ["hashing-\u00b2", "hashing-\u0666\u0664", "openai/text-embedding-3-small@\u00b2"])
def test_an_embedder_spec_with_a_digit_int_refuses_is_invalid_input(spec: str) -> None:
    """str.isdigit() takes superscripts and other scripts' digits; the number must be ASCII digits."""
    from toolstore._embedders.factory import make_embedder

    with pytest.raises(InvalidInputError, match="must be a number"):
        make_embedder(spec, api_key="sk-test")


def test_a_route_time_cut_forced_by_another_text_is_not_kept_for_the_text(server, delays):
    """At route time a refusal cuts every text of the request over the context in bytes, also one the model takes
    whole (9,000 bytes of ~2,250 tokens) beside one it does not: route()'s in-process cache must not hand that cut
    vector to a later route of the text alone, which the model embeds whole. The text the refusal named (cut the same
    way in any company) and a text nothing cut stay cached."""
    long, within = "lorem " * 10_000, "dolor " * 1_500
    vectors, embedder = QueryVectors(), make(server, delays)
    [_, cut, short] = vectors.get_many(embedder, [long, within, "weather forecast"])
    np.testing.assert_allclose(cut, fake_vector(within[:8191], 1536), atol=1e-6)
    np.testing.assert_allclose(vectors.get(embedder, within), fake_vector(within, 1536), atol=1e-6)
    np.testing.assert_allclose(vectors.get(embedder, "weather forecast"), short, atol=1e-6)
    np.testing.assert_allclose(vectors.get(embedder, long), fake_vector(long[:8191], 1536), atol=1e-6)
    assert server.embedding_batches()[2:] == [[within]]  # the others came from the cache


def test_the_cache_key_names_a_server_other_than_openais(server, monkeypatch):
    """The embedding cache tells servers apart (vectors of one model name differ between them), but OpenAI's own key
    stays the model, so the entries cached before stay valid; a URL's credentials and query never go in a key."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIEmbedder().cache_key == "openai/text-embedding-3-small"
    assert OpenAIEmbedder(dimensions=256).cache_key == "openai/text-embedding-3-small@256"
    assert OpenAIEmbedder(base_url="https://API.openai.com:443/v1/").cache_key == "openai/text-embedding-3-small"
    assert OpenAIEmbedder(client=openai.OpenAI(api_key="sk-x")).cache_key == "openai/text-embedding-3-small"
    remote = OpenAIEmbedder(model="bge", base_url="http://user:sk-secret@GPU-1:8000/v1/?key=sk-secret")
    assert remote.cache_key == "openai/bge#server=http://gpu-1:8000/v1"
    fake = f"openai/text-embedding-3-small@64#server={server.base_url}"
    assert OpenAIEmbedder(dimensions=64, base_url=server.base_url).cache_key == fake
    client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url)
    injected = OpenAIEmbedder(dimensions=64, client=client)
    assert injected.cache_key == fake and injected.embed_many(TEXTS).shape == (len(TEXTS), 64)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")  # read by the SDK when base_url is not given
    assert OpenAIEmbedder().cache_key == "openai/text-embedding-3-small#server=http://localhost:11434/v1"


@pytest.mark.parametrize("failure", ["refused", "retried", "malformed", "restarted", "query_timeout"])
def test_every_error_names_the_model(server, delays, failure):
    """A store may use several OpenAI-compatible models: the error (route()'s degraded reason too) says which one
    failed, and a server that answers at another width than before says so rather than 'malformed'."""
    server.models["bge"] = 384
    embedder = make(server, delays, model="bge", max_retries=1, query_timeout=0.0 if failure == "query_timeout" else 2)
    if failure != "query_timeout":
        embedder.embed("learn the width")
    if failure == "refused":
        server.fail_next(status=400)
    elif failure == "retried":
        server.fail_next(status=503, times=2)
    elif failure == "malformed":
        server.respond_malformed_next("wrong_count")
    elif failure == "restarted":
        server.models["bge"] = 768
    with pytest.raises(EmbedderError) as info:
        (embedder.embed_queries if failure == "query_timeout" else embedder.embed_many)(TEXTS[:2])
    assert "openai/bge" in str(info.value)
    if failure == "restarted":
        assert "768" in str(info.value) and "384" in str(info.value) and "malformed" not in str(info.value)
