"""OpenAI agent loops (Chat Completions and Responses): the next call's tools, and the model's calls resolved.

    result = route_messages(store, messages)                   # the latest user request, routed
    reply = client.chat.completions.create(model=..., messages=messages, tools=result.definitions("openai"))
    for call in calls(result, reply):                          # ResolvedCall(tool, name, arguments, id)
        ...

For the Responses API pass ``result.definitions("openai-responses")`` and the response to :func:`calls`.
"""

from __future__ import annotations

from typing import Any

from .._agents import ResolvedCall, aroute_messages, resolve_calls, route_messages
from .._result import RouteResult

__all__ = ["ResolvedCall", "aroute_messages", "calls", "route_messages"]


def calls(result: RouteResult, response: Any) -> list[ResolvedCall]:
    """The tool calls of a Chat Completions reply (``ChatCompletion`` or its message) or a Responses ``Response``
    (or its ``output`` list), resolved against ``result``."""
    if hasattr(response, "choices"):
        return resolve_calls(result, [response.choices[0].message], dialect="openai-chat")
    output = getattr(response, "output", response)
    if isinstance(output, list):
        return resolve_calls(result, output, dialect="openai-responses")
    return resolve_calls(result, [response], dialect="openai-chat")
