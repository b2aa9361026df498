"""Turn one format-neutral draft into a validated :class:`Tool`, and read a tool's source format off its spec.

Every format adapter extracts a :class:`Draft` (raw, unchecked values) and hands it to
:func:`build_tool`, so validation, ``x-toolstore`` metadata and id namespacing live in one place.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .._errors import InvalidToolError
from .._input import MAX_NAME_CHARS
from .._models import Tool
from .checks import (
    check_grammar,
    check_name,
    check_optional_str,
    check_parameters,
    check_str_list,
    find_unstorable,
    shown,
    type_name,
)

META_KEY = "x-toolstore"
#: Where a tool imported from a Responses ``namespace`` keeps it, inside its ``spec``: the namespace object with its
#: ``tools`` left empty (its description, which nothing else holds, and key order), for ``export_catalog`` to rebuild.
NAMESPACE_KEY = "x-toolstore-namespace"
#: The one string property an OpenAI custom tool (free-form text input) takes in the formats without custom tools
#: (Anthropic, MCP): the model passes its text there (``custom.custom_input`` gives it back as the text).
CUSTOM_INPUT = "input"
_META_LIST_KEYS = ("categories", "tags", "keywords", "examples")
_META_STR_KEYS = ("title", "avoid_when", "expansion", "provider", "id", "name")
META_KEYS = frozenset(_META_LIST_KEYS + _META_STR_KEYS + ("always_on", "http", "custom", "namespace", "strict"))


@dataclass
class Draft:
    """Raw values read from one tool definition, before any validation.

    ``provider`` is a per-tool provider written in the definition itself (a benchmark row);
    ``doc_provider`` is a document-wide fallback (an OpenAPI ``info.title``) that the caller's
    ``provider`` argument overrides.
    """

    name: object
    spec: dict[str, Any]
    description: object = ""
    parameters: object = None
    title: object = None
    categories: object = ()
    id: object = None
    provider: object = None
    doc_provider: str | None = None
    meta: object = None
    parameters_field: str = "parameters"


def tool_label(loc: str, name: object) -> str:
    """``"tool [3] 'send_email'"``: where a tool sits and its name when it has a usable one."""
    parts = ["tool"]
    if loc:
        parts.append(loc)
    if isinstance(name, str) and name.strip() and "\x00" not in name:  # a name past the limit: its head
        parts.append(repr(name) if len(name) <= MAX_NAME_CHARS else f"{name[:MAX_NAME_CHARS]!r}...")
    return " ".join(parts)


def check_meta(value: object) -> dict[str, Any]:
    """Validate an ``x-toolstore`` block; return its values converted to Tool field types."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{META_KEY} must be a JSON object, got {type_name(value)}")
    unknown = sorted(set(value) - META_KEYS)
    if unknown:
        known = ", ".join(sorted(META_KEYS))
        listed = ", ".join(f"{key!r:.80}" for key in unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise ValueError(f"{META_KEY}: unknown key(s) {listed} (known: {known})")
    meta: dict[str, Any] = {}
    for key, item in value.items():
        if key in _META_LIST_KEYS:
            meta[key] = check_str_list(item, f"{META_KEY}.{key}")
        elif key == "always_on":
            meta[key] = _check_bool(item, key)
        elif key == "strict":  # an OpenAI tool's, exported to a format without it; null: left to the Responses API
            meta[key] = None if item is None else _check_bool(item, key, ", or null (left to the Responses API)")
        elif key == "http":  # an OpenAPI operation's method and path: kept in the spec, not a Tool field
            if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("method", "path"))):
                raise ValueError(f'{META_KEY}.http must be {{"method": str, "path": str}}, got {item!r:.80}')
        elif key == "custom":  # an OpenAI custom tool's Anthropic or MCP definition: _custom_spec
            meta[key] = _check_custom(item)
        elif key == "namespace":  # the Responses namespace of a tool exported outside it: NAMESPACE_KEY
            meta[key] = _check_namespace(item)
        elif key == "title" and item is None:
            meta[key] = None
        else:
            if not isinstance(item, str):
                raise ValueError(f"{META_KEY}.{key} must be a string, got {type_name(item)}")
            if key in ("id", "provider", "name") and not item.strip():
                raise ValueError(f"{META_KEY}.{key} must not be empty")
            meta[key] = item
    return meta


