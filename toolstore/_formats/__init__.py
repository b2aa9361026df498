"""Tool formats in and out: parse OpenAI, Anthropic, MCP, OpenAPI and benchmark definitions
into :class:`~toolstore._models.Tool`, and render tools back as OpenAI, Anthropic or MCP."""

from __future__ import annotations

from .build import META_KEY
from .custom import custom_input
from .files import load_tools_file
from .parse import parse_tools
from .render import (
    FORMATS,
    Format,
    export_catalog,
    http_endpoint,
    input_schema,
    metadata_block,
    render,
    to_anthropic,
    to_mcp,
    to_openai,
    tool_list,
)

__all__ = [
    "FORMATS",
    "http_endpoint",
    "META_KEY",
    "Format",
    "custom_input",
    "export_catalog",
    "input_schema",
    "load_tools_file",
    "metadata_block",
    "parse_tools",
    "render",
    "to_anthropic",
    "to_mcp",
    "to_openai",
    "tool_list",
]
