"""``langgraph-bigtool``: toolstore as the tool retriever of ``create_agent``.

    from langgraph_bigtool import create_agent
    registry = {tool.id: make_langchain_tool(tool) for tool in store.tools()}   # your callables, keyed by tool id
    agent = create_agent(llm, registry, retrieve_tools_function=bigtool_retriever(store, k=4)).compile()

The retriever routes the model's search query through ``store.route`` and returns tool ids (the registry's keys).
A blank query (empty, or only whitespace: nothing to route) returns no tool ids, without a database round trip, so
the model's tool-selection step goes on instead of raising InvalidInputError, which would end the agent's run:
langgraph-bigtool answers the model ``Available tools: []``, the tools it selected before stay bound, and it may search
again. (Not the catalog's always-on tools: they come with the first routed query, as with every route.) Any other
invalid query (over the length limit, control characters) still raises InvalidInputError. The options (``k``,
``token_budget``, ``weights``...) are checked when the retriever is made, as route() checks them, so a bad one is an
error there rather than at the model's first search, mid-run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._route import check_options, check_route

if TYPE_CHECKING:
    from .._async_store import AsyncToolStore
    from .._store import ToolStore

__all__ = ["bigtool_coroutine", "bigtool_retriever"]

_DOC = "Retrieve the tools for a task: describe in a few words what you need to do."


def _blank(query: object) -> bool:
    """A query with nothing to route: bigtool gets no tool ids for it (see the module's doc)."""
    return isinstance(query, str) and not query.strip()


def bigtool_retriever(store: ToolStore, *, k: int = 4, **options: Any) -> Callable[[str], list[str]]:
    """A ``retrieve_tools_function`` for ``langgraph_bigtool.create_agent`` (``options``: token_budget, weights...):
    the routed tool ids, best first; none for a blank query. Bad options are an error here (see the module's doc)."""
    check_options("bigtool_retriever", options)
    check_route("retrieve", k=k, **options)

    def retrieve_tools(query: str) -> list[str]:
        if _blank(query):
            return []
        return store.route(query, k=k, **options).ids

    retrieve_tools.__doc__ = _DOC
    return retrieve_tools


def bigtool_coroutine(store: AsyncToolStore, *, k: int = 4, **options: Any) -> Callable[[str], Awaitable[list[str]]]:
    """A ``retrieve_tools_coroutine`` for ``create_agent``, over an :class:`AsyncToolStore` (a blank query: none; bad
    options: an error here)."""
    check_options("bigtool_coroutine", options)
    check_route("retrieve", k=k, **options)

    async def retrieve_tools(query: str) -> list[str]:
        if _blank(query):
            return []
        return (await store.route(query, k=k, **options)).ids

    retrieve_tools.__doc__ = _DOC
    return retrieve_tools
