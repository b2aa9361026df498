"""OpenAI agent loops (Chat Completions and Responses): the next call's tools, and the model's calls resolved.

    result = route_messages(store, messages)                   # the latest user request, routed
    reply = client.chat.completions.create(model=..., messages=messages, tools=result.definitions("openai"))
    for call in calls(result, reply):                          # ResolvedCall(tool, name, arguments, id)
        ...

For the Responses API route with ``fmt="openai-responses"`` (its definitions packed into the budget as the model
gets them, namespaces included), pass ``result.definitions()`` and the response to :func:`calls`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._agents import ResolvedCall, aroute_messages, resolve_calls, route_messages
from .._errors import InvalidInputError
from .._result import RouteResult

__all__ = ["ResolvedCall", "aroute_messages", "calls", "route_messages"]


def calls(result: RouteResult, response: Any) -> list[ResolvedCall]:
    """The tool calls of a Chat Completions reply (``ChatCompletion`` or its message) or a Responses ``Response``
    (or its ``output`` list), the SDK's objects or their dicts, resolved against ``result``. A streamed chunk is
    refused (InvalidInputError): pass the completion the stream adds up to."""
    choices = _field(response, "choices")
    if choices is not None:
        if not choices:
            raise InvalidInputError("the Chat Completions reply has no choices")
        message = _field(choices[0], "message")
        if message is None:
            raise InvalidInputError(
                "a streamed Chat Completions chunk holds no message: pass the whole completion "
                "(e.g. client.chat.completions.stream(...).get_final_completion())"
            )
        return resolve_calls(result, [message], dialect="openai-chat")
    output = response if _field(response, "role") is not None else _field(response, "output")
    if output is None:
        output = response
    if isinstance(output, list):
        return resolve_calls(result, output, dialect="openai-responses")
    return resolve_calls(result, [output], dialect="openai-chat")


def _field(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, else the attribute (None when it has neither)."""
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
