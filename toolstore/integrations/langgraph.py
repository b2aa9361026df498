"""``langgraph-bigtool``: toolstore as the tool retriever of ``create_agent``.

    from langgraph_bigtool import create_agent
    registry = {tool.id: make_langchain_tool(tool) for tool in store.tools()}   # your callables, keyed by tool id
    agent = create_agent(llm, registry, retrieve_tools_function=bigtool_retriever(store, k=4)).compile()

The retriever routes the model's search query through ``store.route`` and returns tool ids (the registry's keys).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._async_store import AsyncToolStore
    from .._store import ToolStore

__all__ = ["bigtool_coroutine", "bigtool_retriever"]

_DOC = "Retrieve the tools for a task: describe in a few words what you need to do."


def bigtool_retriever(store: ToolStore, *, k: int = 4, **options: Any) -> Callable[[str], list[str]]:
    """A ``retrieve_tools_function`` for ``langgraph_bigtool.create_agent`` (``options``: token_budget, weights...)."""

    def retrieve_tools(query: str) -> list[str]:
        return store.route(query, k=k, **options).ids

    retrieve_tools.__doc__ = _DOC
    return retrieve_tools


def bigtool_coroutine(store: AsyncToolStore, *, k: int = 4, **options: Any) -> Callable[[str], Awaitable[list[str]]]:
    """A ``retrieve_tools_coroutine`` for ``create_agent``, over an :class:`AsyncToolStore`."""

    async def retrieve_tools(query: str) -> list[str]:
        return (await store.route(query, k=k, **options)).ids

    retrieve_tools.__doc__ = _DOC
    return retrieve_tools
