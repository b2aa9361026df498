"""Anthropic agent loops: the next call's tools from a Messages list, the model's ``tool_use`` blocks resolved,
and client-side tool search results (``tool_reference`` blocks) for tools sent with ``defer_loading``.

    result = route_messages(store, messages, fmt="anthropic")  # packed in Anthropic's format, its token_budget too
    reply = client.messages.create(model=..., max_tokens=..., messages=messages, tools=result.definitions())
    for call in calls(result, reply, unknown="report"):        # ResolvedCall(tool, name, arguments, id), or
        ...                                                    # UnknownCall(name, arguments, id, error): answer it

Tool search: send every tool with ``defer_loading: true`` (:func:`deferred_definitions`) plus your own search tool;
when the model calls it, answer with :func:`tool_search_result` and the API loads the tools it references. The model
then calls them by their catalog-wide names (``github__create_issue`` where another provider has a ``create_issue``
too), which may differ from ``result.names`` (``create_issue`` when it was the only one routed): :func:`calls` of the
search result resolves both, and exactly the referenced names when given the same ``deferred`` tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from .._agents import ResolvedCall, UnknownCall, aroute_messages, check_unknown, resolve_calls, route_messages
from .._agents import Unknown as Unknown
from .._errors import InvalidInputError
from .._formats import render
from .._formats.names import model_names, name_forms
from .._models import Tool
from .._names import resolve_given
from .._result import RouteResult

__all__ = [
    "ResolvedCall",
    "UnknownCall",
    "aroute_messages",
    "calls",
    "deferred_definitions",
    "route_messages",
    "tool_references",
    "tool_search_result",
]


@overload
def calls(
    result: RouteResult,
    message: Any,
    *,
    deferred: Sequence[Tool] | None = None,
    unknown: Literal["raise"] = "raise",
) -> list[ResolvedCall]: ...
@overload
def calls(
    result: RouteResult, message: Any, *, deferred: Sequence[Tool] | None = None, unknown: Unknown
) -> list[ResolvedCall | UnknownCall]: ...


def calls(
    result: RouteResult, message: Any, *, deferred: Sequence[Tool] | None = None, unknown: Unknown = "raise"
) -> list[ResolvedCall] | list[ResolvedCall | UnknownCall]:
    """The ``tool_use`` blocks of an assistant ``Message`` (or its dict, its ``content`` list, or one ``tool_use``
    block), resolved against ``result``, in order.

    A routed tool answers to the names ``result`` could have given the model. Without ``deferred``: its name in
    ``result.definitions`` (which :func:`tool_search_result` also refers to it by without ``deferred``) and each of
    its name forms (:func:`toolstore._formats.names.name_forms`), one of which is its catalog-wide name, the one a
    search answered with ``deferred`` refers to it by. With ``deferred`` (the tools given to
    :func:`tool_search_result`): exactly the name that search referred to it by. A name that more than one routed tool
    may have been given raises UnknownToolError rather than picking one (``deferred`` makes a search's names exact), as
    does a name none was, before any call is returned; with ``unknown="report"`` such a call is an
    :class:`UnknownCall` in its place instead (its ``error`` the text of a ``tool_result`` with ``is_error: true``)."""
    report = check_unknown(unknown)
    if isinstance(message, (list, tuple)):  # the reply's content blocks
        message = {"role": "assistant", "content": list(message)}
    elif _field(message, "role") is None and _field(message, "type") == "tool_use":  # one block
        message = {"role": "assistant", "content": [message]}
    tools = [r.tool for r in result.tools]
    shown: list[str] | None = None  # what an unknown name's error lists: the names offered, not every form accepted
    if deferred is None:
        shown = result.names
        given = [{offered, *name_forms(t)} for t, offered in zip(tools, result.names)]
        hint = "; pass calls(..., deferred=) the tools the search was given, to resolve the names it referenced"
    else:
        deferred = _deferred_tools(deferred)
        searched = dict(zip((t.id for t in deferred), model_names(deferred)))
        given = [{searched[t.id]} if t.id in searched else set() for t in tools]
        hint = ""
    return resolve_calls(
        result,
        [message],
        dialect="anthropic",
        resolve=lambda name: resolve_given(name, tools, given, hint=hint, shown=shown),
        report=report,
    )


def _field(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, else the attribute (None when it has neither)."""
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)


def _deferred_tools(deferred: Sequence[Tool]) -> list[Tool]:
    """``deferred`` as a list, every item a Tool: the definitions deferred_definitions made of them carry no tool id,
    so they are refused, saying what to pass."""
    tools = list(deferred)
    for i, tool in enumerate(tools):
        if not isinstance(tool, Tool):
            raise InvalidInputError(
                f"deferred= takes the Tools given to deferred_definitions (store.tools()), not their definitions: "
                f"item {i} is a {type(tool).__name__}"
            )
    return tools


def deferred_definitions(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """Anthropic definitions with ``defer_loading: true`` under the names a catalog-wide search refers to
    (:func:`toolstore._formats.names.model_names` over ``tools``)."""
    names = model_names(list(tools))
    return [{**d, "defer_loading": True} for d in render(list(tools), "anthropic", names=names)]


def tool_references(result: RouteResult, deferred: Sequence[Tool] | None = None) -> list[dict[str, str]]:
    """``tool_reference`` content blocks (``ToolReferenceBlockParam``) for the routed tools, best first.

    ``deferred``: the tools sent with :func:`deferred_definitions`, whose names the references must use (default:
    the names ``result.definitions`` gives). A routed tool that is not among them is left out."""
    if deferred is None:
        return [{"type": "tool_reference", "tool_name": name} for name in result.names]
    deferred = _deferred_tools(deferred)
    by_id = dict(zip((t.id for t in deferred), model_names(deferred)))
    return [{"type": "tool_reference", "tool_name": by_id[i]} for i in result.ids if i in by_id]


def tool_search_result(result: RouteResult, tool_use_id: str, deferred: Sequence[Tool] | None = None) -> dict[str, Any]:
    """The ``tool_result`` block answering a custom tool-search call with references to the routed tools."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": tool_references(result, deferred)}
