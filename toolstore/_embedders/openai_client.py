"""The OpenAI SDK client an :class:`~toolstore._embedders.openai.OpenAIEmbedder` sends through, the server it
names in the embedding cache's key, what the SDK's errors say (worth a retry or not, the provider's message), and its
responses read as vectors (:func:`parse_embeddings`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from .._errors import EmbedderError, InvalidInputError, redact, url_shown

if TYPE_CHECKING:
    import openai

#: Where the SDK sends requests when neither ``base_url`` nor ``$OPENAI_BASE_URL`` says otherwise.
OPENAI_SERVER = "https://api.openai.com/v1"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def make_client(api_key: str | None, base_url: str | None, timeout: float) -> openai.OpenAI:
    """The SDK client, without its own retries; EmbedderError when there is no key."""
    import openai

    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise EmbedderError(
            "no OpenAI API key: pass api_key=... or set OPENAI_API_KEY "
            "(servers that ignore keys, such as a local Ollama, accept any placeholder)"
        )
    options: dict[str, Any] = {"api_key": key, "timeout": timeout, "max_retries": 0}
    if base_url is not None:
        options["base_url"] = base_url
    return openai.OpenAI(**options)


def web_url(url: str) -> bool:
    """Whether ``url`` is an ``http://`` or ``https://`` URL with a host (and a port, if any, that is a number), where
    an OpenAI-compatible server answers (the SDK takes ``notaurl`` too, to fail at its first request)."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port  # ValueError for one that is no number: a password's unescaped '/', '?' or '#' cuts it there
    except ValueError:
        return False
    return parts.scheme.lower() in _DEFAULT_PORTS and bool(parts.hostname) and port != 0


def check_base_url(url: str, what: str) -> None:
    """InvalidInputError naming ``what`` unless ``url`` is a :func:`web_url`."""
    if not web_url(url):
        raise InvalidInputError(f"{what} must be an http:// or https:// URL, got {url_shown(url)!r}")


def base_url_in_use(base_url: str | None, what: str) -> str | None:
    """The server to hand the SDK, checked now rather than at its first request: ``base_url`` (InvalidInputError naming
    ``what`` unless a :func:`web_url`), else ``$OPENAI_BASE_URL``, which the SDK reads when given none (the error names
    the variable), else None: OpenAI's. An empty ``$OPENAI_BASE_URL`` is unset, as toolstore reads its own variables
    (the SDK would send every request to ''): OpenAI's server, given."""
    if base_url is not None:
        check_base_url(base_url, what)
        return base_url
    env = os.environ.get("OPENAI_BASE_URL")
    if env is None:
        return None
    if not env.strip():
        return OPENAI_SERVER
    check_base_url(env, "$OPENAI_BASE_URL")
    return env


def server_address(client: Any, base_url: str | None) -> str:
    """The server the embedder's requests go to, as :func:`normal_address` writes it: the injected ``client``'s
    ``base_url``, else ``base_url``, else ``$OPENAI_BASE_URL`` (read by the SDK as well), else OpenAI's."""
    given = getattr(client, "base_url", None) if client is not None else None
    return normal_address(str(given or base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_SERVER))


def normal_address(url: str) -> str:
    """``scheme://host[:port]/path`` of ``url``: scheme and host lower case, no default port, no trailing slash, and
    never its credentials, query or fragment (they may hold a secret, and do not say which server answers)."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: the SDK cannot send there either; keep it as written
        port = None
        host = parts.netloc.rpartition("@")[2].lower()
    if ":" in host and not host.startswith("["):  # an IPv6 address, which hostname gives without its brackets
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` (:func:`normal_address` without its path): the server, never the path,
    query or credentials, which may hold a secret."""
    parts = urlsplit(url.strip())
    return normal_address(urlunsplit((parts.scheme, parts.netloc, "", "", "")))


def retryable(exc: Exception) -> bool:
    """Whether a failed request is worth another attempt, as the SDK's own retries (switched off) would judge it: no
    connection or a timeout; else what the response's ``x-should-retry`` header says, if anything; else HTTP 408
    (request timeout), 409 (lock timeout), 429 and 5xx."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return True
    response = getattr(exc, "response", None)
    verdict = response.headers.get("x-should-retry") if response is not None else None
    if verdict in ("true", "false"):
        return verdict == "true"
    status = getattr(exc, "status_code", 0)
    return status in (408, 409, 429) or status >= 500


def provider_message(exc: Exception) -> str:
    """The provider's own error message (the SDK's ``message`` prefixes it with "Error code: ...")."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return redact(body["message"])
    return redact(getattr(exc, "message", None) or str(exc))


def describe(exc: Exception) -> str:
    """``HTTP status: the provider's message``, or the exception's type and message when there was no response, with
    the server it was sent to (:func:`origin`) when the exception knows: the SDK's ``Connection error.`` names none."""
    status = getattr(exc, "status_code", None)
    message = provider_message(exc)
    if status is not None:
        return f"HTTP {status}: {message}"
    server = _request_server(exc)
    return f"{type(exc).__name__}: {message}" + (f" (server {server})" if server else "")


def _request_server(exc: Exception) -> str | None:
    """The :func:`origin` of the request an SDK (or httpx) error was raised for, if it has one."""
    try:
        url = getattr(getattr(exc, "request", None), "url", None)
    except RuntimeError:  # httpx: "The .request property has not been set"
        return None
    return origin(str(url)) if url else None


def parse_embeddings(response: Any, count: int, malformed: str) -> np.ndarray:
    """The ``count`` embeddings of an embeddings response, one row each in input order, all of one width; EmbedderError
    starting ``malformed`` (which names the model) for anything else."""
    data = getattr(response, "data", None)
    if not isinstance(data, list) or not data:
        raise EmbedderError(f"{malformed}: no 'data' list of embeddings (got {_preview(response)})")
    if len(data) != count:
        raise EmbedderError(f"{malformed}: {len(data)} embeddings returned for {count} inputs")
    rows: list[np.ndarray | None] = [None] * count
    for item in data:
        index = getattr(item, "index", None)
        if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
            raise EmbedderError(f"{malformed}: bad or duplicate embedding index {index!r}")
        rows[index] = _as_vector(getattr(item, "embedding", None), index, malformed)
    widths = {len(row) for row in rows}  # type: ignore[arg-type]
    if len(widths) > 1:
        raise EmbedderError(f"{malformed}: embeddings of dimensions {sorted(widths)} in one response")
    return np.stack(rows)  # type: ignore[arg-type]


def _as_vector(values: Any, index: int, malformed: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise EmbedderError(f"{malformed}: embedding {index} is not a list of numbers")
    try:
        raw = np.asarray(values)
    except ValueError as exc:  # ragged nesting
        raise EmbedderError(f"{malformed}: embedding {index} is not a flat list of numbers") from exc
    if raw.ndim != 1 or raw.dtype.kind not in "iuf":  # rejects strings, None, bools, nested lists
        raise EmbedderError(f"{malformed}: embedding {index} contains non-numeric values")
    vector = raw.astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise EmbedderError(f"{malformed}: embedding {index} contains NaN or infinite values")
    return vector


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
