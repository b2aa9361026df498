"""Token counts of tool definitions as a model receives them: tiktoken's ``o200k_base`` when its encoding can be
loaded, else an estimate from the characters. Packing (``_packing``) and ``RouteResult.definitions`` count with it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import cache
from typing import Any

ENCODING = "o200k_base"


@cache
def _encoder() -> Callable[[str], int] | None:
    """tiktoken's counter when its encoding file can be loaded (cached locally), else None. Never raises."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(ENCODING)
    except Exception:  # offline, no cache, or no tiktoken: fall back to a character estimate
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def count_tokens(text: str) -> int:
    """Tokens of ``text`` with tiktoken when available, else ceil(len / 4)."""
    encode = _encoder()
    return encode(text) if encode is not None else math.ceil(len(text) / 4)


def definition_tokens(definition: Any) -> int:
    """Tokens of one definition of a request's ``tools`` (a tool, or a Responses namespace with its tools), serialised
    as compact JSON: what ``tokens_used`` adds up."""
    return count_tokens(json.dumps(definition, ensure_ascii=False, separators=(",", ":")))
