"""Agent loops: route the next model call's tools from a message list, and map the calls the model made back
to tools (annotations evaluated, as in ``_models``). Shared by the SDK adapters in ``toolstore.integrations``;
message reading itself is ``_messages``."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import InvalidInputError
from ._messages import read_messages
from ._models import Tool
from ._result import RouteResult

if TYPE_CHECKING:
    from ._async_store import AsyncToolStore
    from ._store import ToolStore


@dataclass(frozen=True)
class ResolvedCall:
    """A tool call of the model, resolved: the tool, the name the model used, its arguments and the call id."""

    tool: Tool
    name: str
    arguments: dict[str, Any] | str
    id: str | None


def latest_request(messages: object, dialect: str = "auto") -> str:
    """The latest user request of a message list; InvalidInputError when no user message holds text."""
    request = read_messages(messages, dialect).request
    if request is None:
        raise InvalidInputError("no user message with text in messages: nothing to route")
    return request


def route_messages(store: "ToolStore", messages: object, *, dialect: str = "auto", **options: Any) -> RouteResult:
    """``store.route`` for the latest user request of ``messages`` (``options``: k, token_budget, ...)."""
    return store.route(latest_request(messages, dialect), **options)


async def aroute_messages(
    store: "AsyncToolStore", messages: object, *, dialect: str = "auto", **options: Any
) -> RouteResult:
    """:func:`route_messages` for an :class:`AsyncToolStore`."""
    return await store.route(latest_request(messages, dialect), **options)


def resolve_calls(result: RouteResult, items: Sequence[object], *, dialect: str = "auto") -> list[ResolvedCall]:
    """Every tool call in ``items`` (the model's reply as messages or output items), resolved against the tools
    ``result`` offered; UnknownToolError for a name that was not offered."""
    calls = read_messages(list(items), dialect).tool_calls
    return [ResolvedCall(result.resolve(c.name), c.name, c.arguments, c.id) for c in calls]
