"""Render :class:`Tool`s as OpenAI, Anthropic or MCP tool definitions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from .._errors import InvalidInputError
from .._models import Tool
from .build import META_KEY, default_id

Format = Literal["openai", "openai-responses", "anthropic", "mcp"]
FORMATS: tuple[str, ...] = ("openai", "openai-responses", "anthropic", "mcp")


def input_schema(tool: Tool) -> dict[str, Any]:
    """The tool's parameters schema, or an empty object schema when it takes no arguments.

    The tool's own dict is returned (not a copy); do not mutate it.
    """
    if tool.parameters is None:
        return {"type": "object", "properties": {}}
    return tool.parameters


def metadata_block(tool: Tool, *, include_title: bool = True) -> dict[str, Any]:
    """The ``x-toolstore`` block holding every field the target format cannot carry itself.

    Only non-default values are written; ``id`` only when it differs from ``provider.name``
    (or ``name`` without a provider), ``title`` only when ``include_title``.
    """
    meta: dict[str, Any] = {}
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
    return meta


def to_openai(
    tool: Tool, *, shape: Literal["chat", "responses"] = "chat", with_metadata: bool = False
) -> dict[str, Any]:
    """An OpenAI function tool: Chat Completions ``{"type", "function": {...}}`` or Responses shape.

    ``with_metadata`` adds an ``x-toolstore`` block (inside ``function`` for the chat shape) so the
    definition parses back to the same Tool; the API itself does not accept that key.
    """
    fn: dict[str, Any] = {"name": tool.name}
    if tool.description:
        fn["description"] = tool.description
    fn["parameters"] = input_schema(tool)
    if shape == "responses":
        definition = {"type": "function", **fn, "strict": False}
        target = definition
    elif shape == "chat":
        definition = {"type": "function", "function": fn}
        target = fn
    else:
        raise InvalidInputError(f"shape must be 'chat' or 'responses', got {shape!r}")
    if with_metadata:
        _add_metadata(target, tool, include_title=True)
    return definition


def to_anthropic(tool: Tool, *, with_metadata: bool = False) -> dict[str, Any]:
    """An Anthropic Messages API tool ``{"name", "description", "input_schema"}``.

    ``with_metadata`` adds an ``x-toolstore`` block (not accepted by the API itself).
    """
    definition: dict[str, Any] = {"name": tool.name}
    if tool.description:
        definition["description"] = tool.description
    definition["input_schema"] = input_schema(tool)
    if with_metadata:
        _add_metadata(definition, tool, include_title=True)
    return definition


def to_mcp(tool: Tool, *, with_metadata: bool = False) -> dict[str, Any]:
    """An MCP tool ``{"name", "title"?, "description"?, "inputSchema"}``.

    ``with_metadata`` adds an ``x-toolstore`` block (clients ignore unknown keys).
    """
    definition: dict[str, Any] = {"name": tool.name}
    if tool.title is not None:
        definition["title"] = tool.title
    if tool.description:
        definition["description"] = tool.description
    definition["inputSchema"] = input_schema(tool)
    if with_metadata:
        _add_metadata(definition, tool, include_title=False)
    return definition


def render(tools: Iterable[Tool], fmt: Format, *, with_metadata: bool = False) -> list[dict[str, Any]]:
    """Every tool rendered in ``fmt`` (``openai``, ``openai-responses``, ``anthropic``, ``mcp``)."""
    if fmt == "openai":
        return [to_openai(t, with_metadata=with_metadata) for t in tools]
    if fmt == "openai-responses":
        return [to_openai(t, shape="responses", with_metadata=with_metadata) for t in tools]
    if fmt == "anthropic":
        return [to_anthropic(t, with_metadata=with_metadata) for t in tools]
    if fmt == "mcp":
        return [to_mcp(t, with_metadata=with_metadata) for t in tools]
    raise InvalidInputError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def export_catalog(tools: Iterable[Tool], fmt: Format, *, with_metadata: bool = False) -> dict[str, Any]:
    """``{"tools": [...]}``: an MCP ``tools/list`` result, or the ``tools`` field of an OpenAI or
    Anthropic request. :func:`parse_tools` reads it back."""
    return {"tools": render(tools, fmt, with_metadata=with_metadata)}


def _add_metadata(target: dict[str, Any], tool: Tool, *, include_title: bool) -> None:
    meta = metadata_block(tool, include_title=include_title)
    if meta:
        target[META_KEY] = meta