def _check_bool(value: object, key: str, or_else: str = "") -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{META_KEY}.{key} must be true or false{or_else}, got {type_name(value)}")
    return value


def _check_custom(value: object) -> dict[str, Any]:
    """An ``x-toolstore.custom`` marker: an object holding the custom tool's ``format`` (an object) if it has one."""
    if not isinstance(value, dict):
        raise ValueError(
            f'{META_KEY}.custom must be a JSON object ({{"format": {{...}}}} or {{}}), got {type_name(value)}'
        )
    unknown = sorted(set(value) - {"format"})
    if unknown:
        raise ValueError(f"{META_KEY}.custom: unknown key(s) {', '.join(map(repr, unknown))} (known: format)")
    if "format" in value and not isinstance(value["format"], dict):
        raise ValueError(f"{META_KEY}.custom.format must be a JSON object, got {type_name(value['format'])}")
    check_grammar(value.get("format", {}), f"{META_KEY}.custom.format")
    return value


def _check_namespace(value: object) -> dict[str, Any]:
    """An ``x-toolstore.namespace``: the Responses namespace a tool was imported from, as a definition outside it
    carries it (``render.metadata_block``): the namespace object without its tools (``"tools": []`` or none), with a
    non-empty string ``name``; returned as the tool's ``NAMESPACE_KEY`` record."""
    where = f"{META_KEY}.namespace"
    if not isinstance(value, dict):
        raise ValueError(f'{where} must be a JSON object ({{"name": ..., "description": ...}}), got {type_name(value)}')
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}.name must be a non-empty string, got {name!r:.80}")
    if value.get("type", "namespace") != "namespace":
        raise ValueError(f"{where}.type must be 'namespace', got {value['type']!r:.80}")
    if not isinstance(value.get("description", ""), str):
        raise ValueError(f"{where}.description must be a string, got {type_name(value['description'])}")
    if value.get("tools", []) != []:
        raise ValueError(f"{where}.tools must be empty (the tool itself is the definition), got {value['tools']!r:.80}")
    record = value if "type" in value else {"type": "namespace", **value}
    return record if "tools" in record else {**record, "tools": []}


def namespace_record(tool: Tool) -> dict[str, Any] | None:
    """The Responses namespace ``tool`` was imported from (its ``NAMESPACE_KEY`` record in ``spec``, with a string
    ``name``): a Responses export puts the tool inside it again, and a model calls the tool in it; None: none."""
    record = tool.spec.get(NAMESPACE_KEY) if isinstance(tool.spec, dict) else None
    return record if isinstance(record, dict) and isinstance(record.get("name"), str) else None


def namespace_conflict(first: dict[str, Any], second: dict[str, Any]) -> str | None:
    """How two Responses namespace records of one name (:func:`namespace_record`) differ: ``"described 'A' and 'B'"``,
    or the keys they differ in; None when they are the same (their key order aside), one namespace."""
    if first == second:
        return None
    if first.get("description", "") != second.get("description", ""):
        return f"described {shown(first.get('description', ''))} and {shown(second.get('description', ''))}"
    keys = sorted(key for key in {*first, *second} if first.get(key) != second.get(key))
    return f"differing in {', '.join(shown(key, 40) for key in keys)}"


L = TypeVar("L", bound=Hashable)


