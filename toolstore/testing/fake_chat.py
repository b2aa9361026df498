"""FakeOpenAI's chat completions: the reply to a request, text or tool calls, in the real API's wire format, so the real
``openai`` SDK parses it (``message.content``, or ``message.tool_calls`` with ``finish_reason`` ``"tool_calls"``).

A reply is text (a ``str``), a :class:`ToolCall`, or a list of them (parallel calls). Its tool calls are held to the
request as the real API holds a model's: each names a function (or custom tool) of the request's ``tools``, none is made
when ``tool_choice`` is ``"none"``, the function ``tool_choice`` names is the one called (or one of those its
``allowed_tools`` names), text is no answer when it is ``"required"`` (or allowed tools' mode is), and one call at most
is made when ``parallel_tool_calls`` is false. A reply that breaks that is the fake's 400 (``invalid_request_error``,
naming the call and what the request offered), which the SDK raises as ``openai.BadRequestError``: the test's script and
the app disagree. A call scripted as ``invented`` (a name the model made up) is the exception: sent whatever the request
offers, so a test can see how the app answers a hallucinated call.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .._errors import InvalidInputError


class ApiError(Exception):
    """An OpenAI-style error answer: ``status`` and its body."""

    def __init__(self, status: int, message: str, type_: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": type_, "param": param, "code": code}}


@dataclass(frozen=True)
class ToolCall:
    """A tool call a scripted reply makes: the function's ``name`` and its ``arguments``, a JSON object (sent as its
    JSON text, as the API sends a model's) or a string sent as it is (a model's malformed JSON, for one; a custom
    tool's input, sent as ``{"type": "custom", "custom": {"name", "input"}}`` when the request offers it so); ``id`` is
    made up (``call_fake3_0``: the completion's and the call's index) when not given. ``invented=True``: a name the
    model made up, which the request must not offer: sent as a function call whatever the request's ``tools`` and
    ``tool_choice`` name (a model's hallucinated call, to test how the app answers it); a request that offers a tool
    of that name, or whose ``tool_choice`` is ``"none"``, is the fake's 400 all the same. InvalidInputError naming the
    field that is not so, or the part of the arguments JSON cannot hold (a date, NaN, a key that is no string)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    invented: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInputError(f"ToolCall's name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.arguments, (Mapping, str)):
            raise InvalidInputError(
                f"ToolCall {self.name!r}: arguments must be a JSON object (a dict) or a string, got {self.arguments!r}"
            )
        problem = _not_json(self.arguments, "arguments") if isinstance(self.arguments, Mapping) else None
        if problem:
            raise InvalidInputError(f"ToolCall {self.name!r}: {problem}, which JSON cannot hold: give JSON's values")
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise InvalidInputError(f"ToolCall {self.name!r}: id must be a non-empty string or None, got {self.id!r}")
        if not isinstance(self.invented, bool):
            got = f"{self.invented!r:.60}"
            raise InvalidInputError(f"ToolCall {self.name!r}: invented must be True or False, got {got}")


def _not_json(value: object, where: str) -> str | None:
    """What in ``value`` (at ``where``) is no JSON value, as "arguments['when'] is a date"; None when it all is: a
    string, a finite number, a boolean, null, a list (or tuple) of them or an object of them keyed by strings."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}"
    if isinstance(value, (list, tuple)):
        return next((p for i, item in enumerate(value) if (p := _not_json(item, f"{where}[{i}]"))), None)
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r:.60}, not a string"
            if problem := _not_json(item, f"{where}[{key!r:.60}]"):
                return problem
        return None
    return f"{where} is {type(value).__name__} {value!r:.60}"


#: What the model answers a chat completions request with: text, one tool call, or several (parallel calls).
Reply = str | ToolCall | Sequence[ToolCall]
#: A reply as the fake holds it: text, or the tool calls.
Held = str | tuple[ToolCall, ...]
#: ``chat_handler(messages, model)``: the reply to a request that no scripted reply answers.
ChatHandler = Callable[[list[dict[str, Any]], str], Reply]


def held_reply(reply: object) -> Held:
    """``reply`` (a :data:`Reply`) as the fake holds it; InvalidInputError saying what it is when it is none."""
    if isinstance(reply, str):
        return reply
    if isinstance(reply, ToolCall):
        return (reply,)
    if isinstance(reply, Sequence) and reply and all(isinstance(call, ToolCall) for call in reply):
        return tuple(reply)
    raise InvalidInputError(
        f"a FakeOpenAI reply must be text (a str), a ToolCall or a non-empty list of ToolCalls, got {reply!r:.200}"
    )


def held_replies(replies: object) -> list[Held]:
    """A FakeOpenAI's ``replies=`` as the fake holds them; InvalidInputError when it is no list of replies (a str
    would be one reply a character, a lone ToolCall no list)."""
    if isinstance(replies, (str, ToolCall)) or not isinstance(replies, Iterable):
        raise InvalidInputError(f"FakeOpenAI's replies must be a list of replies, got {replies!r:.200}: write [reply]")
    return [held_reply(reply) for reply in replies]


def check_request(body: Any) -> None:
    """ApiError (the real API's 400) when ``body`` is no chat completions request the fake answers."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise ApiError(400, "'messages' is a required property", "invalid_request_error", param="messages")
    if body.get("stream"):
        raise ApiError(400, "FakeOpenAI does not support streaming.", "invalid_request_error", param="stream")


def completion(body: dict[str, Any], reply: Held | None, ident: str) -> dict[str, Any]:
    """The chat completion ``ident`` answering request ``body`` with ``reply`` (None: ``fake reply to: <its last
    message>``; the i-th tool call without an id gets ``call_<ident's suffix>_<i>``, ``call_fake3_0``); ApiError (a
    400) when the request's ``tools`` and ``tool_choice`` do not allow it."""
    if reply is None:
        reply = f"fake reply to: {text_of(body['messages'][-1])}"
    offered = _check(body, reply)
    messages, model = body["messages"], str(body.get("model"))
    message: dict[str, Any] = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
    message["refusal"] = None
    if isinstance(reply, str):
        written = reply
    else:
        idents = [call.id or f"call_{ident.split('-')[-1]}_{i}" for i, call in enumerate(reply)]
        message["tool_calls"] = [
            _wire(call, offered.get(call.name, "function"), id_) for call, id_ in zip(reply, idents, strict=True)
        ]
        written = " ".join(f"{call.name} {_text_of_arguments(call)}" for call in reply)
    prompt, answer = sum(len(text_of(m).split()) for m in messages), len(written.split())
    return {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop" if isinstance(reply, str) else "tool_calls",
                "logprobs": None,
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer},
    }


def _text_of_arguments(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))


