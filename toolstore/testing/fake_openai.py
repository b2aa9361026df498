"""A local stand-in for the OpenAI HTTP API, for tests that drive the real ``openai`` SDK.

    with FakeOpenAI() as server:
        client = openai.OpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)
        client.embeddings.create(model="text-embedding-3-small", input=["hello"])

Implements ``POST /v1/embeddings`` (deterministic vectors from a hash of the text; ``dimensions`` and both
``encoding_format`` values, the SDK sends ``base64`` unless told otherwise: :mod:`~toolstore.testing.fake_embeddings`)
and ``POST /v1/chat/completions`` (no streaming): each request answered with the next scripted reply
(``replies=``, :meth:`FakeOpenAI.reply_next`: text or tool calls, :mod:`toolstore.testing.fake_chat`), else with
``chat_handler(messages, model)``'s, else with ``fake reply to: <the last message>``.

Embeddings requests are held to the real API's limits, answering its 400s: at most 2,048 inputs of at most
``max_input_tokens`` (8,191) tokens each ("Invalid 'input[i]': maximum input length is 8192 tokens."; with
``legacy_errors``, the earlier "This model's maximum context length is 8192 tokens, however you requested ...",
which names no input) and ``max_request_tokens`` (300,000) in all ("Requested N tokens, max 300000 tokens per
request", type and code ``max_tokens_per_request``); tokens as :func:`fake_token_count` counts them.
Requests are recorded in :attr:`FakeOpenAI.requests`; failures are scripted with
:meth:`FakeOpenAI.fail_next` and :meth:`FakeOpenAI.respond_malformed_next`, and each scripted
entry is consumed by the next authorised request to either endpoint.

It serves from :meth:`~FakeOpenAI.start` to :meth:`~FakeOpenAI.stop` (a ``with`` block); a start while it serves is an
InvalidInputError (it would leak a server's thread and socket), one after a stop serves anew; a stop while it does not
serve (a second one, or before a start: a teardown after a failed start) does nothing, ``base_url`` then is an
InvalidInputError saying to start it, and so is scripting it wrong (:mod:`~toolstore.testing.fake_script`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .._errors import InvalidInputError
from .fake_chat import ApiError as _ApiError
from .fake_chat import ChatHandler, Reply, ToolCall, check_request, completion, held_replies, held_reply
from .fake_embeddings import (
    DEFAULT_MODELS,
    MAX_INPUT_TOKENS,
    MAX_REQUEST_TOKENS,
    RawReply,
    as_list,
    embeddings,
    fake_token_count,
    fake_vector,
)
from .fake_script import MALFORMED_KINDS as MALFORMED_KINDS
from .fake_script import Scripted, script_entries

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "ToolCall", "fake_token_count", "fake_vector"]

_ERROR_MESSAGES = {
    429: ("Rate limit reached for requests. Please try again in 20ms.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    502: ("Bad gateway.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


@dataclass
class RecordedRequest:
    """One request the server received (including rejected ones)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeOpenAI:
    """An OpenAI-compatible HTTP server on ``127.0.0.1`` (random port), run in a background thread."""

    def __init__(
        self,
        *,
        api_key: str = "sk-fake-test-key",
        models: Mapping[str, int] | None = None,
        chat_handler: ChatHandler | None = None,
        max_input_tokens: int = MAX_INPUT_TOKENS,
        max_request_tokens: int = MAX_REQUEST_TOKENS,
        legacy_errors: bool = False,
        replies: Iterable[Reply] = (),
    ) -> None:
        self.api_key = api_key
        self.models = {**DEFAULT_MODELS, **(models or {})}
        self.chat_handler = chat_handler
        self.max_input_tokens, self.max_request_tokens = max_input_tokens, max_request_tokens
        self.legacy_errors = legacy_errors
        self.requests: list[RecordedRequest] = []
        self._script: list[Scripted] = []
        self._replies = held_replies(replies)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        if self._httpd is not None:
            raise InvalidInputError(f"FakeOpenAI is already serving at {self.base_url}: stop() it to start it again")
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="FakeOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise InvalidInputError("FakeOpenAI is not serving: call start() first, or use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- scripting and inspection ----------------------------------------------------------------

    def fail_next(
        self, status: int = 500, times: int = 1, *, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> None:
        """The next ``times`` requests get HTTP ``status`` with an OpenAI-style error body (or ``body``)."""
        entries = script_entries("fail_next", times, Scripted(status, None, body, dict(headers or {})))
        with self._lock:
            self._script.extend(entries)

    def respond_malformed_next(self, kind: str = "missing_data", times: int = 1) -> None:
        """The next ``times`` embedding requests get a 200 that is broken as ``kind`` (see ``MALFORMED_KINDS``)."""
        entries = script_entries("respond_malformed_next", times, Scripted(malformed=kind))
        with self._lock:
            self._script.extend(entries)

    def pass_next(self, times: int = 1) -> None:
        """The next ``times`` requests are answered normally (to place a later scripted failure in a sequence)."""
        entries = script_entries("pass_next", times, Scripted())
        with self._lock:
            self._script.extend(entries)

    def stall_next(self, seconds: float, times: int = 1) -> None:
        """The next ``times`` requests are answered normally, but only after ``seconds`` (to provoke timeouts)."""
        entries = script_entries("stall_next", times, Scripted(stall=seconds))
        with self._lock:
            self._script.extend(entries)

    def reply_next(self, *replies: Reply) -> None:
        """The next chat completions requests are answered with ``replies``, one each in order, after those scripted
        before: text, a ToolCall or a list of them (:mod:`~toolstore.testing.fake_chat`, checked against each request's
        ``tools``); a request that finds none left gets ``chat_handler``'s reply."""
        held = [held_reply(reply) for reply in replies]
        with self._lock:
            self._replies.extend(held)

    @property
    def replies_left(self) -> int:
        """How many scripted replies no request has taken yet."""
        with self._lock:
            return len(self._replies)

    def requests_to(self, endpoint: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with ``endpoint`` (e.g. ``"/embeddings"``)."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(endpoint)]

    def embedding_batches(self) -> list[list[str]]:
        """The ``input`` list of every recorded embeddings request, in order."""
        return [as_list(r.body.get("input")) for r in self.requests_to("/embeddings") if isinstance(r.body, dict)]

    # -- request handling (called from server threads) -------------------------------------------

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            self.requests.append(RecordedRequest(method, path, headers, body))
        try:
            self._check_auth(headers.get("authorization", ""))
            with self._lock:
                scripted = self._script.pop(0) if self._script else Scripted()
            time.sleep(scripted.stall)
            if scripted.status != 200:
                return self._scripted_error(scripted)
            if method == "POST" and path == "/v1/embeddings":
                return _json(200, self._embeddings(body, scripted.malformed))
            if method == "POST" and path == "/v1/chat/completions":
                return _json(200, self._chat(body))
            raise _ApiError(404, f"Invalid URL ({method} {path})", "invalid_request_error")
        except _ApiError as exc:
            return _json(exc.status, exc.body)

    def _check_auth(self, header: str) -> None:
        if not header.startswith("Bearer ") or not header[7:].strip():
            raise _ApiError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                "invalid_request_error",
            )
        key = header[7:].strip()
        if key != self.api_key:
            shown = key[:3] + "*" * max(len(key) - 7, 0) + key[-4:] if len(key) > 7 else "***"
            raise _ApiError(
                401,
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            )

    def _scripted_error(self, scripted: Scripted) -> tuple[int, dict[str, str], bytes]:
        if scripted.body is not None:
            status, headers, payload = _json(scripted.status, scripted.body)
        else:
            message, type_, code = _ERROR_MESSAGES.get(
                scripted.status, (f"Scripted HTTP {scripted.status}.", "server_error", None)
            )
            status, headers, payload = _json(scripted.status, _ApiError(scripted.status, message, type_, code).body)
        return status, {**headers, **scripted.headers}, payload

    def _embeddings(self, body: Any, malformed: str | None) -> dict[str, Any]:
        return embeddings(
            body,
            malformed,
            models=self.models,
            max_input_tokens=self.max_input_tokens,
            max_request_tokens=self.max_request_tokens,
            legacy_errors=self.legacy_errors,
        )

    def _chat(self, body: Any) -> dict[str, Any]:
        check_request(body)
        with self._lock:
            reply = self._replies.pop(0) if self._replies else None
            self._ids += 1
            ident = f"chatcmpl-fake{self._ids}"
        if reply is None and self.chat_handler is not None:
            reply = held_reply(self.chat_handler(body["messages"], str(body.get("model"))))
        return completion(body, reply, ident)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_POST

    def _serve(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, extra, payload = self.fake._handle(self.command, self.path.split("?")[0], headers, raw)
        except RawReply as exc:
            status, extra, payload = 200, {"Content-Type": "text/html"}, exc.payload
        except Exception as exc:  # e.g. a failing chat_handler: answer 500 rather than drop the connection
            status, extra, payload = _json(
                500, _ApiError(500, f"FakeOpenAI handler failed: {exc!r}", "server_error").body
            )
        with suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout): no one to answer
            self.send_response(status)
            for name, value in {**extra, "Content-Length": str(len(payload)), "x-request-id": "req_fake"}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
        pass


def _json(status: int, body: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()