def namespace_conflicts(
    labelled: Iterable[tuple[L, dict[str, Any] | None]],
) -> Iterator[tuple[str, str, L, L]]:
    """Each record (:func:`namespace_record`, None: no namespace) that differs from the first of its name among
    ``labelled``, as its name, how they differ (:func:`namespace_conflict`) and the two labels, first the earlier:
    the one rule of an input, a write and a rendering that meet a namespace given twice."""
    seen: dict[str, tuple[L, dict[str, Any]]] = {}
    for label, record in labelled:
        if record is None:
            continue
        first_label, first = seen.setdefault(record["name"], (label, record))
        difference = namespace_conflict(first, record)
        if difference is not None:
            yield record["name"], difference, first_label, label


def namespace_error(name: str, difference: str, first: str, second: str) -> str:
    """The error for a Responses namespace given twice, differently (``difference``: :func:`namespace_conflict`), by
    the tools labelled ``first`` and ``second``: a Responses export gives a namespace once, so one would be lost."""
    return (
        f"namespace {shown(name)} is given twice, {difference}: {first} and {second}; a namespace's tools share its "
        "one definition (a Responses export gives it once): give it the same description and keys everywhere"
    )


def source_format(spec: dict[str, Any] | None) -> str | None:
    """The format a tool was imported from, read off its source definition (None: another or none)."""
    if not isinstance(spec, dict):
        return None
    if "inputSchema" in spec:
        return "mcp"
    if "input_schema" in spec:
        return "anthropic"
    if spec.get("type") == "function" and isinstance(spec.get("function"), dict):
        return "openai"
    if spec.get("type") == "function" and "name" in spec:
        return "openai-responses"
    if spec.get("type") == "custom" and isinstance(spec.get("custom"), dict):
        return "openai-custom"
    if spec.get("type") == "custom" and "name" in spec:
        return "openai-responses-custom"
    return None


def source_definition(tool: Tool, fmt: str | None, source: str | None) -> dict[str, Any] | None:
    """The tool's source definition when it is in ``fmt`` (the ``function`` or ``custom`` object of the Chat
    Completions shapes); ``source`` is the tool's :func:`source_format`."""
    if fmt is None or source != fmt or tool.spec is None:
        return None
    return tool.spec["function"] if fmt == "openai" else tool.spec["custom"] if fmt == "openai-custom" else tool.spec


def default_id(provider: str | None, name: str) -> str:
    """The id a tool gets without an explicit one: ``provider.name``, or ``name``."""
    return f"{provider}.{name}" if provider else name


def build_tool(draft: Draft, loc: str, provider: str | None) -> Tool:
    """Validate ``draft`` and build the Tool; errors are :class:`InvalidToolError` naming the tool.

    ``provider`` is the caller's default provider (see :func:`toolstore._formats.parse_tools`).
    """
    try:
        return _build(draft, provider)
    except ValueError as exc:
        raise InvalidToolError(f"{tool_label(loc, draft.name)}: {exc}") from None


def _build(draft: Draft, provider_arg: str | None) -> Tool:
    fields = {"name": draft.name, "description": draft.description, "title": draft.title}
    fields.update({draft.parameters_field: draft.parameters, META_KEY: draft.meta, "spec": draft.spec})
    problem = find_unstorable(fields)
    if problem:
        raise ValueError(problem)
    name = check_name(draft.name)
    meta = check_meta(draft.meta)
    if "name" in meta:  # the tool's own name, which an export offered it under another (render.metadata_block)
        try:
            name = check_name(meta["name"])
        except ValueError as exc:
            raise ValueError(f"{META_KEY}.{exc}") from None
    description = check_optional_str(draft.description, "description") or ""
    parameters = check_parameters(draft.parameters, draft.parameters_field)
    title = meta["title"] if "title" in meta else check_optional_str(draft.title, "title")
    row_provider = check_optional_str(draft.provider, "provider") or None
    if row_provider is None and "namespace" in meta:  # as a tool found inside the namespace: parse._collect
        row_provider = meta["namespace"]["name"]
    provider = meta.get("provider") or row_provider or provider_arg or draft.doc_provider
    explicit_id = meta.get("id") or check_optional_str(draft.id, "id")
    if explicit_id is not None and not explicit_id.strip():
        raise ValueError("id must not be empty")
    if provider and "\x00" in provider:
        raise ValueError("NUL byte in provider")
    categories = meta.get("categories", check_str_list(draft.categories, "categories"))
    spec = draft.spec
    if "custom" in meta:
        spec, parameters = _custom_spec(draft, name, description, parameters, meta["custom"]), None
    _check_strict(draft.spec, meta)
    record = _namespace(draft.spec.get(NAMESPACE_KEY), meta.get("namespace"))
    if record is not None:
        spec = {**spec, NAMESPACE_KEY: record}
    return Tool(
        id=explicit_id or default_id(provider, name),
        name=name,
        description=description,
        title=title,
        provider=provider,
        parameters=parameters,
        categories=categories,
        tags=meta.get("tags", ()),
        keywords=meta.get("keywords", ()),
        examples=meta.get("examples", ()),
        expansion=meta.get("expansion", ""),
        avoid_when=meta.get("avoid_when", ""),
        always_on=meta.get("always_on", False),
        spec=copy.deepcopy(spec),
    )


