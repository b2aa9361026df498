"""OpenAI agent loops (Chat Completions and Responses): the next call's tools, and the model's calls resolved.

    result = route_messages(store, messages)                   # the latest user request, routed
    reply = client.chat.completions.create(model=..., messages=messages, tools=result.definitions("openai"))
    for call in calls(result, reply, unknown="report"):        # ResolvedCall(tool, name, arguments, id), or
        ...                                                    # UnknownCall(name, arguments, id, error): answer it

For the Responses API route with ``fmt="openai-responses"`` (its definitions packed into the budget as the model
gets them, namespaces included), pass ``result.definitions()`` and the response to :func:`calls`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from .._agents import ResolvedCall, UnknownCall, aroute_messages, check_unknown, resolve_calls, route_messages
from .._agents import Unknown as Unknown
from .._errors import InvalidInputError
from .._result import RouteResult

__all__ = ["ResolvedCall", "UnknownCall", "aroute_messages", "calls", "route_messages"]


@overload
def calls(result: RouteResult, response: Any, *, unknown: Literal["raise"] = "raise") -> list[ResolvedCall]: ...
@overload
def calls(result: RouteResult, response: Any, *, unknown: Unknown) -> list[ResolvedCall | UnknownCall]: ...


def calls(
    result: RouteResult, response: Any, *, unknown: Unknown = "raise"
) -> list[ResolvedCall] | list[ResolvedCall | UnknownCall]:
    """The tool calls of a Chat Completions reply (``ChatCompletion``, whose first choice it reads, one of its
    choices, ``reply.choices`` when it holds one choice, its message, or the message's ``tool_calls``; a legacy
    ``function_call`` is one call, its ``id`` None) or a Responses ``Response`` (or its ``output`` list, or one call
    item of it), the SDK's objects or their dicts, resolved against ``result``, in the reply's order. A list of several
    choices (a reply asked for with n>1) is an InvalidInputError saying to pass the one the loop goes on with. A call
    of a name ``result`` did not offer (a model's invention) is an UnknownToolError, raised before any call is
    returned; with ``unknown="report"`` it is an :class:`UnknownCall` in its place instead (its ``error`` the text to
    answer it with), so the loop runs the others and answers each. A streamed chunk is refused (InvalidInputError):
    pass the completion the stream adds up to."""
    report = check_unknown(unknown)
    choices = _field(response, "choices")
    if choices is None and isinstance(response, list) and response and all(map(_choice, response)):
        if len(response) > 1:  # several answers to one request (n>1): which the loop goes on with is the app's pick
            raise InvalidInputError(
                f"calls()'s response is a list of {len(response)} choices (a reply asked for with n>1): pass the "
                "choice the loop goes on with, calls(result, reply.choices[i]), or its message"
            )
        choices = response  # reply.choices of a reply with one choice: that choice's calls
    if choices is not None:
        if not choices:
            raise InvalidInputError("the Chat Completions reply has no choices")
        message = _field(choices[0], "message")
        if message is None:
            raise InvalidInputError(
                "a streamed Chat Completions chunk holds no message: pass the whole completion "
                "(e.g. client.chat.completions.stream(...).get_final_completion())"
            )
        return resolve_calls(result, [message], dialect="openai-chat", report=report)
    if _field(response, "role") is None and (message := _field(response, "message")) is not None:  # one Choice
        return resolve_calls(result, [message], dialect="openai-chat", report=report)
    output = response if _field(response, "role") is not None else _field(response, "output")
    if output is None:
        output = response
    if isinstance(output, list) and output and all(map(_chat_tool_call, output)):  # a message's tool_calls
        return resolve_calls(
            result, [{"role": "assistant", "tool_calls": output}], dialect="openai-chat", report=report
        )
    if isinstance(output, list):
        return resolve_calls(result, output, dialect="openai-responses", report=report)
    if _chat_tool_call(output):
        return resolve_calls(
            result, [{"role": "assistant", "tool_calls": [output]}], dialect="openai-chat", report=report
        )
    if _field(output, "role") is None and _field(output, "type") in _RESPONSES_CALLS:  # one Responses output item
        return resolve_calls(result, [output], dialect="openai-responses", report=report)
    return resolve_calls(result, [output], dialect="openai-chat", report=report)


#: The Responses output items that are calls of the app's tools (``calls()`` of one of them alone reads it).
_RESPONSES_CALLS = ("function_call", "custom_tool_call")


def _choice(item: Any) -> bool:
    """A Chat Completions choice (an item of a reply's ``choices``: its ``message``, or a streamed chunk's
    ``delta``), which has no role, unlike a message or a Responses item."""
    return _field(item, "role") is None and (_field(item, "message") is not None or _field(item, "delta") is not None)


def _chat_tool_call(item: Any) -> bool:
    """A Chat Completions tool call (an item of a message's ``tool_calls``, ``{"id", "type": "function", "function":
    {...}}`` or a custom tool's), which has no role, and whose ``type`` no Responses item has."""
    kind = _field(item, "type")
    return _field(item, "role") is None and kind in ("function", "custom") and _field(item, kind) is not None


def _field(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, else the attribute (None when it has neither)."""
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
