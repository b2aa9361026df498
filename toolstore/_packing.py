"""Client-side packing: always-on tools first, then candidates in rank order, greedy first-fit under a budget."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from ._formats import to_openai
from ._models import Tool
from ._names import name_forms
from ._result import RoutedTool

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


def tool_tokens(tool: Tool) -> int:
    """Token cost of a tool: its OpenAI function definition, serialised as JSON, under the longest name it may be
    offered under (``RouteResult.definitions`` namespaces names that collide), so packed definitions fit the budget."""
    definition: Any = to_openai(tool, name=max(name_forms(tool), key=len))
    return count_tokens(json.dumps(definition, ensure_ascii=False, separators=(",", ":")))


def pack(
    candidates: Sequence[RoutedTool], *, k: int, token_budget: int | None
) -> tuple[list[RoutedTool], list[RoutedTool], int]:
    """Choose what goes in the prompt: (packed, skipped, tokens used).

    Always-on tools come first (they do not count towards ``k``), then the other candidates in the
    order given. A tool that does not fit the remaining budget is skipped and packing continues with
    the next one, until ``k`` routed tools are packed.
    """
    packed: list[RoutedTool] = []
    skipped: list[RoutedTool] = []
    used = 0
    routed = 0
    ordered = [c for c in candidates if c.always_on] + [c for c in candidates if not c.always_on]
    for candidate in ordered:
        if not candidate.always_on and routed >= k:
            break
        if token_budget is not None and used + candidate.tokens > token_budget:
            skipped.append(candidate)
            continue
        packed.append(candidate)
        used += candidate.tokens
        routed += 0 if candidate.always_on else 1
    return packed, skipped, used
