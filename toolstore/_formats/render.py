"""Render :class:`Tool`s as OpenAI, Anthropic or MCP tool definitions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, cast

from .._errors import InvalidInputError, InvalidTypeError
from .._input import flag, not_a_list, single
from .._models import Tool
from .._observe import logger
from .build import (
    META_KEY,
    default_id,
    namespace_conflicts,
    namespace_error,
    namespace_record,
    source_definition,
    source_format,
)
from .custom import CUSTOM_FORMATS, chat_format, custom_marker, custom_schema, is_custom, responses_format
from .names import offered_names

Format = Literal["openai", "openai-responses", "anthropic", "mcp"]
FORMATS: tuple[str, ...] = ("openai", "openai-responses", "anthropic", "mcp")


def input_schema(tool: Tool) -> dict[str, Any]:
    """The tool's parameters schema, or an empty object schema when it takes no arguments; for an OpenAI custom tool
    (:func:`~.custom.is_custom`) one required string property, ``input`` (:func:`~.custom.custom_schema`).

    The tool's own dict is returned (not a copy); do not mutate it.
    """
    return custom_schema(tool) if is_custom(tool) else _parameters(tool)


def _parameters(tool: Tool) -> dict[str, Any]:
    """The tool's parameters schema, or an empty object schema when it takes no arguments."""
    if tool.parameters is None:
        return {"type": "object", "properties": {}}
    return tool.parameters


#: The fields each format's definition is built from; any other key of a tool's source definition in the same
#: format (MCP ``annotations``, ``outputSchema``, ``_meta``, ``icons``; Anthropic ``cache_control``; OpenAI
#: ``strict``, ...) is carried through as it was.
_RENDERED = {
    "openai": ("name", "description", "parameters"),
    "openai-responses": ("type", "name", "description", "parameters"),
    "anthropic": ("name", "description", "input_schema"),
    "mcp": ("name", "title", "description", "inputSchema"),
    # OpenAI custom tools (free-form text input, an optional format: a grammar): Chat Completions ("custom" object
    # inside) and Responses
    "openai-custom": ("name", "description", "format"),
    "openai-responses-custom": ("type", "name", "description", "format"),
}


def http_endpoint(tool: Tool) -> dict[str, str] | None:
    """``{"method": "POST", "path": "/pets/{petId}"}`` for a tool imported from OpenAPI (or a definition that kept
    it in its ``x-toolstore.http``), else None."""
    spec = tool.spec if isinstance(tool.spec, dict) else {}
    if isinstance(spec.get("method"), str) and isinstance(spec.get("path"), str) and "operation" in spec:
        return {"method": spec["method"].upper(), "path": spec["path"]}
    http = _stored_meta(tool).get("http")
    if isinstance(http, dict) and isinstance(http.get("method"), str) and isinstance(http.get("path"), str):
        return {"method": http["method"].upper(), "path": http["path"]}
    return None


def _stored_meta(tool: Tool) -> dict[str, Any]:
    """The ``x-toolstore`` block of the tool's source definition (inside ``function`` or ``custom`` in the Chat
    Completions shapes), as imported; empty without one."""
    spec = tool.spec if isinstance(tool.spec, dict) else {}
    holder = next((spec[k] for k in ("function", "custom") if isinstance(spec.get(k), dict)), spec)
    meta = holder.get(META_KEY) if isinstance(holder, dict) else None
    return meta if isinstance(meta, dict) else {}


def _faithful(
    tool: Tool, fmt: str, rendered: dict[str, Any], schema_key: str | None, source_fmt: str | None
) -> dict[str, Any]:
    """``rendered`` laid out as the tool's source definition in ``fmt`` was (``source_fmt``: the tool's
    :func:`source_format`): its key order, its extra keys, and its own spelling of an empty schema. Unchanged fields
    come back exactly as imported."""
    source = source_definition(tool, fmt, source_fmt)
    if source is None:
        return rendered
    if schema_key and tool.parameters is None and isinstance(source.get(schema_key), dict):
        rendered[schema_key] = source[schema_key]
    out: dict[str, Any] = {}
    for key, value in source.items():
        if key in _RENDERED[fmt]:
            if key in rendered:
                out[key] = rendered[key]
        elif not key.startswith(META_KEY):
            out[key] = value
    out.update({k: v for k, v in rendered.items() if k not in out})
    return out


def _openai_strict(tool: Tool, fmt: str | None) -> bool | None:
    """The ``strict`` flag of the tool's OpenAI source definition (either shape; ``fmt``: its :func:`source_format`),
    or of the OpenAI tool a definition in another format came from (its ``x-toolstore.strict``); None when it set
    none."""
    source = source_definition(tool, fmt, fmt) if fmt in ("openai", "openai-responses") else None
    strict = source.get("strict") if source is not None else None
    if not isinstance(strict, bool):  # an OpenAI definition's own strict wins (build refuses one the block contradicts)
        strict = _stored_meta(tool).get("strict")
    return strict if isinstance(strict, bool) else None


