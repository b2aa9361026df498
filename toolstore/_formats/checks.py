"""The checks of a tool definition's values that need no ``x-toolstore`` knowledge (``build`` has those): JSON types
and what the catalog can store, a parameters schema, a name, strings and lists of strings. Each raises ValueError,
which ``build.build_tool`` turns into an InvalidToolError naming the tool."""

from __future__ import annotations

import copy
import math
from typing import Any

import regex

from .._input import MAX_INT_BITS, MAX_NAME_CHARS, text_problem


def type_name(value: object) -> str:
    """The JSON name of ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def shown(value: object, width: int = 80) -> str:
    """``repr(value)`` cut to ``width`` characters, for an error message; an integer over
    :data:`~.._input.MAX_INT_BITS` bits is said as one (Python refuses to print one of thousands of digits), and a
    list or object holding one Python cannot print is said to hold one."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        return f"an integer over {MAX_INT_BITS} bits"
    try:
        return f"{value!r:.{width}}"
    except ValueError:  # an integer too long to print, somewhere inside
        kind = type_name(value)
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} holding an integer over {MAX_INT_BITS} bits"


def find_unstorable(value: object, path: str = "") -> str | None:
    """What the first value (or key) JSON cannot hold, or the catalog cannot store, is, and where: a NUL byte or a lone
    surrogate in a string, NaN or Infinity (a JSON number past a double's range, ``1e400``, reads as Infinity), an
    integer over :data:`~.._input.MAX_INT_BITS` bits, a non-string key, a value of no JSON type; None: none."""
    where = path or "(value)"
    if isinstance(value, str):
        problem = text_problem(value)
        return None if problem is None else f"NUL byte in {where}" if "\x00" in value else f"{where} {problem}"
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return f"{where} is an integer over {MAX_INT_BITS} bits" if value.bit_length() > MAX_INT_BITS else None
    if isinstance(value, float) and math.isnan(value):
        return f"{where} is NaN, which is not JSON"
    if isinstance(value, float):  # Infinity: json.loads reads a number past a double's range so
        return None if math.isfinite(value) else f"{where} is Infinity, which is not JSON (a number such as 1e400 is)"
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or text_problem(key):  # the key itself shown escaped: a lone surrogate
                if isinstance(key, str) and "\x00" in key:  # cannot be printed
                    return f"NUL byte in {sub}"
                problem = "is not a string" if not isinstance(key, str) else text_problem(key)
                return f"{where} has a key that {problem}: {key!r:.40}"
            found = find_unstorable(item, sub)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = find_unstorable(item, f"{path}[{i}]")
            if found:
                return found
        return None
    return f"{where} is a {type(value).__name__}, which is not JSON"


def is_empty_object_schema(schema: dict[str, Any]) -> bool:
    """True for ``{}``, ``{"type": "object"}`` and ``{"type": "object", "properties": {}}``.

    These all mean "takes no arguments" and are stored as ``parameters=None`` so that a tool
    rendered with the placeholder schema parses back to the same :class:`Tool`.
    """
    if not set(schema) <= {"type", "properties"}:
        return False
    return schema.get("type", "object") == "object" and schema.get("properties", {}) == {}


def check_parameters(value: object, field_name: str) -> dict[str, Any] | None:
    """Validate a parameters schema; return a private copy, or None when there are no arguments."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{field_name} must be a JSON object, got {type_name(value)}")
    if is_empty_object_schema(value):
        return None
    if value.get("type") != "object":
        got = value.get("type", "no type")
        raise ValueError(f'{field_name} must be a JSON schema with "type": "object", got {got!r:.80}')
    properties = value.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise ValueError(f"{field_name}.properties must be a JSON object, got {type_name(properties)}")
    return copy.deepcopy(value)


def check_str_list(value: object, field_name: str) -> tuple[str, ...]:
    """A list of strings as a tuple; anything else is an error naming ``field_name``."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{field_name} must be a list of strings, got {type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{field_name}[{i}] must be a string, got {type_name(item)}")
    return tuple(value)


def check_name(name: object) -> str:
    """Validate a tool name: a non-empty string of at most :data:`MAX_NAME_CHARS` characters."""
    if name is None:
        raise ValueError("name is missing")
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {type_name(name)}")
    if not name.strip():
        raise ValueError("name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"name is {len(name)} characters long, the limit is {MAX_NAME_CHARS}")
    return name


def check_optional_str(value: object, field_name: str) -> str | None:
    """A string or None; anything else is an error naming ``field_name``."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{field_name} must be a string, got {type_name(value)}")


#: The syntaxes of an OpenAI custom tool's grammar (its ``format``), as the APIs take them.
GRAMMAR_SYNTAXES = ("lark", "regex")


def check_grammar(fmt: dict[str, Any], where: str) -> None:
    """An OpenAI custom tool's ``format`` (``where`` names it) when it is a grammar, in either shape (the Responses
    API's definition and syntax beside its type, Chat Completions' under ``grammar``): its syntax is lark or regex, its
    definition a non-empty string, and a regex compiles. A regex is compiled by the ``regex`` package (Python's ``re``
    syntax plus what the Rust regex crate, which OpenAI reads it with, also has: ``\\p{L}``, ``[[:alpha:]]``,
    ``(?<name>...)``, ``\\z``); a Lark grammar is checked for its shape only (no Lark parser is a dependency)."""
    if fmt.get("type") != "grammar":
        return
    grammar = fmt.get("grammar", fmt)
    where = f"{where}.grammar" if "grammar" in fmt else where
    if not isinstance(grammar, dict):
        raise ValueError(f"{where} must be a JSON object, got {type_name(grammar)}")
    syntax, definition = grammar.get("syntax"), grammar.get("definition")
    if syntax not in GRAMMAR_SYNTAXES:
        raise ValueError(f"{where}.syntax must be 'lark' or 'regex', got {shown(syntax)}")
    if not isinstance(definition, str) or not definition.strip():
        raise ValueError(f"{where}.definition must be a non-empty string, got {shown(definition)}")
    if syntax == "regex":
        try:
            regex.compile(definition)
        except (regex.error, RecursionError, OverflowError) as exc:
            problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise ValueError(
                f"{where}.definition is a regex that does not compile: {problem:.200} (checked with Python's regex "
                "package; a form only the Rust regex crate has, such as \\x{...}, (?U) or \\b{start}, is not accepted)"
            ) from None
