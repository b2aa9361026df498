"""Embeddings from the OpenAI API, or any OpenAI-compatible server (Azure OpenAI, vLLM, Ollama) via ``base_url``."""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from .._breaker import Breaker, Level
from .._errors import EmbedderError, EmbedderUnavailableError, InvalidInputError, redact
from .base import MAX_DIM, Embedded, Embedder, normalise
from .openai_client import (
    OPENAI_SERVER,
    base_url_in_use,
    describe,
    make_client,
    parse_embeddings,
    provider_message,
    retryable,
    server_address,
)
from .openai_fit import at_once, fit, in_requests
from .openai_limits import (
    MAX_BATCH_SIZE,
    Cut,
    LengthRefused,
    check_model,
    length_refusal,
)

KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder(Embedder):
    """Calls ``embeddings.create`` through the official SDK, with explicit retries.

    ``model`` as recorded in catalogs is ``"openai/<model>"``, plus ``"@<dimensions>"`` when
    ``dimensions`` is set (vectors of another size are another embedding space).

    ``dim`` is ``dimensions`` if given, else the known size of the model. For any other model
    (e.g. served by vLLM or Ollama) it is learnt from the first response; reading ``dim`` before
    any call sends one probe request to find out (with the retries below). A probe or a write that finds the server
    unavailable through its retries opens its circuit breaker (``breaker``, ``_breaker``): for ``BREAKER_COOLDOWN``
    seconds reading ``dim``, :meth:`embed_batch` and :meth:`embed_many` raise that failure again at once, with no
    request (a write whose texts are all cached then takes their width, warned; one with texts to embed fails, nothing
    written), and so do route()'s query vectors for ``embedder_cooldown``; a route's failed attempt fails the probe
    at once too (so does a write's with ``max_retries=0``: one attempt, not the next writes); then one is let through;
    any answer of the server closes it.

    Failures: a rejected key (401) raises :class:`EmbedderError` at once; 408, 409, 429, 5xx and
    connection errors/timeouts are retried ``max_retries`` times with exponential backoff and
    jitter (honouring a numeric ``Retry-After``) before raising EmbedderUnavailableError; any other API error, or a
    malformed response, raises at once; a response's ``x-should-retry`` header overrides the status (the SDK's own
    rule: its retries are disabled). :meth:`embed_many` returns all vectors or raises: nothing partial.

    Lengths (see ``openai_limits``; the texts fitted to them in ``openai_fit``): requests hold at most ``batch_size``
    texts and 300,000 UTF-8 bytes (a longer text goes alone), so never more than the API's 300,000 tokens; a request
    a compatible server refuses as over its own total is split in halves until taken. Texts are sent whole: a text
    the model refuses as over its context (8,191 tokens; the refusal names it, or halving the request finds it) is
    embedded from its longest prefix the model takes among ``cut_sizes`` (a warning says how many), the other texts
    of the request as they are.

    :meth:`embed_queries` (route time) makes one attempt per request, all within ``query_timeout`` seconds, with no
    search for a text over the context: it cuts every text longer than the context in bytes and asks once more.
    Error messages never carry the API key.

    The server is ``base_url``, else ``$OPENAI_BASE_URL`` (read here, once), else OpenAI's; either is checked here
    (``openai_client.base_url_in_use``: an http:// or https:// URL, an empty variable unset).

    The key is ``api_key`` or ``$OPENAI_API_KEY``, looked up on the first request: without one,
    embedding raises :class:`EmbedderError` (and route() answers lexically, saying why).

    ``client`` injects a ready SDK client (e.g. ``openai.AzureOpenAI(...)`` for Azure's versioned
    API); its own retries are switched off too, and ``api_key``/``base_url``/``timeout`` are then
    ignored. ``sleep`` is the wait between retries and ``clock`` the time its breaker reads (stubs in tests).
    """

    breaker: Breaker  # always its own (Embedder's may be None)

    def __init__(
        self,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        query_timeout: float = 2.0,
        max_retries: int = 5,
        batch_size: int = MAX_BATCH_SIZE,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        check_model(model, dimensions)
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise InvalidInputError(
                f"OpenAIEmbedder batch_size must be between 1 and {MAX_BATCH_SIZE}, got {batch_size}"
            )
        if max_retries < 0:
            raise InvalidInputError(f"OpenAIEmbedder max_retries must be >= 0, got {max_retries}")
        if base_url is not None or client is None:  # an injected client's server is its own
            base_url = base_url_in_use(base_url, "OpenAIEmbedder base_url")  # $OPENAI_BASE_URL's too, read once here
        self.openai_model = model
        self.dimensions = dimensions
        self.model = f"openai/{model}" + (f"@{dimensions}" if dimensions is not None else "")
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.query_timeout = query_timeout
        self._sleep = sleep
        self.breaker = Breaker(clock=clock)  # its server's: route()'s query vectors, the probe and writes share it
        self._dim: int | None = dimensions if dimensions is not None else KNOWN_DIMS.get(model)
        if client is not None and hasattr(client, "with_options"):
            client = client.with_options(max_retries=0)  # retries are ours, see the class docstring
        self._client_options = (api_key, base_url, timeout)
        self._sdk_client = client

    @property
    def _client(self) -> Any:
        """The SDK client, made on first use (so a missing key is an error of the call that needs it)."""
        if self._sdk_client is None:
            self._sdk_client = make_client(*self._client_options)
        return self._sdk_client

    @property
    def cache_key(self) -> str:
        """The model, and for a server other than OpenAI's its address (``#server=URL``, no credentials or query):
        another server may serve the same model name with other weights, another native dimension or another
        context (a long text cut elsewhere). OpenAI's own key is the model alone, as before. The key does not name a
        server's context: one restarted at the same address with another context or truncation setting is handed the
        cached vectors of texts longer than the smaller one as the old setting cut them (README: delete the key's
        entries and reembed)."""
        server = server_address(self._sdk_client, self._client_options[1])
        return self.model if server == OPENAI_SERVER else f"{self.model}#server={server}"

    @property
    def known_dim(self) -> int | None:
        return self._dim

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self._embed_all(["dimension probe"], progress=False, probe=True)
        assert self._dim is not None
        return self._dim

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) > MAX_BATCH_SIZE:
            raise InvalidInputError(f"at most {MAX_BATCH_SIZE} texts per request, got {len(texts)}; use embed_many")
        return self._embed_all(texts, progress=False)

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """Any number of texts, by requests of at most ``batch_size`` texts and 300,000 UTF-8 bytes."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_all(texts, progress=True)

    def embed_query(self, text: str) -> np.ndarray:
        """One attempt of at most ``query_timeout`` seconds, no retries (see :meth:`Embedder.embed_query`)."""
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """One request for all ``texts`` (one per 300,000 bytes), one attempt each, no retries, all within
        ``query_timeout`` seconds. Refused for length, the texts over the context in bytes are cut to fit and sent
        once more (never over it for OpenAI's models)."""
        return self.embed_queries_with_cuts(texts).vectors

    def embed_queries_with_cuts(self, texts: Sequence[str]) -> Embedded:
        """:meth:`embed_queries`, and which texts were cut because of another: every text of a refused request over
        the context in bytes but the one the refusal names, which alone might have been taken whole."""
        texts = list(texts)
        if not texts:
            return Embedded(np.zeros((0, self.dim), dtype=np.float32))
        # the SDK client (its import, the key) before the clock starts: query_timeout is the requests' budget, and a
        # missing key is said as such, not as the budget spent by a slow first import of the SDK
        self._sdk_client = self._client
        deadline = time.monotonic() + self.query_timeout
        # a route's few texts: one request, as they fit
        send = partial(self._send, retries=0, deadline=deadline)
        vectors, cut = in_requests(texts, MAX_BATCH_SIZE, lambda chunk, found: at_once(chunk, found, send), self.model)
        return Embedded(vectors, frozenset(i for i, c in cut.items() if c.forced))

    def _vectors(self, response: Any, count: int) -> np.ndarray:
        vectors = self._parse(response, count)
        self.breaker.succeeded()  # the server answers
        if self._dim is None and vectors.shape[1] > MAX_DIM:  # no catalog could hold them: before any is written
            raise EmbedderError(
                f"{self.model} answered with embeddings of dimension {vectors.shape[1]}, past a pgvector column's "
                f"{MAX_DIM:,}: give the model a smaller width (openai/MODEL@DIMENSIONS), if it takes one"
            )
        self._dim = vectors.shape[1] if self._dim is None else self._dim
        return normalise(vectors)

    # -- internals -------------------------------------------------------------------------------

    def _embed_all(self, texts: Sequence[str], *, progress: bool, probe: bool = False) -> np.ndarray:
        """A write's (or the width ``probe``'s) texts, with retries, behind the server's breaker (see the class)."""
        if probe:
            with self.breaker.guard(EmbedderUnavailableError, stops=Level.UNAVAILABLE, retries=True):
                return in_requests(texts, self.batch_size, self._fit, self.model)[0]
        self.breaker.admit(stops=Level.RETRIED)  # not after a route's one attempt
        try:
            return in_requests(texts, self.batch_size, self._fit, self.model, progress=progress)[0]
        except EmbedderUnavailableError as exc:  # its retries spent in vain: the next writes need not wait them again
            self.breaker.failed(exc, retried=self.max_retries > 0)  # without any, one attempt, as a route's
            raise

    def _send(self, texts: list[str], *, retries: int | None = None, deadline: float | None = None) -> np.ndarray:
        """One request's vectors (:meth:`_create`, read by :meth:`_vectors`)."""
        return self._vectors(self._create(texts, retries=retries, deadline=deadline), len(texts))

    def _fit(self, texts: Sequence[str], cut: dict[int, Cut]) -> np.ndarray:
        """A write's request, fitted to the model's lengths (``openai_fit.fit``), with retries."""
        return fit(texts, cut, self._send, lambda why: self._error(f"{self._request} failed: {why}"))

    def _create(self, texts: list[str], *, retries: int | None = None, deadline: float | None = None) -> Any:
        import openai

        kwargs: dict[str, Any] = {"model": self.openai_model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        if deadline is not None:  # a request at route time: at most the time left of query_timeout
            kwargs["timeout"] = deadline - time.monotonic()
            if kwargs["timeout"] <= 0:
                raise self._error(f"{self._request} not sent: query_timeout ({self.query_timeout} s) spent")
        retries = self.max_retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return self._client.embeddings.create(**kwargs)
            except openai.AuthenticationError as exc:
                raise self._error(
                    f"OpenAI rejected the API key (HTTP 401) of {self._request}: {provider_message(exc).rstrip('.')}. "
                    "Check api_key or OPENAI_API_KEY."
                ) from exc
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                if not retryable(exc):
                    error = self._error(f"{self._request} failed: {describe(exc)}")
                    refusal = length_refusal(exc, provider_message(exc))
                    raise (error if refusal is None else LengthRefused(str(error), *refusal)) from exc
                if attempt >= retries:
                    raise self._error(
                        f"{self._request} failed after {attempt + 1} attempt{'s' if attempt else ''}: {describe(exc)}",
                        unavailable=True,
                    ) from exc
                self._sleep(self._delay(attempt, exc))
                attempt += 1
            except openai.OpenAIError as exc:  # e.g. a response the SDK cannot read
                raise self._error(f"{self._request} failed: {redact(str(exc))}") from exc

    @property
    def _request(self) -> str:
        """How an error names the request: the model as a catalog records it (a store may use several)."""
        return f"OpenAI embeddings request for {self.model}"

    def _error(self, message: str, *, unavailable: bool = False) -> EmbedderError:
        """An EmbedderError (EmbedderUnavailableError when ``unavailable``: retried in vain) whose message never holds
        the API key in use, whatever its form (a provider's error may quote it; ``redact`` knows only the usual shapes
        of keys)."""
        key = getattr(self._sdk_client, "api_key", None) or self._client_options[0] or os.environ.get("OPENAI_API_KEY")
        if isinstance(key, str) and len(key) >= 8:
            message = message.replace(key, "[redacted]")
        return (EmbedderUnavailableError if unavailable else EmbedderError)(message)

    def _delay(self, attempt: int, exc: Exception) -> float:
        """Exponential backoff with jitter: ``base * 2**attempt`` scaled by [0.5, 1), capped; at least Retry-After."""
        delay = min(self.backoff_max, self.backoff_base * 2**attempt) * (0.5 + random.random() / 2)
        response = getattr(exc, "response", None)
        try:
            retry_after = float(response.headers.get("retry-after", "")) if response is not None else 0.0
        except ValueError:
            retry_after = 0.0
        if math.isfinite(retry_after):
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _parse(self, response: Any, count: int) -> np.ndarray:
        rows = parse_embeddings(response, count, f"malformed OpenAI response for {self.model}")
        width = rows.shape[1]
        if self._dim is not None and width != self._dim:
            learnt = self.dimensions is None and self.openai_model not in KNOWN_DIMS
            raise EmbedderError(
                f"{self.model} answered with embeddings of dimension {width}, expected {self._dim}"
                + (
                    ", its first answer's: a server now serving the model at another width needs a new embedder, "
                    f"and its catalogs `toolstore reembed --model {self.model}`"
                    if learnt
                    else ""
                )
            )
        return rows