def _wire(call: ToolCall, kind: str, ident: str) -> dict[str, Any]:
    """``call`` as the API writes a call of a tool of ``kind``: a function's JSON arguments, a custom tool's input."""
    if kind == "custom":
        return {"id": ident, "type": "custom", "custom": {"name": call.name, "input": _text_of_arguments(call)}}
    return {"id": ident, "type": "function", "function": {"name": call.name, "arguments": _text_of_arguments(call)}}


def _named(tool: object) -> tuple[str, str] | None:
    """A request's tool, or a tool named by its tool_choice, as its kind (``function`` or ``custom``) and its name."""
    if isinstance(tool, dict) and tool.get("type") in ("function", "custom"):
        inner = tool.get(str(tool["type"]))
        if isinstance(inner, dict) and isinstance(inner.get("name"), str):
            return str(tool["type"]), inner["name"]
    return None


def _check(body: dict[str, Any], reply: Held) -> dict[str, str]:
    """ApiError when the request could not have been answered with ``reply``: a call of a function its ``tools`` do
    not offer or its ``tool_choice`` does not allow (a call scripted as invented: one they do offer), calls in
    parallel where ``parallel_tool_calls`` is false, or text where ``tool_choice`` asks for a call, or JSON arguments
    for a custom tool. The offered tools' kinds, by name."""
    choice = body.get("tool_choice")
    forced = named[1] if (named := _named(choice)) else None
    tools = body["tools"] if isinstance(body.get("tools"), list) else []
    offered = {name: kind for kind, name in filter(None, map(_named, tools))}
    allowed = _allowed(choice)
    if isinstance(reply, str):
        if choice == "required" or forced is not None or (allowed is not None and allowed[0] == "required"):
            _refuse(f"the scripted reply is text, but the request's tool_choice is {choice!r}: it must call a tool")
        return offered
    if len(reply) > 1 and body.get("parallel_tool_calls") is False:
        _refuse(f"the scripted reply makes {len(reply)} tool calls, but the request's parallel_tool_calls is false")
    said = f"offered {', '.join(map(repr, offered))}" if offered else "offered no tools"
    for call in reply:
        if call.invented:
            if choice == "none":
                _refuse(f"the scripted reply calls {call.name!r}, but the request's tool_choice is 'none'")
            if call.name in offered:
                _refuse(
                    f"the scripted reply calls {call.name!r} as invented, but the request offers a tool of that name: "
                    f"script it without invented=True",
                    "tools",
                )
            continue
        if call.name not in offered:
            _refuse(f"the scripted reply calls {call.name!r}, a tool the request did not offer (it {said})", "tools")
        if choice == "none" or (forced is not None and call.name != forced):
            _refuse(f"the scripted reply calls tool {call.name!r}, but the request's tool_choice is {choice!r}")
        if allowed is not None and call.name not in allowed[1]:
            said = ", ".join(map(repr, allowed[1])) or "none"
            _refuse(f"the scripted reply calls tool {call.name!r}, but the request's tool_choice allows only {said}")
        if offered[call.name] == "custom" and not isinstance(call.arguments, str):
            _refuse(
                f"the scripted reply calls custom tool {call.name!r} with JSON arguments: a custom tool's input is "
                f"text, script ToolCall({call.name!r}, 'its input')",
                "tools",
            )
    return offered


def _allowed(choice: object) -> tuple[str, list[str]] | None:
    """An ``allowed_tools`` tool_choice's mode (``auto`` or ``required``) and the names of the tools it allows; None
    for another tool_choice."""
    if not isinstance(choice, dict) or choice.get("type") != "allowed_tools":
        return None
    given = choice.get("allowed_tools")
    given = given if isinstance(given, dict) else {}
    tools = given.get("tools")
    tools = tools if isinstance(tools, list) else []
    names = [named[1] for named in map(_named, tools) if named]
    return str(given.get("mode", "auto")), names


def _refuse(message: str, param: str = "tool_choice") -> NoReturn:
    raise ApiError(400, f"FakeOpenAI: {message}", "invalid_request_error", param=param)


def text_of(message: Any) -> str:
    """A request message's text: its ``content``, or its text parts joined."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")
