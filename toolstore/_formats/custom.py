"""OpenAI custom tools (free-form text input, optionally held to a grammar by their ``format``): what makes a tool
one, the text input the formats without custom tools give it, and its format as each OpenAI shape writes it."""

from __future__ import annotations

from typing import Any

from .._models import Tool
from .build import CUSTOM_INPUT, source_definition, source_format

#: The source formats of OpenAI custom tools.
CUSTOM_FORMATS = ("openai-custom", "openai-responses-custom")


def is_custom(tool: Tool) -> bool:
    """Whether ``tool`` is an OpenAI custom tool (free-form text input), imported in either OpenAI shape."""
    return source_format(tool.spec) in CUSTOM_FORMATS


def custom_schema(tool: Tool) -> dict[str, Any]:
    """A custom tool's input in the formats without custom tools: one required string property,
    :data:`CUSTOM_INPUT`, described by the tool's grammar if any."""
    return {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": _custom_text(tool)}},
        "required": [CUSTOM_INPUT],
    }


def custom_input(tool: Tool, arguments: dict[str, Any] | str) -> dict[str, Any] | str:
    """A call's arguments as the OpenAI formats give a custom tool's: its text, read from the one property
    (:data:`CUSTOM_INPUT`) the other formats render it with; other arguments as they are."""
    if is_custom(tool) and isinstance(arguments, dict) and list(arguments) == [CUSTOM_INPUT]:
        text = arguments[CUSTOM_INPUT]
        return text if isinstance(text, str) else arguments
    return arguments


def custom_marker(tool: Tool) -> dict[str, Any]:
    """The ``x-toolstore.custom`` marker of a custom tool's Anthropic or MCP definition, which parses back as the
    custom tool (``build._custom_spec``): its ``format`` as the Responses API writes it, if it has one."""
    fmt = _format(tool)
    return {} if fmt is None else {"format": fmt}


def _format(tool: Tool) -> object:
    """A custom tool's ``format`` as the Responses API writes it (None: it has none)."""
    source = source_format(tool.spec)
    return responses_format((source_definition(tool, source, source) or {}).get("format"))


def _custom_text(tool: Tool) -> str:
    """What a custom tool's text input is: free-form, or held to the grammar of its ``format``."""
    fmt = _format(tool)
    if not (isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str)):
        return "The input, as free-form text."
    syntax = fmt.get("syntax")
    grammar = f"{syntax} grammar" if isinstance(syntax, str) else "grammar"
    return f"The input, as text in this {grammar}:\n{fmt['definition']}"


def chat_format(fmt: object) -> object:
    """A custom tool's format as Chat Completions writes it: a grammar's definition and syntax under ``grammar``."""
    if not isinstance(fmt, dict) or fmt.get("type") != "grammar" or "grammar" in fmt:
        return fmt
    return {"type": "grammar", "grammar": {k: v for k, v in fmt.items() if k != "type"}}


def responses_format(fmt: object) -> object:
    """A custom tool's format as the Responses API writes it: a grammar's definition and syntax beside its type."""
    if not isinstance(fmt, dict) or fmt.get("type") != "grammar" or not isinstance(fmt.get("grammar"), dict):
        return fmt
    return {**{k: v for k, v in fmt.items() if k != "grammar"}, **fmt["grammar"]}
