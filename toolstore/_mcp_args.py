"""What the MCP server's two tools take as their client sent it, checked here rather than by the SDK's pydantic, so an
error names the argument or the tool and says what is wrong.

Each tool's required argument (:data:`REQUIRED`: ``find_tools``' ``query``, ``call_tool``'s ``name``) is checked before
the SDK reads the call (:func:`check_required`): missing, null, not a string or blank, the tool error says what to send,
where the SDK's pydantic answered with its own text (its model's name, the input's repr, a link to its docs).

An argument the tool does not take (:data:`TAKES`: ``limit`` or ``top_k`` for ``k``, a called tool's own arguments
beside ``name``) is a tool error naming it and the ones the tool takes (:func:`check_known`), where the SDK dropped it
unsaid (the model got 8 tools, not its 3); the tools' input schemas say so (``additionalProperties: false``). The
SDK's clients send nothing else in ``arguments`` (their ``_meta`` goes beside it, in the request's params).

``find_tools``' options (:func:`find_tools_options`) go to route() as sent, which checks and names them; ``call_tool``'s
``arguments`` (:func:`call_arguments`) are a JSON object, or that object written as a JSON string (some clients send a
tool call's arguments as the model wrote them: a string), parsed here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from ._errors import InvalidInputError
from ._input import decode_problem, parse_json

#: ``call_tool``'s ``arguments`` as its clients are told: a JSON object, or null for none.
ARGUMENTS_SCHEMA = {"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]}

_KINDS = {list: "an array", dict: "an object", str: "a string", bool: "a boolean", int: "a number", float: "a number"}

#: Each tool's required string argument and what it is, as the error that finds it missing says.
REQUIRED = {
    "find_tools": ("query", "a description of the task in plain words, such as 'send a message to a Slack channel'"),
    "call_tool": ("name", "the name of a tool that find_tools returned"),
}


#: The arguments each tool takes, and how its error says them.
TAKES = {
    "find_tools": (("query", "k", "token_budget", "abstain"), "query, k (how many tools), token_budget and abstain"),
    "call_tool": (("name", "arguments"), "name and arguments (the called tool's own, as one JSON object)"),
}


def check_known(tool: str, sent: Mapping[str, Any] | None) -> None:
    """InvalidInputError when the call of ``tool`` was ``sent`` with an argument it does not take (:data:`TAKES`),
    naming the first few and the ones it takes. Another tool's call passes."""
    if tool not in TAKES:
        return
    names, said = TAKES[tool]
    unknown = [key for key in (sent or {}) if key not in names]
    if unknown:
        shown = ", ".join(f"{key!r:.60}" for key in unknown[:3]) + (
            f" (and {len(unknown) - 3} more)" if unknown[3:] else ""
        )
        raise InvalidInputError(f"{tool} takes no argument {shown}: it takes {said}")


def check_required(tool: str, sent: Mapping[str, Any] | None) -> None:
    """InvalidInputError when the call of ``tool`` was ``sent`` without its required argument (:data:`REQUIRED`), or
    with one that is null, not a string, or blank: naming the argument and saying what to send. Another tool's call
    passes."""
    if tool not in REQUIRED:
        return
    argument, what = REQUIRED[tool]
    value = (sent or {}).get(argument)
    if value is None:
        raise InvalidInputError(f"{argument} is required: {what}")
    if not isinstance(value, str):
        kind = _KINDS.get(type(value), type(value).__name__)
        raise InvalidInputError(f"{argument} must be a string, got {kind}: send {what}")
    if not value.strip():
        raise InvalidInputError(f"{argument} is empty: send {what}")


def find_tools_options() -> dict[str, Any]:
    """find_tools' options as the client sent them, for route() to check and name (their JSON schema kept): the SDK's
    pydantic took ``"3"`` and ``true`` for ``k``, ``"yes"`` and ``1`` for ``abstain``, where route() refuses them. A
    JSON number without a fraction (``2.0``) is the integer it equals, as JSON Schema's ``integer`` says."""
    from pydantic import AfterValidator  # the mcp SDK's

    def sent(*types: str) -> Any:
        schema = {"type": types[0]} if len(types) == 1 else {"anyOf": [{"type": t} for t in types]}
        whole = (AfterValidator(_whole),) if "integer" in types else ()
        return _as_sent(schema, *whole)

    return {"k": sent("integer"), "token_budget": sent("integer", "null"), "abstain": sent("boolean")}


def sent_arguments() -> Any:
    """``call_tool``'s ``arguments`` annotation: whatever the client sent (:func:`call_arguments` reads it), under the
    schema :data:`ARGUMENTS_SCHEMA`. The SDK parses a string that holds a JSON array or object first."""
    return _as_sent(ARGUMENTS_SCHEMA)


def _as_sent(schema: dict[str, Any], *validators: Any) -> Any:
    from pydantic import WithJsonSchema  # the mcp SDK's

    return Annotated[(Any, WithJsonSchema(schema), *validators)]


def _whole(value: Any) -> Any:
    """``value``, a float without a fraction as its int (JSON has one kind of number: ``2.0`` is ``2``)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def call_arguments(name: str, sent: object) -> dict[str, Any]:
    """The arguments a call of tool ``name`` was sent with: a JSON object, ``None`` (none: ``{}``), or a string holding
    a JSON object (or ``null``). InvalidInputError naming the tool and what is wrong otherwise: a string that is not
    JSON (where it stops being JSON), nested deeper than 100 levels, or JSON that is not an object."""
    value = sent
    if isinstance(sent, str):
        try:
            value = parse_json(sent, allow_nan=True)
        except json.JSONDecodeError as exc:
            shown, problem = f"{sent[:60]!r}{'...' if len(sent) > 60 else ''}", decode_problem(exc.msg)
            raise InvalidInputError(
                f"arguments of tool {name!r:.80} are a string that is not JSON ({problem} at line {exc.lineno} "
                f"column {exc.colno} of {shown}): send a JSON object"
            ) from None
        except ValueError as exc:  # nested deeper than MAX_DOCUMENT_DEPTH, on every Python; an integer too long
            raise InvalidInputError(f"arguments of tool {name!r:.80} are a string that cannot be read: {exc}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = _KINDS.get(type(value), type(value).__name__)
        got = f"a string that holds {kind}" if isinstance(sent, str) else kind
        raise InvalidInputError(f"arguments of tool {name!r:.80} must be a JSON object, got {got}")
    return value