def _strict_left_to_api(tool: Tool, fmt: str | None) -> bool:
    """Whether the tool is a Responses tool that left ``strict`` to the API's default: imported in that shape without a
    boolean ``strict`` of its own, or from a definition another format gave it (its ``x-toolstore.strict`` null), and
    no ``strict`` set elsewhere (:func:`_openai_strict`; ``fmt``: its :func:`source_format`)."""
    if _openai_strict(tool, fmt) is not None:
        return False
    stored = _stored_meta(tool)
    return fmt == "openai-responses" or ("strict" in stored and stored["strict"] is None)


def metadata_block(
    tool: Tool,
    *,
    include_title: bool = True,
    mark_custom: bool = False,
    mark_namespace: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """The ``x-toolstore`` block holding every field the target format cannot carry itself.

    Only non-default values are written; ``id`` only when it differs from ``provider.name``
    (or ``name`` without a provider), ``title`` only when ``include_title``; with ``mark_custom`` (a format without
    custom tools or ``strict``: Anthropic, MCP) an OpenAI custom tool's ``custom`` marker (its format), so its
    definition parses back as the custom tool rather than as a tool of one ``input`` property, and an OpenAI tool's
    ``strict`` when its source set one (a schema written for strict mode is exported back strict); in every format
    but Responses (``mark_custom`` or ``mark_namespace``) ``"strict": null`` for a Responses tool that left ``strict``
    to the API (:func:`_strict_left_to_api`), so a Responses export gives it back without one again; with
    ``mark_namespace`` (a format without namespaces: Chat Completions, Anthropic, MCP) the Responses ``namespace`` a
    tool was imported from (the namespace object without its tools: ``build.namespace_record``), so a Responses export
    puts it back inside it. ``name``: the name the definition gives the tool; when another than its own (two tools of
    the catalog share it: :func:`tool_list`), its own is kept as ``name``, which a re-import gives it back.
    """
    meta: dict[str, Any] = {}
    if name is not None and name != tool.name:
        meta["name"] = tool.name
    if tool.id != default_id(tool.provider, tool.name):
        meta["id"] = tool.id
    if tool.provider is not None:
        meta["provider"] = tool.provider
    if include_title and tool.title is not None:
        meta["title"] = tool.title
    for key in ("categories", "tags", "keywords", "examples"):
        values = getattr(tool, key)
        if values:
            meta[key] = list(values)
    for key in ("expansion", "avoid_when"):
        if getattr(tool, key):
            meta[key] = getattr(tool, key)
    if tool.always_on:
        meta["always_on"] = True
    http = http_endpoint(tool)
    if http is not None:
        meta["http"] = http
    if mark_custom and is_custom(tool):
        meta["custom"] = custom_marker(tool)
    source = source_format(tool.spec)
    strict = _openai_strict(tool, source) if mark_custom else None
    if strict is not None:
        meta["strict"] = strict
    elif (mark_custom or mark_namespace) and _strict_left_to_api(tool, source):
        meta["strict"] = None
    namespace = namespace_record(tool) if mark_namespace else None
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def to_openai(
    tool: Tool,
    *,
    shape: Literal["chat", "responses"] = "chat",
    with_metadata: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """An OpenAI function tool: Chat Completions ``{"type", "function": {...}}`` or Responses shape.

    ``with_metadata`` adds an ``x-toolstore`` block (inside ``function`` for the chat shape) so the
    definition parses back to the same Tool; the API itself does not accept that key. ``name`` replaces the
    tool's name (the model-facing name ``RouteResult.definitions`` gives it). A tool imported from this shape keeps
    its other keys (``strict``, ...) and their order.

    The Responses shape carries ``"strict": false``: the openai SDK's ``FunctionToolParam`` requires the key
    (``Required[Optional[bool]]``), and strict mode refuses most schemas not written for it. A tool imported in
    Responses shape is the exception: it comes back with exactly the keys it had, so without ``strict`` when its
    source had none (as does one exported from it in another format with metadata, ``x-toolstore.strict`` null, and
    imported again); a faithful round trip gives the caller the definition they wrote, read by the API as it read
    that one (we do not add a key the source left to the API's default). A ``strict`` the tool's source set in
    the other OpenAI shape is kept in this one (a schema written for strict mode stays strict).

    A custom tool (free-form text input, imported from either shape) is rendered as a custom tool of ``shape``
    (:func:`_openai_custom`), its format (a grammar) written as that shape writes it.
    """
    tool, with_metadata = a_tool(tool), flag(with_metadata, "with_metadata")
    source = source_format(tool.spec)
    if source in CUSTOM_FORMATS:
        return _openai_custom(tool, source, shape=shape, with_metadata=with_metadata, name=name)
    fn: dict[str, Any] = {"name": name or tool.name}
    if tool.description:
        fn["description"] = tool.description
    fn["parameters"] = _parameters(tool)
    strict = _openai_strict(tool, source)
    if shape == "responses":
        rendered = {"type": "function", **fn}
        if not _strict_left_to_api(tool, source):
            rendered["strict"] = False if strict is None else strict
        definition = _faithful(tool, "openai-responses", rendered, "parameters", source)
        target = definition
    elif shape == "chat":
        if strict is not None:
            fn["strict"] = strict
        fn = _faithful(tool, "openai", fn, "parameters", source)
        definition = {"type": "function", "function": fn}
        target = fn
    else:
        raise InvalidInputError(f"shape must be 'chat' or 'responses', got {shape!r}")
    if with_metadata:
        _add_metadata(target, tool, include_title=True, mark_namespace=shape == "chat", name=name)
    return definition


def _openai_custom(tool: Tool, source_fmt: str, *, shape: str, with_metadata: bool, name: str | None) -> dict[str, Any]:
    """An OpenAI custom tool (free-form text input) in either shape: Chat Completions ``{"type": "custom", "custom":
    {"name", "description"?, "format"?}}``, its grammar ``{"type": "grammar", "grammar": {"definition", "syntax"}}``,
    or Responses ``{"type": "custom", "name", "description"?, "format"?}``, its grammar flat. A tool imported in the
    same shape keeps its other keys (``defer_loading``, ...) and their order (``source_fmt``: its source format)."""
    source = source_definition(tool, source_fmt, source_fmt) or {}
    fields: dict[str, Any] = {"name": name or tool.name}
    if tool.description:
        fields["description"] = tool.description
    if "format" in source:
        fields["format"] = chat_format(source["format"]) if shape == "chat" else responses_format(source["format"])
    if shape == "responses":
        definition = _faithful(tool, "openai-responses-custom", {"type": "custom", **fields}, None, source_fmt)
        target = definition
    elif shape == "chat":
        target = _faithful(tool, "openai-custom", fields, None, source_fmt)
        definition = {"type": "custom", "custom": target}
    else:
        raise InvalidInputError(f"shape must be 'chat' or 'responses', got {shape!r}")
    if with_metadata:
        _add_metadata(target, tool, include_title=True, mark_namespace=shape == "chat", name=name)
    return definition


def to_anthropic(tool: Tool, *, with_metadata: bool = False, name: str | None = None) -> dict[str, Any]:
    """An Anthropic Messages API tool ``{"name", "description", "input_schema"}``.

    ``with_metadata`` adds an ``x-toolstore`` block (not accepted by the API itself); ``name`` as for
    :func:`to_openai`. A tool imported from this shape keeps its other keys (``cache_control``, ...).
    """
    tool, with_metadata = a_tool(tool), flag(with_metadata, "with_metadata")
    definition: dict[str, Any] = {"name": name or tool.name}
    if tool.description:
        definition["description"] = tool.description
    definition["input_schema"] = input_schema(tool)
    definition = _faithful(tool, "anthropic", definition, "input_schema", source_format(tool.spec))
    if with_metadata:
        _add_metadata(definition, tool, include_title=True, mark_custom=True, mark_namespace=True, name=name)
    return definition


def to_mcp(tool: Tool, *, with_metadata: bool = False, name: str | None = None) -> dict[str, Any]:
    """An MCP tool ``{"name", "title"?, "description"?, "inputSchema"}``.

    ``with_metadata`` adds an ``x-toolstore`` block (clients ignore unknown keys); ``name`` as for
    :func:`to_openai`. A tool imported from MCP keeps ``annotations``, ``outputSchema``, ``_meta``, ``icons``
    and any other key, in their order.
    """
    tool, with_metadata = a_tool(tool), flag(with_metadata, "with_metadata")
    definition: dict[str, Any] = {"name": name or tool.name}
    if tool.title is not None:
        definition["title"] = tool.title
    if tool.description:
        definition["description"] = tool.description
    definition["inputSchema"] = input_schema(tool)
    definition = _faithful(tool, "mcp", definition, "inputSchema", source_format(tool.spec))
    if with_metadata:
        _add_metadata(definition, tool, include_title=False, mark_custom=True, mark_namespace=True, name=name)
    return definition


def a_tool(value: object, what: str = "tool") -> Tool:
    """``value`` when it is a :class:`Tool`; else InvalidTypeError naming ``what`` and the type given."""
    if not isinstance(value, Tool):
        raise InvalidTypeError(f"{what} must be a Tool, got {type(value).__name__}")
    return value


def tool_items(values: object) -> list[Tool]:
    """The tools given to render or export, listed (any iterable, read once); InvalidTypeError for a single value (a
    Tool, a str, a mapping, None) or an item that is no Tool, naming its place."""
    if single(values):
        raise InvalidTypeError(f"tools must be a list of Tools, {not_a_list(values)}")
    return [a_tool(item, f"tools[{i}]") for i, item in enumerate(cast(Iterable[object], values))]


def render(
    tools: Iterable[Tool], fmt: Format, *, with_metadata: bool = False, names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Every tool rendered in ``fmt`` (``openai``, ``openai-responses``, ``anthropic``, ``mcp``); ``names``, when
    given, are the names the definitions carry (one per tool, e.g. from :func:`.names.model_names`)."""
    tools = tool_items(tools)
    if names is not None and single(names):
        raise InvalidTypeError(f"render: names must be a list of strings (one per tool), {not_a_list(names)}")
    if names is not None and len(names) != len(tools):
        raise InvalidInputError(f"render: {len(names)} names for {len(tools)} tools")
    given: list[str | None] = list(names) if names is not None else [None] * len(tools)
    if fmt == "openai":
        return [to_openai(t, with_metadata=with_metadata, name=n) for t, n in zip(tools, given)]
    if fmt == "openai-responses":
        return [to_openai(t, shape="responses", with_metadata=with_metadata, name=n) for t, n in zip(tools, given)]
    if fmt == "anthropic":
        return [to_anthropic(t, with_metadata=with_metadata, name=n) for t, n in zip(tools, given)]
    if fmt == "mcp":
        return [to_mcp(t, with_metadata=with_metadata, name=n) for t, n in zip(tools, given)]
    raise InvalidInputError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def export_catalog(tools: Iterable[Tool], fmt: Format, *, with_metadata: bool = False) -> dict[str, Any]:
    """``{"tools": [...]}``: an MCP ``tools/list`` result, or the ``tools`` field of an OpenAI or
    Anthropic request (:func:`tool_list`: named as ``RouteResult.definitions`` names them). :func:`parse_tools` reads
    it back."""
    return {"tools": tool_list(tools, fmt, with_metadata=with_metadata)}


def tool_list(tools: Iterable[Tool], fmt: Format, *, with_metadata: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` of a request in ``fmt``, as ``export_catalog`` and ``RouteResult.definitions`` give them: every
    tool rendered (:func:`render`) under the name it is offered by, unique among ``tools`` (its own unless another has
    it: :func:`.names.offered_names`; with metadata its own name is kept, ``x-toolstore.name``), and in the Responses
    format those imported from a namespace inside it again (:func:`_namespaced`)."""
    tools = tool_items(tools)
    definitions = render(tools, fmt, with_metadata=with_metadata, names=offered_names(tools, fmt))
    return _namespaced(tools, definitions) if fmt == "openai-responses" else definitions


def _namespaced(tools: Sequence[Tool], definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses ``definitions`` with those of the tools imported from a namespace inside it, as it was imported
    (its description and keys, ``NAMESPACE_KEY``), where its first tool is (the namespace holds only the ``tools``
    given, in their order); the other definitions as they are. Two tools whose namespaces of one name differ (which
    parse and a write refuse: a catalog written before) are in the first one's, with a warning on the ``toolstore``
    logger naming both: a route's definitions must not fail on what its catalog was let hold."""
    records = [namespace_record(tool) for tool in tools]
    for name, difference, first, second in namespace_conflicts(zip((t.id for t in tools), records)):
        # tools written before a write refused it (build.namespace_error)
        problem = namespace_error(name, difference, f"tool {first!r}", f"tool {second!r}")
        logger.warning("%s; both are given in the first one's", problem)
    out: list[dict[str, Any]] = []
    namespaces: dict[str, dict[str, Any]] = {}
    for record, definition in zip(records, definitions):
        if record is None:
            out.append(definition)
            continue
        if record["name"] not in namespaces:
            namespaces[record["name"]] = {**record, "tools": []}
            out.append(namespaces[record["name"]])
        namespaces[record["name"]]["tools"].append(definition)
    return out


def _add_metadata(
    target: dict[str, Any],
    tool: Tool,
    *,
    include_title: bool,
    mark_custom: bool = False,
    mark_namespace: bool = False,
    name: str | None = None,
) -> None:
    meta = metadata_block(
        tool, include_title=include_title, mark_custom=mark_custom, mark_namespace=mark_namespace, name=name
    )
    if meta:
        target[META_KEY] = meta
