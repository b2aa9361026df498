"""How an :class:`~toolstore._embedders.openai.OpenAIEmbedder` fits its texts to what the model takes, given a
function that sends one request (``send``: its vectors, or :class:`~.openai_limits.LengthRefused`); no I/O of its own.

A write's texts go in requests (:func:`in_requests`: ``openai_limits.request_batches``, one warning counting the texts
cut); each request is sent whole while the server takes it (:func:`fit`): one refused as over its total of tokens, or
over the context by an input it does not name, is split in halves; an input refused as over the context is embedded
from its longest prefix the model takes (:func:`shrink`), the others asked again. At route time (:func:`at_once`) a
refused request is sent once more with every text longer than the context in bytes cut to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .._errors import EmbedderError
from .._observe import logger
from .._progress import report
from .openai_limits import (
    CONTEXT_TOKENS,
    Cut,
    LengthRefused,
    cut_sizes,
    named_input,
    prefix,
    request_batches,
    truncation_warning,
)

#: One request: the vectors of the texts, in order; LengthRefused when the model refuses it for length.
Send = Callable[[list[str]], np.ndarray]
#: The texts of one request, embedded: their vectors, the cuts made noted by index in the request.
Embed = Callable[[Sequence[str], dict[int, Cut]], np.ndarray]


def in_requests(
    texts: Sequence[str], size: int, embed: Embed, model: str, *, progress: bool = False
) -> tuple[np.ndarray, dict[int, Cut]]:
    """``embed`` of the texts of each request (``request_batches`` of ``size``), concatenated, and the cuts it noted
    by index in ``texts``, which one warning counts (naming ``model``); progress reported after each request."""
    parts: list[np.ndarray] = []
    cut: dict[int, Cut] = {}
    start = 0
    for chunk in request_batches(texts, size):
        found: dict[int, Cut] = {}
        parts.append(embed(chunk, found))
        cut |= {start + i: c for i, c in found.items()}
        start += len(chunk)
        if progress:
            report(start, len(texts))
    if cut:
        logger.warning(truncation_warning([(c.bytes, c.kept) for c in cut.values()], len(texts), model))
    return np.concatenate(parts), cut


def at_once(texts: Sequence[str], cut: dict[int, Cut], send: Send) -> np.ndarray:
    """The vectors of ``texts`` at route time: one attempt; refused for length, one more with every text over the
    context in bytes cut to it (noted in ``cut``: forced but for the text the refusal names)."""
    try:
        return send(list(texts))
    except LengthRefused as refused:
        fitted = [prefix(t, (refused.context or CONTEXT_TOKENS) - 1) for t in texts]
        try:
            if fitted == list(texts):
                raise
            vectors = send(fitted)
        except LengthRefused as again:  # an EmbedderError of the usual name for route()'s reason
            raise EmbedderError(str(again)) from again
        named = named_input(refused, list(texts))  # over the context: cut the same way in any company
        for i, (text, head) in enumerate(zip(texts, fitted)):
            if head != text:
                cut[i] = Cut(len(text.encode()), len(head.encode()), forced=i != named)
        return vectors


def fit(texts: Sequence[str], cut: dict[int, Cut], send: Send, fail: Callable[[str], EmbedderError]) -> np.ndarray:
    """The vectors of ``texts``: one request while the server takes it. A request refused as over its total of
    tokens, or over the context by an input it does not name, is split in halves; an input refused as over the
    context is embedded truncated (:func:`shrink`; noted in ``cut``) and the others asked again."""
    rows: list[np.ndarray | None] = [None] * len(texts)
    groups = [list(range(len(texts)))]
    while groups:
        group = groups.pop()
        try:
            vectors = send([texts[i] for i in group])
        except LengthRefused as refused:
            named = 0 if len(group) == 1 else named_input(refused, [texts[i] for i in group])
            if named is None:
                half = len(group) // 2
                groups += [group[half:], group[:half]]  # the first half next
                continue
            one = group.pop(named)
            rows[one], cut[one] = shrink(texts[one], refused.context, send, fail)
            if group:
                groups.append(group)
            continue
        for i, vector in zip(group, vectors):
            rows[i] = vector
    return np.stack(rows)  # type: ignore[arg-type]


def shrink(text: str, context: int | None, send: Send, fail: Callable[[str], EmbedderError]) -> tuple[np.ndarray, Cut]:
    """The vector of the longest of ``text``'s prefixes (``cut_sizes``) that the model takes, and the cut; ``fail``'s
    EmbedderError, told why, when it takes none."""
    length = tried = len(text.encode())
    for size in cut_sizes(length, context or CONTEXT_TOKENS):
        head = prefix(text, size)
        if not head:
            break
        tried = len(head.encode())
        try:
            vector = send([head])[0]
        except LengthRefused:
            continue
        return vector, Cut(length, len(head.encode()))
    raise fail(
        f"the model refused a text of {length:,} UTF-8 bytes as too long, and every beginning of it tried, down to "
        f"{tried:,} bytes"
    )
