"""Anthropic agent loops: the next call's tools from a Messages list, the model's ``tool_use`` blocks resolved,
and client-side tool search results (``tool_reference`` blocks) for tools sent with ``defer_loading``.

    result = route_messages(store, messages)
    reply = client.messages.create(model=..., max_tokens=..., messages=messages, tools=result.definitions("anthropic"))
    for call in calls(result, reply):                          # ResolvedCall(tool, name, arguments, id)
        ...

Tool search: send every tool with ``defer_loading: true`` (:func:`deferred_definitions`) plus your own search tool;
when the model calls it, answer with :func:`tool_search_result` and the API loads the tools it references.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._agents import ResolvedCall, aroute_messages, resolve_calls, route_messages
from .._formats import render
from .._models import Tool
from .._names import model_names
from .._result import RouteResult

__all__ = [
    "ResolvedCall",
    "aroute_messages",
    "calls",
    "deferred_definitions",
    "route_messages",
    "tool_references",
    "tool_search_result",
]


def calls(result: RouteResult, message: Any) -> list[ResolvedCall]:
    """The ``tool_use`` blocks of an assistant ``Message`` (or its dict), resolved against ``result``."""
    return resolve_calls(result, [message], dialect="anthropic")


def deferred_definitions(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """Anthropic definitions with ``defer_loading: true`` under the names a catalog-wide search refers to
    (:func:`toolstore._names.model_names` over ``tools``)."""
    names = model_names(list(tools))
    return [{**d, "defer_loading": True} for d in render(list(tools), "anthropic", names=names)]


def tool_references(result: RouteResult, deferred: Sequence[Tool] | None = None) -> list[dict[str, str]]:
    """``tool_reference`` content blocks (``ToolReferenceBlockParam``) for the routed tools, best first.

    ``deferred``: the tools sent with :func:`deferred_definitions`, whose names the references must use (default:
    the names ``result.definitions`` gives). A routed tool that is not among them is left out."""
    if deferred is None:
        return [{"type": "tool_reference", "tool_name": name} for name in result.names]
    deferred = list(deferred)
    by_id = dict(zip((t.id for t in deferred), model_names(deferred)))
    return [{"type": "tool_reference", "tool_name": by_id[i]} for i in result.ids if i in by_id]


def tool_search_result(result: RouteResult, tool_use_id: str, deferred: Sequence[Tool] | None = None) -> dict[str, Any]:
    """The ``tool_result`` block answering a custom tool-search call with references to the routed tools."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": tool_references(result, deferred)}
