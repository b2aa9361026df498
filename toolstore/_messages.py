"""Agent message lists read into one shape: the latest user request and the tool calls made so far.

Three dialects: OpenAI Chat Completions messages, OpenAI Responses input items, Anthropic Messages. Items may be
dicts or the SDKs' own objects (anything with ``model_dump``). ``dialect="auto"`` tells them apart by what only one
of them has (``function_call`` items, ``tool_use`` blocks, ``tool_calls`` / ``role: tool``); plain text
conversations read the same in all three. Annotations are evaluated (see ``_models``).
Bad input is an InvalidInputError naming the message index and field.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._errors import InvalidInputError

Dialect = Literal["openai-chat", "openai-responses", "anthropic"]
DIALECTS: tuple[str, ...] = ("openai-chat", "openai-responses", "anthropic")
_TEXT_PARTS = ("text", "input_text", "output_text")


@dataclass(frozen=True)
class ToolCall:
    """A call the model made: the name it used, its arguments (parsed JSON object when they parse, else the raw
    string), the call id, and the index of the message (item) holding it."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None
    index: int


@dataclass(frozen=True)
class Conversation:
    """What a message list says: the latest user request (None when no user message holds text) and its index,
    and every tool call, in order."""

    dialect: Dialect
    request: str | None
    request_index: int | None
    tool_calls: list[ToolCall] = field(default_factory=list)


def read_messages(messages: object, dialect: str = "auto") -> Conversation:
    """Read a message list (a Responses ``input`` may also be one string)."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if isinstance(messages, (bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInputError(f"messages must be a list of messages, got {type(messages).__name__}")
    items = [_plain(m, i) for i, m in enumerate(messages)]
    if dialect == "auto":
        dialect = _detect(items)
    if dialect not in DIALECTS:
        raise InvalidInputError(f"unknown message dialect {dialect!r}; expected auto or one of {', '.join(DIALECTS)}")
    request: str | None = None
    request_index: int | None = None
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        text, found = _read(item, index, dialect)
        calls.extend(found)
        if text is not None and text.strip():
            request, request_index = text, index
    return Conversation(dialect, request, request_index, calls)  # type: ignore[arg-type]


def _plain(message: object, index: int) -> dict[str, Any]:
    message = _jsonable(message)
    if not isinstance(message, Mapping):
        raise InvalidInputError(f"messages[{index}]: expected an object, got {type(message).__name__}")
    return dict(message)


def _jsonable(value: object) -> object:
    """SDK objects (pydantic models, e.g. a reply's content blocks appended as they came) as plain dicts."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _detect(items: list[dict[str, Any]]) -> str:
    for item in items:
        if item.get("type") in ("function_call", "function_call_output", "message", "reasoning"):
            return "openai-responses"
        if item.get("role") == "tool" or "tool_calls" in item:
            return "openai-chat"
        content = item.get("content")
        kinds = {p.get("type") for p in content if isinstance(p, Mapping)} if isinstance(content, list) else set()
        if kinds & {"tool_use", "tool_result"}:
            return "anthropic"
        if kinds & {"input_text", "output_text"}:
            return "openai-responses"
    return "openai-chat"


def _read(item: dict[str, Any], index: int, dialect: str) -> tuple[str | None, list[ToolCall]]:
    """The user text of one message (None when it is not a user request) and the tool calls it holds."""
    where = f"messages[{index}]"
    if dialect == "openai-responses" and "role" not in item:
        kind = item.get("type")
        if kind == "function_call":
            name = _string(item, "name", where)
            call_id = item.get("call_id")
            return None, [ToolCall(name, _arguments(item.get("arguments"), where), call_id, index)]
        return None, []  # function_call_output, reasoning and other items hold no request
    role = _string(item, "role", where)
    calls: list[ToolCall] = []
    if dialect == "openai-chat" and role == "assistant":
        tool_calls = item.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise InvalidInputError(f"{where}.tool_calls: expected a list, got {type(tool_calls).__name__}")
        for j, call in enumerate(tool_calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping):
                raise InvalidInputError(f"{where}.tool_calls[{j}].function: expected an object")
            name = _string(fn, "name", f"{where}.tool_calls[{j}].function")
            calls.append(ToolCall(name, _arguments(fn.get("arguments"), where), call.get("id"), index))
    content = item.get("content")
    if content is None:
        return None, calls
    if isinstance(content, str):
        return (content if role == "user" else None), calls
    if not isinstance(content, list):
        raise InvalidInputError(f"{where}.content: expected a string or a list of parts, got {type(content).__name__}")
    texts: list[str] = []
    for j, part in enumerate(content):
        part_where = f"{where}.content[{j}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise InvalidInputError(f"{part_where}: expected an object, got {type(part).__name__}")
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            texts.append(_string(part, "text", part_where))
        elif kind == "tool_use" and dialect == "anthropic":
            calls.append(ToolCall(_string(part, "name", part_where), _input(part, part_where), part.get("id"), index))
    if role != "user":
        return None, calls
    return ("\n".join(texts) if texts else None), calls


def _string(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        got = "nothing" if value is None else type(value).__name__
        raise InvalidInputError(f"{where}.{key}: expected a non-empty string, got {got}")
    return value


def _arguments(raw: object, where: str) -> dict[str, Any] | str:
    """Arguments as a JSON object when they parse as one; a model's malformed JSON is kept as the raw string."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        raise InvalidInputError(f"{where}: tool call arguments must be a JSON string, got {type(raw).__name__}")
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _input(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    value = part.get("input", {})
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}.input: expected an object, got {type(value).__name__}")
    return dict(value)
