"""Agent message lists read into one shape: the user turns (requests) and the tool calls made in them.

Three dialects: OpenAI Chat Completions messages, OpenAI Responses input items, Anthropic Messages. Items may be
dicts or the SDKs' own objects (anything with ``model_dump``). ``dialect="auto"`` tells them apart by what only one
of them has (Responses items without a role, such as ``function_call``, ``custom_tool_call`` and their outputs;
``tool_use`` blocks; ``tool_calls`` / ``role: tool``, and Chat Completions' legacy ``function_call`` / ``role:
function``); plain text conversations read the same in all three. Calls of custom tools (free-form input instead of
JSON arguments) are read in both OpenAI dialects; an assistant message's legacy ``function_call`` is read as one call
without a call id (a session logs it under one made from its turn: ``_agents.logged_calls``). Annotations are evaluated
(see ``_models``).

A turn starts at a user message that holds text (a message of only tool results is no request) and runs to the next
one. ``turns=N`` reads (and checks) only the last N turns, so the work is bounded however long the list grows.
Bad input is an InvalidInputError naming the message index and field: an item that is no object (or an OpenAI
reply appended whole: a ChatCompletion, a Responses Response, named with what to add instead), a role that is not
a string or no known role, an item with neither role nor type, content that is neither text nor a list of parts, a
tool call without a name, and the tool calls or results of another dialect than the one read (given, or told apart:
a list that mixes them), which would go unread.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._errors import InvalidInputError
from ._formats.checks import shown
from ._input import parse_json
from ._names import call_label

Dialect = Literal["openai-chat", "openai-responses", "anthropic"]
DIALECTS: tuple[str, ...] = ("openai-chat", "openai-responses", "anthropic")
#: Roles a message may have in any of the three dialects.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_TEXT_PARTS = ("text", "input_text", "output_text")
#: Responses items (no role) that are tool calls the model made.
_CALL_ITEMS = ("function_call", "custom_tool_call")
#: How deep in a message its SDK objects may be (a tool result's part: message, content, tool result, its content, the
#: part), converted to dicts by ``_jsonable``; a tool's input or arguments are kept as given below that.
_SDK_DEPTH = 5


@dataclass(frozen=True)
class ToolCall:
    """A call the model made: the name it used, its arguments (parsed JSON object when they parse, nested at most
    100 levels, else the raw string; a custom tool's input text as it is), the call id, the index of the message
    (item) holding it, and the Responses ``namespace`` the called tool was in (None: none)."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None
    index: int
    namespace: str | None = None

    @property
    def qualified_name(self) -> str:
        """The call as one string, where one must say it (``RouteResult.unresolved``): ``namespace__name`` inside a
        namespace, else the name. A call is resolved by the pair (``_names.resolve_call``), not by this string: it is
        not always the tool's catalog-wide name (hashed past 64 characters; a tool with its own provider)."""
        return call_label(self.name, self.namespace)


@dataclass(frozen=True)
class Turn:
    """One user turn: its request, the index of its message, and the tool calls made after it (before the next)."""

    request: str
    index: int
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class Conversation:
    """What a message list says: the latest user request (None when no user message holds text) and its index,
    every tool call in order, the user turns (oldest first; only the last ``turns`` when bounded), and the ids of
    calls whose results say they failed (Anthropic ``is_error``)."""

    dialect: Dialect
    request: str | None
    request_index: int | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    failed: frozenset[str] = frozenset()


def check_dialect(dialect: object) -> str:
    """``dialect`` when it is ``auto`` or one of :data:`DIALECTS`; else InvalidInputError naming it."""
    if dialect != "auto" and dialect not in DIALECTS:
        raise InvalidInputError(f"unknown message dialect {dialect!r}; expected auto or one of {', '.join(DIALECTS)}")
    return str(dialect)


def read_messages(messages: object, dialect: str = "auto", *, turns: int | None = None) -> Conversation:
    """Read a message list (a Responses ``input`` may also be one string); ``turns``: read only the last N turns."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if isinstance(messages, (bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInputError(f"messages must be a list of messages, got {type(messages).__name__}")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise InvalidInputError(f"turns must be a positive integer, got {turns!r}")
    start, items = _window(messages, turns)
    given = check_dialect(dialect) != "auto"
    if not given:
        dialect = _detect(items)
    calls: list[ToolCall] = []
    found: list[Turn] = []
    failed: set[str] = set()
    for offset, item in enumerate(items):
        index = start + offset
        _check_own(item, index, dialect, given)
        text, made = _read(item, index, dialect, failed)
        if text is not None and text.strip():
            found.append(Turn(text, index))
        calls.extend(made)
        if found and made:
            found[-1].tool_calls.extend(made)
    last = found[-1] if found else None
    return Conversation(
        dialect,  # type: ignore[arg-type]
        None if last is None else last.request,
        None if last is None else last.index,
        calls,
        found,
        frozenset(failed),
    )


def _window(messages: Sequence[object], turns: int | None) -> tuple[int, list[dict[str, Any]]]:
    """The index of the first message read and the items from there, as plain dicts: everything, or from the
    ``turns``-th user turn from the end (the list is walked backwards, so earlier messages are never converted)."""
    if turns is None:
        return 0, [_plain(m, i) for i, m in enumerate(messages)]
    items: list[dict[str, Any]] = []
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        item = _plain(messages[index], index)
        items.append(item)
        if _is_request(item):
            seen += 1
            if seen == turns:
                return index, items[::-1]
    return 0, items[::-1]


def _is_request(item: Mapping[str, Any]) -> bool:
    """A user message holding text (in any dialect)."""
    if item.get("role") != "user":
        return False
    content = item.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    return any(
        (isinstance(p, str) and p.strip())
        or (
            isinstance(p, Mapping)
            and p.get("type") in _TEXT_PARTS
            and isinstance(p.get("text"), str)
            and p["text"].strip()
        )
        for p in content
    )


def _plain(message: object, index: int) -> dict[str, Any]:
    message = _jsonable(message)
    if not isinstance(message, Mapping):
        raise InvalidInputError(f"messages[{index}]: expected an object, got {type(message).__name__}")
    _check_not_reply(message, index)
    return dict(message)


def _check_not_reply(item: Mapping[str, Any], index: int) -> None:
    """InvalidInputError when ``item`` is an OpenAI model's whole reply (an agent loop's ``messages.append(reply)``)
    rather than a message, naming what to add instead: read on, it said its role was missing. (An Anthropic Message
    has its role and content: it reads as its message, as ``calls()`` reads it.)"""
    if "choices" in item and "role" not in item:
        kind, instead = "Chat Completions reply, not a message", "append reply.choices[0].message"
    elif item.get("object") == "response" and "role" not in item:
        kind, instead = "Responses reply, not an input item", "add its items (input += response.output)"
    else:
        return
    raise InvalidInputError(f"messages[{index}] is a whole {kind}: {instead}")


def _anthropic_reply(item: Mapping[str, Any]) -> bool:
    """An Anthropic ``Message`` (a whole reply, its ``type`` ``message`` as a Responses message item's, but with the
    ``usage`` none of those has), which reads as the assistant message it holds."""
    return item.get("type") == "message" and "usage" in item and "role" in item


def _jsonable(value: object, depth: int = 0) -> object:
    """SDK objects (pydantic models, e.g. a reply's content blocks appended as they came) as plain dicts, down to
    :data:`_SDK_DEPTH` levels into the message: a value deeper (inside a tool's input) is kept as it is, so an input
    nested as deep as JSON reads is read, not walked to a RecursionError."""
    if depth > _SDK_DEPTH:
        return value
    if hasattr(value, "model_dump"):
        try:
            return value.model_dump(mode="json", exclude_none=True)
        except (ValueError, RecursionError):  # nested past pydantic's serializer (a deep tool input): field by field
            return _fields(value, depth)
    if isinstance(value, Mapping):
        return {k: _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    return value


def _fields(model: Any, depth: int) -> dict[str, object]:
    """A pydantic model's fields that are not None (its extra ones too), by their JSON names, each as
    :func:`_jsonable` gives it."""
    values = {(info.alias or name): getattr(model, name) for name, info in type(model).model_fields.items()}
    values.update(model.model_extra or {})
    return {key: _jsonable(value, depth + 1) for key, value in values.items() if value is not None}


def _detect(items: list[dict[str, Any]]) -> str:
    for item in items:
        kind = item.get("type")
        if (kind == "message" and not _anthropic_reply(item)) or (
            "role" not in item and isinstance(kind, str) and kind
        ):
            return "openai-responses"  # only Responses has items without a role (calls, their outputs, reasoning)
        if item.get("role") in ("tool", "function") or "tool_calls" in item or "function_call" in item:
            return "openai-chat"
        content = item.get("content")
        parts = content if isinstance(content, list) else []  # a type that is no string is _read's error, not a hash's
        kinds = {p["type"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("type"), str)}
        if kinds & {"tool_use", "tool_result"}:
            return "anthropic"
        if kinds & {"input_text", "output_text"}:
            return "openai-responses"
    return "openai-chat"


def _check_own(item: dict[str, Any], index: int, dialect: str, given: bool) -> None:
    """InvalidInputError when ``item`` holds the tool calls or results of another dialect than the one the list is read
    as, which would go unread (a session would log none of its calls): a dialect given that the list is not in, or a
    list that mixes dialects."""
    content = item.get("content")
    kinds = [p.get("type") for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    parts = {kind for kind in kinds if isinstance(kind, str)}  # a type that is no string is _read's error
    legacy = item.get("function_call") is not None and "role" in item  # not a Responses function_call item's type
    if dialect != "openai-chat" and (item.get("tool_calls") or legacy or item.get("role") in ("tool", "function")):
        mark = "tool_calls" if item.get("tool_calls") else "function_call" if legacy else f"role {item['role']!r}"
        owner = "openai-chat"
    elif dialect != "anthropic" and parts & {"tool_use", "tool_result"}:
        mark, owner = f"a {sorted(parts & {'tool_use', 'tool_result'})[0]} block", "anthropic"
    else:
        return
    how = f"dialect={dialect!r} was given" if given else f"the list is read as {dialect} (it mixes dialects)"
    raise InvalidInputError(
        f"messages[{index}] has {mark}, which only {owner} messages have, but {how}: its tool calls "
        f"would go unread; give dialect={owner!r} (or 'auto' for a list in one dialect)"
    )


def _read(item: dict[str, Any], index: int, dialect: str, failed: set[str]) -> tuple[str | None, list[ToolCall]]:
    """The user text of one message (None when it is not a user request) and the tool calls it holds."""
    where = f"messages[{index}]"
    kind = item.get("type")
    if "role" not in item and dialect == "openai-responses" and isinstance(kind, str) and kind:
        if kind in _CALL_ITEMS:
            custom = kind == "custom_tool_call"
            arguments = _input_text(item.get("input"), where) if custom else _arguments(item.get("arguments"), where)
            namespace = None if item.get("namespace") is None else _string(item, "namespace", where)
            name = _string(item, "name", where)
            return None, [ToolCall(name, arguments, item.get("call_id"), index, namespace)]
        return None, []  # function_call_output, reasoning and other items hold no request
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        got = "nothing" if role is None else repr(role) if isinstance(role, str) else type(role).__name__
        raise InvalidInputError(f"{where}.role: expected one of {', '.join(sorted(ROLES))}, got {got}")
    calls: list[ToolCall] = []
    if dialect == "openai-chat" and role == "assistant":
        tool_calls = item.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise InvalidInputError(f"{where}.tool_calls: expected a list, got {type(tool_calls).__name__}")
        for j, call in enumerate(tool_calls):
            custom = isinstance(call, Mapping) and call.get("type") == "custom"  # a custom tool's free-form input
            key = "custom" if custom else "function"
            fn = call.get(key) if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping):
                raise InvalidInputError(f"{where}.tool_calls[{j}].{key}: expected an object")
            name = _string(fn, "name", f"{where}.tool_calls[{j}].{key}")
            arguments = _input_text(fn.get("input"), where) if custom else _arguments(fn.get("arguments"), where)
            calls.append(ToolCall(name, arguments, call.get("id"), index))
        if item.get("function_call") is not None:  # the legacy field (before tool_calls): one call, no call id
            calls.append(_function_call(item["function_call"], where, index))
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
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            if not isinstance(part, Mapping):
                got = type(part).__name__
            else:  # its type named as given: a huge integer too (shown says it is one)
                got = f"a type that is no string, {shown(part['type'])}" if "type" in part else "no type"
            raise InvalidInputError(f"{part_where}: expected a string or an object with a type, got {got}")
        kind = part["type"]
        if kind in _TEXT_PARTS:
            texts.append(_string(part, "text", part_where))
        elif kind == "tool_use" and dialect == "anthropic":
            calls.append(ToolCall(_string(part, "name", part_where), _input(part, part_where), part.get("id"), index))
        elif kind == "tool_result" and part.get("is_error") is True and isinstance(part.get("tool_use_id"), str):
            failed.add(part["tool_use_id"])
    if role != "user":
        return None, calls
    return ("\n".join(texts) if texts else None), calls


def _function_call(call: object, where: str, index: int) -> ToolCall:
    """An assistant message's legacy ``function_call`` (``{"name", "arguments"}``, answered by a ``function`` message
    naming it) as a call: it has no call id (a session logs it under one made from its turn:
    ``_agents.logged_calls``)."""
    if not isinstance(call, Mapping):
        raise InvalidInputError(f"{where}.function_call: expected an object, got {type(call).__name__}")
    name = _string(call, "name", f"{where}.function_call")
    return ToolCall(name, _arguments(call.get("arguments"), f"{where}.function_call"), None, index)


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
        parsed = parse_json(raw, allow_nan=True)
    except ValueError:  # malformed, an integer past Python's digits, nested deeper than MAX_DOCUMENT_DEPTH
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _input_text(raw: object, where: str) -> str:
    """A custom tool call's input: free-form text, kept as it is (even when it reads as JSON)."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InvalidInputError(f"{where}: a custom tool call's input must be a string, got {type(raw).__name__}")
    return raw


def _input(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    value = part.get("input", {})
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}.input: expected an object, got {type(value).__name__}")
    return dict(value)
