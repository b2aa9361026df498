"""Parse already-decoded JSON tool definitions of any supported shape into :class:`Tool`s."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .._errors import InvalidInputError, InvalidToolError
from .._input import check_document_depth
from .._models import Tool
from .._observe import logger
from .build import (
    META_KEY,
    NAMESPACE_KEY,
    Draft,
    build_tool,
    namespace_conflicts,
    namespace_error,
    namespace_record,
    tool_label,
)
from .checks import check_grammar, is_empty_object_schema, shown, type_name
from .openapi import is_openapi, openapi_drafts

Located = tuple[Tool, str]
"""A parsed tool and the label that names where it came from, for error messages."""
Skipped = tuple[str, str]
"""A built-in tool left out: the label that names where it was, and its type."""


#: Tool types a model provider runs itself (OpenAI Assistants and Responses: code interpreter, file search, web
#: search, computer use, image generation, remote MCP servers, shells...; Anthropic's MCP connector): not functions
#: a router can offer, so an import skips them with a warning. Dated types are built-in too (:data:`_DATED_TYPE`).
BUILTIN_TYPES = frozenset(
    "apply_patch code_interpreter computer computer_use computer_use_preview file_search image_generation "
    "local_shell mcp mcp_toolset programmatic_tool_calling retrieval shell tool_search web_search "
    "web_search_preview".split()
)
# A provider's built-in tool versioned by date: Anthropic's "web_search_20250305", "bash_20250124",
# "text_editor_20250728"; OpenAI's "web_search_preview_2025_03_11".
_DATED_TYPE = re.compile(r"[a-z][a-z_]*_(?:\d{8}|\d{4}_\d{2}_\d{2})")
_WHY_BUILTIN = "built-in tools run inside the model provider and are not functions toolstore can route to"


def parse_tools(data: object, *, provider: str | None = None) -> list[Tool]:
    """Parse tool definitions of any supported format, detected per object.

    ``data`` is a decoded JSON value (or an SDK's pydantic objects for it: the ``mcp`` SDK's ``ListToolsResult``, its
    ``Tool``s): one tool (OpenAI chat or Responses, a function or a custom tool, Anthropic,
    MCP, bare ``{"name", "description", "parameters"}`` or a benchmark row), an MCP ``tools/list`` result
    or JSON-RPC response, an OpenAPI 3.x document, a ``{"tools": [...]}`` wrapper (a named one too when
    it defines no tool itself: an MCP server manifest, an OpenAI Assistant), a Responses API ``namespace`` (its name
    is its tools' provider: the model calls them by it), or a list of any of these.
    ``provider`` is the default provider of tools that do not name their own
    (in ``x-toolstore``, a benchmark row's ``provider`` or a namespace); it overrides an OpenAPI ``info.title``.
    With a provider a tool's id is ``provider.name`` unless the definition gives an explicit id.
    Built-in tools that the model's provider runs itself (``{"type": "code_interpreter"}``, ``file_search``,
    ``web_search_preview``, ``mcp``, Anthropic's ``web_search_20250305``...: :func:`is_builtin`) are no functions to
    route to: they are skipped with a warning on the ``toolstore`` logger.

    Raises :class:`InvalidToolError` naming the offending tool, or the built-in tools when they are all ``data``
    holds, or two tools of one id, or a namespace given twice differently (:func:`check_namespaces`); nothing is
    returned on error; JSON text (a ``str`` or ``bytes``: a file's content, not decoded) is refused so, saying to
    decode it or read the file with :func:`load_tools_file`.
    """
    if isinstance(data, (str, bytes, bytearray)):
        raise InvalidToolError(
            f"parse_tools takes a decoded JSON value (json.loads of the text), got {type(data).__name__}; "
            "load_tools_file reads a tools file"
        )
    skipped: list[Skipped] = []
    located = parse_located(data, provider=provider, skipped=skipped)
    check_skipped(located, skipped)
    check_unique(located)
    check_namespaces(located)
    return [tool for tool, _ in located]


def parse_located(data: object, *, provider: str | None = None, skipped: list[Skipped]) -> list[Located]:
    """Like :func:`parse_tools`, keeping each tool's label and without the duplicate-id check; a built-in tool is
    appended to ``skipped`` rather than parsed, for the caller's :func:`check_skipped`."""
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        raise InvalidInputError(f"provider must be a non-empty string or None, got {provider!r}")
    data = _decoded(data)
    try:
        check_document_depth(data)  # a Python object may nest past what the recursive checks below can walk
    except ValueError as exc:
        raise InvalidToolError(f"tool definitions {exc}") from None
    drafts: list[tuple[Draft, str]] = []
    _collect(data, "", drafts, skipped, None)
    located = []
    for draft, loc in drafts:
        tool = build_tool(draft, loc, provider)
        located.append((tool, tool_label(loc, tool.name)))
    return located


def _decoded(data: object) -> object:
    """``data`` with an SDK's tool objects (pydantic models: the ``mcp`` SDK's ``ListToolsResult`` of
    ``session.list_tools()``, its ``Tool``s, alone or in a list) as the JSON they stand for, by their wire names."""
    if isinstance(data, (list, tuple)):
        return [_decoded(item) for item in data]
    dump = getattr(data, "model_dump", None)
    if not isinstance(data, (dict, type)) and callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    return data


def check_unique(located: Iterable[Located], context: str = "") -> None:
    """Raise :class:`InvalidToolError` naming both tools when two share an id."""
    seen: dict[str, str] = {}
    for tool, label in located:
        if tool.id in seen:
            prefix = f"{context}: " if context else ""
            raise InvalidToolError(f"{prefix}duplicate tool id {tool.id!r}: {seen[tool.id]} and {label}")
        seen[tool.id] = label


def check_namespaces(located: Iterable[Located], context: str = "") -> None:
    """Raise :class:`InvalidToolError` naming the namespace and two of its tools when a Responses namespace of one name
    is given twice, differently (another description, other keys): one would be lost (``build.namespace_conflict``);
    given twice the same, it is one namespace."""
    for name, difference, first, label in namespace_conflicts((label, namespace_record(t)) for t, label in located):
        prefix = f"{context}: " if context else ""
        raise InvalidToolError(prefix + namespace_error(name, difference, first, label))


def check_skipped(located: list[Located], skipped: list[Skipped], context: str = "") -> None:
    """Log the built-in tools an import left out; when they were all it held, raise :class:`InvalidToolError`."""
    if not skipped:
        return
    prefix = f"{context}: " if context else ""
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    if not located:
        listed = ", ".join(f"{label} (unsupported tool type {kind!r:.80})" for label, kind in skipped[:5])
        raise InvalidToolError(
            f"{prefix}no function tools to import, only built-in ones: {listed}{more}; {_WHY_BUILTIN}"
        )
    listed = ", ".join(f"{label} (type {kind!r:.80})" for label, kind in skipped[:5])
    tools = "tool" if len(skipped) == 1 else "tools"
    logger.warning("%sskipped %d built-in %s: %s%s; %s", prefix, len(skipped), tools, listed, more, _WHY_BUILTIN)


def is_builtin(value: dict[str, Any]) -> bool:
    """Whether a tool object is one a model provider runs itself (:data:`BUILTIN_TYPES`, or a dated type)."""
    kind = value.get("type")
    return isinstance(kind, str) and (kind in BUILTIN_TYPES or bool(_DATED_TYPE.fullmatch(kind)))


def _join(loc: str, key: str) -> str:
    return f"{loc}.{key}" if loc else key


def _collect(
    value: object, loc: str, out: list[tuple[Draft, str]], skipped: list[Skipped], namespace: dict[str, Any] | None
) -> None:
    """Append a ``(draft, location)`` for every tool found in ``value``, and each built-in tool to ``skipped``; a tool
    inside a Responses ``namespace`` has its name as provider unless it names its own (``x-toolstore``), and keeps
    the namespace in its spec (``NAMESPACE_KEY``, its ``tools`` left empty)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _collect(item, f"{loc}[{i}]", out, skipped, namespace)
        return
    if not isinstance(value, dict):
        raise InvalidToolError(f"{tool_label(loc, None)}: expected a JSON object, got {type_name(value)}")
    if "jsonrpc" in value:
        _collect(_jsonrpc_result(value, loc), _join(loc, "result"), out, skipped, namespace)
    elif is_openapi(value):
        try:
            out.extend(openapi_drafts(value, loc))
        except ValueError as exc:
            raise InvalidToolError(f"{' '.join(['OpenAPI document', loc]).strip()}: {exc}") from None
    elif value.get("type") == "namespace" and "tools" in value:  # Responses: tools the model calls as crm.<name>
        name = value.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidToolError(
                f"{tool_label(loc, None)}: a namespace's name must be a non-empty string, got {shown(name)}"
            )
        if not isinstance(value.get("description", ""), str):  # as x-toolstore.namespace, which re-imports it
            got = type_name(value["description"])
            raise InvalidToolError(
                f"{tool_label(loc, None)}: namespace {name!r:.80}'s description must be a string, got {got}"
            )
        if namespace is not None:  # which one the model calls its tools by would be a guess
            raise InvalidToolError(
                f"{tool_label(loc, None)}: namespace {name!r:.80} is inside namespace {namespace['name']!r:.80}; a "
                "Responses namespace holds function and custom tools, not namespaces"
            )
        _collect(_tools_list(value, loc), _join(loc, "tools"), out, skipped, value)
    elif "tools" in value and _is_wrapper(value, loc):
        _collect(_tools_list(value, loc), _join(loc, "tools"), out, skipped, namespace)
    elif is_builtin(value):
        skipped.append((tool_label(loc, value.get("name")), value["type"]))
    else:
        draft = _draft(value, loc)
        if namespace is not None:
            draft.provider = namespace["name"] if draft.provider is None else draft.provider
            draft.spec = {**draft.spec, NAMESPACE_KEY: {k: [] if k == "tools" else v for k, v in namespace.items()}}
        out.append((draft, loc))


def _tools_list(value: dict[str, Any], loc: str) -> list[Any]:
    tools = value["tools"]
    if not isinstance(tools, list):
        raise InvalidToolError(f"{_join(loc, 'tools')}: must be a list of tools, got {type_name(tools)}")
    return tools


#: Keys that make an object one tool definition rather than a wrapper of its ``tools``.
TOOL_KEYS = ("parameters", "input_schema", "inputSchema", "function")


def _is_wrapper(value: dict[str, Any], loc: str) -> bool:
    """Whether an object with ``tools`` is a wrapper of them: one without a ``name`` (a ``tools/list`` result), or
    a named one that defines no tool itself (an MCP server manifest, an OpenAI Assistant). A named object with
    ``tools`` and a tool's keys is ambiguous: an error, not a guess."""
    defining = [k for k in TOOL_KEYS if k in value]
    if value.get("type") in ("function", "custom"):
        defining.insert(0, "type")
    if "name" not in value or not defining:
        return True
    keys = ", ".join(repr(k) for k in defining)
    raise InvalidToolError(
        f"{tool_label(loc, value.get('name'))}: has both 'tools' and a tool's {keys}; give a tool or a "
        '{"tools": [...]} list, not both'
    )


def _jsonrpc_result(value: dict[str, Any], loc: str) -> object:
    where = loc or "JSON-RPC response"
    if "error" in value:
        raise InvalidToolError(f"{where}: JSON-RPC error response: {shown(value['error'], 200)}")
    result = value.get("result")
    if not isinstance(result, dict):
        raise InvalidToolError(f"{where}: JSON-RPC result must be a JSON object, got {type_name(result)}")
    return result


def _draft(d: dict[str, Any], loc: str) -> Draft:
    """Detect the shape of one tool object and extract its raw fields."""
    kind = d.get("type")
    if kind is not None and not isinstance(kind, str):
        raise InvalidToolError(f"{tool_label(loc, d.get('name'))}: type must be a string, got {shown(kind)}")
    if kind == "function" or (kind is None and isinstance(d.get("function"), dict)):
        return _openai_chat(d, loc, "function") if "function" in d else _plain(d, "parameters")
    if kind == "custom" and "input_schema" not in d:  # OpenAI's: free-form text input, no parameters schema
        draft = _openai_chat(d, loc, "custom") if "custom" in d else _plain(d, "parameters")
        _check_custom(draft, loc)
        return draft
    if kind == "custom" or "input_schema" in d:
        _check_kind(d, loc, "custom")
        return _plain(d, "input_schema")
    if "inputSchema" in d:
        _check_kind(d, loc, None)
        return _mcp(d)
    if kind is None and ("id" in d or "category" in d):
        return _bench_row(d)
    if kind is None and "name" in d:
        return _plain(d, "parameters")
    keys = ", ".join(shown(k, 40) for k in list(d)[:10]) + (f" and {len(d) - 10} more" if len(d) > 10 else "")
    if kind is not None:
        problem = f"unsupported tool type {kind!r:.80}"
    else:
        problem = "unrecognised tool shape"
    raise InvalidToolError(
        f"{tool_label(loc, d.get('name'))}: {problem} (keys seen: {keys or 'none'}); expected an OpenAI, "
        "Anthropic, MCP, OpenAPI or benchmark-row tool definition"
    )


def _check_kind(d: dict[str, Any], loc: str, allowed: str | None) -> None:
    kind = d.get("type")
    if kind is not None and kind != allowed:
        raise InvalidToolError(f"{tool_label(loc, d.get('name'))}: unsupported tool type {kind!r:.80}")


def _openai_chat(d: dict[str, Any], loc: str, key: str) -> Draft:
    """A Chat Completions tool: its definition nested under ``key`` (``function``, or ``custom`` for a custom tool)."""
    fn = d[key]
    if not isinstance(fn, dict):
        raise InvalidToolError(f"{tool_label(loc, None)}: {key} must be a JSON object, got {type_name(fn)}")
    if META_KEY in d and META_KEY in fn:
        raise InvalidToolError(f"{tool_label(loc, fn.get('name'))}: {META_KEY} given both outside and in {key}")
    draft = _plain(fn, "parameters")
    draft.meta = d.get(META_KEY, fn.get(META_KEY))
    draft.spec = d
    return draft


def _check_custom(draft: Draft, loc: str) -> None:
    """An OpenAI custom tool's ``format`` (``{"type": "text"}`` or a grammar), when given, is an object; it has no
    ``parameters`` but an empty schema (it takes free-form text: they would be stored, indexed, never rendered)."""
    fields = draft.spec.get("custom", draft.spec)
    if "format" in fields and not isinstance(fields["format"], dict):
        got = type_name(fields["format"])
        raise InvalidToolError(f"{tool_label(loc, draft.name)}: format must be a JSON object, got {got}")
    try:
        check_grammar(fields.get("format", {}), "format")
    except ValueError as exc:
        raise InvalidToolError(f"{tool_label(loc, draft.name)}: {exc}") from None
    given = draft.parameters
    if given is not None and not (isinstance(given, dict) and is_empty_object_schema(given)):
        raise InvalidToolError(
            f"{tool_label(loc, draft.name)}: a custom tool takes free-form text (held to its format), not parameters; "
            'a tool with a parameters schema is {"type": "function", ...}'
        )


def _plain(d: dict[str, Any], parameters_field: str) -> Draft:
    """OpenAI Responses, Anthropic and bare ``{"name", "description", "parameters"}`` tools."""
    return Draft(
        name=d.get("name"),
        description=d.get("description"),
        parameters=d.get(parameters_field),
        parameters_field=parameters_field,
        meta=d.get(META_KEY),
        spec=d,
    )


def _mcp(d: dict[str, Any]) -> Draft:
    title = d.get("title")
    annotations = d.get("annotations")
    if title is None and isinstance(annotations, dict):
        title = annotations.get("title")
    draft = _plain(d, "inputSchema")
    draft.title = title
    return draft


def _bench_row(d: dict[str, Any]) -> Draft:
    category = d.get("category")
    draft = _plain(d, "parameters")
    draft.id = d.get("id")
    draft.provider = d.get("provider")
    draft.categories = (category,) if isinstance(category, str) else () if category is None else category
    return draft
