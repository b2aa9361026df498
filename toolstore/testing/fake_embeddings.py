"""What a :class:`~toolstore.testing.fake_openai.FakeOpenAI` answers to ``POST /v1/embeddings``, no server: the vectors
(:func:`fake_vector`, deterministic from a hash of the text; ``dimensions`` and both ``encoding_format`` values), the
real API's limits and its 400s for a request past them (:func:`check_lengths`, tokens as :func:`fake_token_count`
counts them), and a 200 broken as scripted (``respond_malformed_next``: :data:`~.fake_script.MALFORMED_KINDS`)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .fake_chat import ApiError

DEFAULT_MODELS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
MAX_INPUTS = 2048
MAX_INPUT_TOKENS = 8191  # text-embedding-3-* and ada-002: the error says "8192 tokens"; 8,191 is the documented input
MAX_REQUEST_TOKENS = 300_000  # summed over a request's inputs, for every embedding model
_PIECES = re.compile(r"\s?[^\W\d_]+|\d{1,3}|\s?[^\w\s]+|\s+|_+")


class RawReply(Exception):
    """A 200 whose body is not JSON at all."""

    def __init__(self, payload: bytes) -> None:
        super().__init__("raw reply")
        self.payload = payload


def fake_vector(text: str, dim: int) -> np.ndarray:
    """The unit vector the fake returns for ``text``: prefix ``dim`` of a hash-seeded gaussian, renormalised."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    full = np.random.default_rng(seed).standard_normal(max(dim, 3072))[:dim]
    return (full / np.linalg.norm(full)).astype(np.float32)


def fake_token_count(text: str) -> int:
    """The larger of ``text``'s pieces and a quarter of its UTF-8 bytes (rounded up): the fake's token count.

    Pieces are what byte-level BPE tokenizers split text into before merging, each a token or more: a word with
    the space before it, up to three digits, a run of punctuation or of whitespace. A quarter of the bytes is about
    the real count for English prose and code; Chinese (a token a character, three bytes) and rare words count
    more in reality. Never more than the byte count, which real byte-level BPE tokens never exceed either."""
    return max(len(_PIECES.findall(text)), -(-len(text.encode()) // 4))


def as_list(value: Any) -> list[Any]:
    """A request's ``input``: one string, or a list of them."""
    return [value] if isinstance(value, str) else list(value or [])


def embeddings(
    body: Any,
    malformed: str | None,
    *,
    models: Mapping[str, int],
    max_input_tokens: int,
    max_request_tokens: int,
    legacy_errors: bool,
) -> dict[str, Any]:
    """The answer to embeddings request ``body`` for a server of ``models`` (name: native width) and those limits,
    broken as ``malformed`` (one of :data:`~.fake_script.MALFORMED_KINDS`, or None); ApiError for what the real API
    refuses, RawReply for a body that is no JSON."""
    if not isinstance(body, dict):
        raise ApiError(400, "We could not parse the JSON body of your request.", "invalid_request_error")
    model: Any = body.get("model")
    if model not in models:
        raise ApiError(
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        )
    texts = as_list(body.get("input"))
    if not texts or len(texts) > MAX_INPUTS or not all(isinstance(t, str) and t for t in texts):
        raise ApiError(
            400,
            "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
            "invalid_request_error",
        )
    counts = [fake_token_count(t) for t in texts]
    check_lengths(counts, isinstance(body.get("input"), list), max_input_tokens, max_request_tokens, legacy_errors)
    dim = models[model]
    if body.get("dimensions") is not None:
        wanted = body["dimensions"]
        if model == "text-embedding-ada-002":
            raise ApiError(400, "This model does not support specifying dimensions.", "invalid_request_error")
        if not isinstance(wanted, int) or not 1 <= wanted <= dim:
            raise ApiError(
                400,
                f"Invalid value for 'dimensions' = {wanted}. Must be between 1 and {dim}.",
                "invalid_request_error",
                param="dimensions",
            )
        dim = wanted
    as_base64 = body.get("encoding_format") == "base64"
    if malformed == "not_json":
        raise RawReply(b"<html>upstream proxy error</html>")
    data = []
    for index, text in enumerate(texts):
        vector = fake_vector(text, dim)
        if malformed == "wrong_dimension":
            vector = vector[:-1]
        encoded: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode() if as_base64 else vector.tolist()
        if malformed == "non_numeric":
            encoded = ["not-a-number"] * dim
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    if malformed == "wrong_count":
        data = data[:-1]
    tokens = sum(counts)
    reply: dict[str, Any] = {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    if malformed == "missing_data":
        del reply["data"]
    return reply


def check_lengths(
    counts: list[int], listed: bool, max_input_tokens: int, max_request_tokens: int, legacy_errors: bool
) -> None:
    """The real API's 400s for an input over the model's context and for a request over its token total (``counts``:
    each input's tokens; ``listed``: the inputs came as a list, which the error's ``input[i]`` names)."""
    over = next((i for i, count in enumerate(counts) if count > max_input_tokens), None)
    if over is not None:
        context, count = max_input_tokens + 1, counts[over]
        message = (
            f"This model's maximum context length is {context} tokens, however you requested {count} tokens "
            f"({count} in your prompt; 0 for the completion). Please reduce your prompt; or completion length."
            if legacy_errors
            else f"Invalid 'input{f'[{over}]' if listed else ''}': maximum input length is {context} tokens."
        )
        raise ApiError(400, message, "invalid_request_error")
    if sum(counts) > max_request_tokens:
        message = f"Requested {sum(counts)} tokens, max {max_request_tokens} tokens per request"
        raise ApiError(400, message, "max_tokens_per_request", "max_tokens_per_request")
