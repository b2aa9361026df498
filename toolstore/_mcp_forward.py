"""The MCP gateway's ``call_tool``, forwarded: the tool a name means (the gateway's names first, then the catalog's),
its recorded upstream, the call there bounded by a timeout, its failure as an McpSyncError that holds nothing of how
the upstream is reached, and the refusal of a tool an upstream added since the catalog was synced. The server
(:mod:`._mcp_server`) calls :func:`forward_call` and names ``find_tools``' tools with :func:`gateway_names`; each
forwarded call is a :class:`CallRecord` for its ``call_log`` hook.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ._errors import McpSyncError, UnknownToolError
from ._formats.build import default_id
from ._formats.names import model_names, name_forms
from ._mcp_args import call_arguments
from ._mcp_client import failure_text, leaf_error, open_session
from ._mcp_sessions import UpstreamSessions
from ._mcp_upstream import Upstream, upstream_from_row
from ._models import Tool
from ._observe import logger, span
from ._rows import name_row
from ._sql import query

if TYPE_CHECKING:
    from ._async_store import AsyncToolStore

DEFAULT_CALL_TIMEOUT = 30.0


@dataclass(frozen=True)
class CallRecord:
    """One forwarded ``call_tool``: what the session-log hook receives."""

    tool_id: str
    name: str
    provider: str
    arguments: dict[str, Any]
    is_error: bool
    ms: float
    session: str | None = None


#: A hook called after every forwarded call (``build_server(session_log=True)`` records the call in the catalog's
#: session log before calling it).
CallLog = Callable[[CallRecord], Awaitable[None] | None]


async def gateway_names(store: AsyncToolStore) -> dict[str, str]:
    """Every tool's name in the gateway, by tool id: ``model_names`` of the whole catalog, so each is unique there
    and a later ``call_tool`` finds its tool without the result that offered it."""
    info = await store.info(counts=False)
    async with store.pool.connection() as conn:
        cur = await conn.execute(query("tool_names"), {"catalog": info.id})
        rows = [dict(zip(("id", "name", "provider"), r)) for r in await cur.fetchall()]
    tools = [name_row(r) for r in rows]
    return dict(zip((t.id for t in tools), model_names(tools)))


async def forward_call(
    store: AsyncToolStore,
    name: str,
    arguments: object,
    *,
    timeout: float = DEFAULT_CALL_TIMEOUT,
    call_log: CallLog | None = None,
    sessions: UpstreamSessions | None = None,
) -> Any:
    """Call the tool the gateway's ``find_tools`` names ``name`` (else the tool ``name`` resolves to in the catalog)
    on its upstream server; returns the upstream's
    ``CallToolResult``. McpSyncError (or UnknownToolError) when the tool, its upstream or the call fails.
    ``arguments``: a JSON object, or one written as a JSON string (:func:`~._mcp_args.call_arguments`); else an
    InvalidInputError naming the tool and the problem.

    ``sessions``: long-lived upstream sessions (the server's); without, the call opens and closes its own."""
    import anyio

    arguments = call_arguments(name, arguments)
    # the name find_tools gave the tool first: a name there may be another tool's id, or one of its name forms
    names = await gateway_names(store)
    gateway = {given: tool_id for tool_id, given in names.items()}
    try:
        tool = await (store.get(gateway[name]) if name in gateway else store.resolve(name))
    except UnknownToolError:
        if sessions is not None:
            await _refuse_unsynced(store, sessions, name, set(names))
        raise
    upstream = await _recorded_upstream(store, tool)
    where = f"upstream {tool.provider!r}"  # to the client, the model: never how the upstream is reached
    start = time.perf_counter()
    failed = True
    try:
        with span("toolstore.mcp.call_tool", catalog=store.catalog, tool=tool.id), anyio.fail_after(timeout):
            if sessions is not None:
                recorded = partial(_recorded_upstream, store, tool)  # read again by a call after a rotation
                result = await sessions.call(
                    upstream, tool.name, arguments, provider=tool.provider or "", recorded=recorded
                )
            else:
                async with open_session(upstream) as (session, _):
                    result = await session.call_tool(tool.name, arguments)
        failed = bool(getattr(result, "is_error", False))
        return result
    except McpSyncError:
        raise
    except Exception as exc:
        leaf = leaf_error(exc)
        if isinstance(leaf, TimeoutError) or isinstance(exc, TimeoutError):
            raise McpSyncError(f"{where} did not answer {tool.name!r} within {timeout:g} s") from None
        message = failure_text(exc)  # a URL's path or query may hold a token: not for the client, nor the log
        logger.debug("call_tool %s failed on %s: %s", tool.id, upstream.describe(), message)
        raise McpSyncError(f"{where} failed on {tool.name!r}: {message}") from None
    finally:
        ms = (time.perf_counter() - start) * 1000
        logger.debug("call_tool %s -> %s %.1f ms%s", tool.id, upstream.describe(), ms, " (error)" if failed else "")
        if call_log is not None:
            outcome = call_log(CallRecord(tool.id, name, tool.provider or "", arguments, failed, ms))
            if outcome is not None:
                await outcome


async def _recorded_upstream(store: AsyncToolStore, tool: Tool) -> Upstream:
    """The upstream recorded for ``tool``'s provider; McpSyncError when there is none."""
    info = await store.info(counts=False)
    async with store.pool.connection() as conn:
        cur = await conn.execute(query("get_upstream"), {"catalog": info.id, "provider": tool.provider or ""})
        row = await cur.fetchone()
    if row is None:
        raise McpSyncError(f"tool {tool.id!r} has no upstream MCP server recorded: sync it with `toolstore sync mcp`")
    return upstream_from_row(row)


async def _refuse_unsynced(store: AsyncToolStore, sessions: UpstreamSessions, name: str, known: set[str]) -> None:
    """McpSyncError when ``name`` names a tool that an upstream's latest listing (of a session the gateway holds) names
    and the catalog does not have (``known``: its ids): the upstream added it since the catalog was synced. The gateway
    calls only the catalog's tools and never writes the catalog, so the error says to sync the provider again; it
    holds nothing of how the upstream is reached (command, arguments, URL, values): the client, the model, reads it."""
    import anyio

    info = await store.info(counts=False)
    async with store.pool.connection() as conn:
        cur = await conn.execute(query("upstreams"), {"catalog": info.id})
        providers = [(provider, upstream_from_row(row)) for provider, *row in await cur.fetchall()]
    listings: list[frozenset[str] | None] = [None] * len(providers)

    async def list_one(index: int, upstream: Upstream) -> None:  # each may wait for a listing under way: all at once
        listings[index] = await sessions.listed(upstream)

    async with anyio.create_task_group() as group:
        for index, (_, upstream) in enumerate(providers):
            group.start_soon(list_one, index, upstream)
    for (provider, _), names in zip(providers, listings):
        for listed in sorted(names or ()):
            tool = Tool(id=default_id(provider, listed), name=listed, provider=provider)
            if tool.id in known or name not in {tool.id, tool.name, *name_forms(tool)}:
                continue
            sync = shlex.join(["toolstore", "-c", store.catalog, "sync", "mcp", "--provider", provider])
            raise McpSyncError(  # to the client, the model: no command, argument, URL or value of the upstream
                f"tool {name!r} is not in catalog {store.catalog!r}, but upstream {provider!r} lists it as {listed!r}: "
                "it was added since the catalog was synced, and the gateway calls only the catalog's tools. Sync that "
                f"upstream again to add it: {sync} ... with the command or URL it was synced with"
            )