def _custom_spec(
    draft: Draft, name: str, description: str, parameters: dict[str, Any] | None, custom: dict[str, Any]
) -> dict[str, Any]:
    """The OpenAI custom tool (in the Responses shape) that an Anthropic or MCP definition marked ``x-toolstore.custom``
    (``custom``, what ``render.metadata_block`` writes for one) stands for: its one property, :data:`CUSTOM_INPUT`, is
    the tool's text, and the marker holds its ``format`` (a namespace it is in: ``_build`` adds it)."""
    field = draft.parameters_field
    if field not in ("input_schema", "inputSchema"):  # an OpenAI definition, a bare one or a benchmark row
        raise ValueError(
            f"{META_KEY}.custom marks an OpenAI custom tool's Anthropic or MCP definition; an OpenAI definition is "
            'a custom tool itself ({"type": "custom", ...})'
        )
    properties = list((parameters or {}).get("properties") or {})
    if properties != [CUSTOM_INPUT]:
        got = ", ".join(map(repr, properties)) or "none"
        raise ValueError(f"{META_KEY}.custom marks a custom tool, whose {field} has one property, 'input'; got {got}")
    spec: dict[str, Any] = {"type": "custom", "name": name, **({"description": description} if description else {})}
    spec.update(custom)
    return spec


def _check_strict(spec: dict[str, Any], meta: dict[str, Any]) -> None:
    """An OpenAI function definition's own ``strict`` is true, false or null (the APIs take no other), and an
    ``x-toolstore.strict`` (an OpenAI tool's ``strict``, carried by a definition in a format without it; null: a
    Responses tool's that left it to the API) on an OpenAI definition whose own ``strict`` says otherwise is an error:
    which one holds would be a guess."""
    fmt = source_format(spec)
    own = spec.get("function") if fmt == "openai" else spec if fmt == "openai-responses" else None
    if isinstance(own, dict) and own.get("strict") is not None and not isinstance(own["strict"], bool):
        raise ValueError(f"strict must be true, false or null, got {type_name(own['strict'])}")
    if "strict" not in meta:
        return
    strict = meta["strict"]
    if isinstance(own, dict) and isinstance(own.get("strict"), bool) and own["strict"] != strict:
        said = "null (left to the API's default)" if strict is None else strict
        raise ValueError(f"{META_KEY}.strict is {said}, but the definition's own strict is {own['strict']}")


def _namespace(found: object, meta: dict[str, Any] | None) -> object:
    """The Responses namespace a tool is in: the one its definition was found in (``found``, by ``parse._collect``),
    else the one its ``x-toolstore.namespace`` names (``meta``); naming another than it was found in is an error."""
    if found is not None and meta is not None and isinstance(found, dict) and found.get("name") != meta["name"]:
        raise ValueError(
            f"{META_KEY}.namespace names {meta['name']!r:.80}, but the definition is inside namespace "
            f"{found.get('name')!r:.80}"
        )
    return found if found is not None else meta
