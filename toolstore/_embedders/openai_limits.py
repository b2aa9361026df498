"""The OpenAI embeddings API's length limits, kept without a tokenizer (tiktoken's tables are a download).

The API refuses (HTTP 400) a request of more than 2,048 inputs or 300,000 tokens in all ("Requested N tokens, max
300000 tokens per request", code ``max_tokens_per_request``), and an input over the model's context, 8,191 tokens for
text-embedding-3-* and ada-002 ("Invalid 'input[i]': maximum input length is 8192 tokens.", earlier "This model's
maximum context length is 8192 tokens, however you requested N tokens ..."; vLLM: "This model's maximum context
length is 512 tokens ..."). A byte-level BPE token is at least one UTF-8 byte, so a request of at most 300,000 bytes
is never over the total, and a text of fewer bytes than the context has fewer tokens than it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from .._errors import InvalidInputError
from .base import check_width

MAX_BATCH_SIZE = 2048  # inputs per request
MAX_REQUEST_BYTES = 300_000  # at most as many tokens: under the API's 300,000 tokens per request
CONTEXT_TOKENS = 8192  # the context a refusal that states none is taken to mean (OpenAI's models)
BYTES_PER_TOKEN = 4  # about English text's, in cl100k_base: where the first cut of a refused input starts
SHRINK = 0.75  # each further cut keeps this much of the last one
_CONTEXT = re.compile(r"maximum (?:context|input) length is (\d+) tokens", re.IGNORECASE)
_INPUT = re.compile(r"'input\[(\d+)\]'")
_TOTAL = re.compile(r"tokens per request", re.IGNORECASE)


def check_model(model: str, dimensions: int | None) -> None:
    """What OpenAIEmbedder takes of a model and dimensions (``openai/MODEL@DIMENSIONS``, which the embedder factory
    checks with this before anything is built): a model named, and dimensions, if given, a positive integer that a
    pgvector column holds; InvalidInputError naming what is wrong otherwise."""
    if not model:
        raise InvalidInputError("OpenAIEmbedder model must be a non-empty string")
    if dimensions is None:
        return
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise InvalidInputError(f"OpenAIEmbedder dimensions must be a positive integer, got {dimensions!r}")
    check_width(dimensions, f"embedder 'openai/{model}@{dimensions}': its dimensions")


class LengthRefused(Exception):  # not an error of toolstore's: the embedder handles it and never raises it
    """The server refused a request for its length (HTTP 400): an input over the model's context of ``context``
    tokens (``index``: the input the message names, if it names one), or, with ``context`` None, the request over
    its total of tokens per request. The message is the EmbedderError's to raise if nothing else can be done."""

    def __init__(self, message: str, context: int | None, index: int | None) -> None:
        super().__init__(message)
        self.context = context
        self.index = index


def named_input(refused: LengthRefused, texts: list[str]) -> int | None:
    """The input of ``texts`` that ``refused`` names as over the context, unless it cannot be: a text of fewer UTF-8
    bytes than the context has fewer tokens (a server naming one miscounts or means another; halving finds it)."""
    index, context = refused.index, refused.context
    if index is None or context is None or not 0 <= index < len(texts):
        return None
    return index if len(texts[index].encode()) >= context else None


class Cut(NamedTuple):
    """A text embedded from its beginning: its UTF-8 bytes, those kept, and whether another text made the cut (at
    route time, every text of a refused request over the context in bytes is cut)."""

    bytes: int
    kept: int
    forced: bool = False


def length_refusal(exc: Exception, message: str) -> tuple[int | None, int | None] | None:
    """``(context, index)`` as :class:`LengthRefused` takes them when the API error ``exc`` (its provider message
    ``message``) is a refusal for length, else None."""
    if getattr(exc, "status_code", None) != 400:
        return None
    if getattr(exc, "code", None) == "max_tokens_per_request" or _TOTAL.search(message):
        return None, None
    context = _CONTEXT.search(message)
    if context is None:
        return None
    index = _INPUT.search(message)
    return max(int(context.group(1)), 2), int(index.group(1)) if index else None


def request_batches(texts: Sequence[str], size: int, max_bytes: int = MAX_REQUEST_BYTES) -> Iterator[Sequence[str]]:
    """Consecutive slices of ``texts`` of at most ``size`` texts and ``max_bytes`` UTF-8 bytes (or one longer text)."""
    start = total = 0
    for end, text in enumerate(texts):
        length = len(text.encode())
        if end > start and (end - start == size or total + length > max_bytes):
            yield texts[start:end]
            start, total = end, 0
        total += length
    if start < len(texts):
        yield texts[start:]


def prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` of at most ``max_bytes`` UTF-8 bytes (whole characters)."""
    return text.encode()[:max_bytes].decode(errors="ignore")


def cut_sizes(length: int, context: int) -> Iterator[int]:
    """The byte lengths to try, longest first, for a text of ``length`` UTF-8 bytes refused as over a context of
    ``context`` tokens: from ``BYTES_PER_TOKEN`` bytes a token of the context, ``SHRINK`` of the last each time
    while at least ``context``; then ``context - 1`` bytes, which a byte-level BPE tokenizer cannot count over
    ``context - 1`` tokens (OpenAI's models take it); then, for other tokenizers (a WordPiece model adds two
    tokens), ``SHRINK`` of the last each time down to an eighth of the context."""
    size = min(int(length * SHRINK), BYTES_PER_TOKEN * (context - 1))
    while size >= context:
        yield size
        size = int(size * SHRINK)
    size = min(length - 1, context - 1)
    while size >= max(context // 8, 1):
        yield size
        size = int(size * SHRINK)


def truncation_warning(cut: Sequence[tuple[int, int]], count: int, model: str) -> str:
    """The warning for ``cut``: (bytes, bytes kept) of each of ``count`` texts that ``model`` took only truncated."""
    kept, total = sum(k for _, k in cut), sum(n for n, _ in cut)
    return (
        f"OpenAIEmbedder: {len(cut)} of {count} texts were over the input limit of {model} and were embedded from "
        f"their beginning only ({kept:,} of {total:,} bytes kept)"
    )
