"""toolstore as an MCP server: ``find_tools`` over a catalog and, in gateway mode, ``call_tool`` forwarded to the
upstream MCP server that owns the tool (recorded by ``toolstore sync mcp``).

This is the two-tool pattern MCP gateways use: a client with hundreds of upstream tools sees two, asks
``find_tools`` for the few that matter, and calls them through ``call_tool``. The server opens a session to each
upstream (stdio or streamable HTTP) on first use and keeps it (``_mcp_sessions``); each call is bounded by
``call_timeout``. A failing call is an MCP error result; the server stays up. The gateway calls only the catalog's
tools and never writes the catalog: a call of a tool an upstream added since the sync (its session's latest listing
names it) is refused, naming the provider to sync again.

With ``session_log``, each client connection is a session of the catalog's log: every forwarded call is recorded
there (tool id, outcome, time), and ``find_tools`` routes with that session's calls, so the tools that usually come
next rank higher. A failed log write is logged and never fails the call.
"""

from __future__ import annotations

import json
import math
import shlex
import socket
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ._errors import InvalidInputError, McpSyncError, ToolstoreError, UnknownToolError
from ._formats import render
from ._formats.build import default_id
from ._formats.names import model_names, name_forms
from ._formats.render import http_endpoint
from ._fusion import SIGNALS
from ._mcp_args import TAKES, call_arguments, check_known, check_required, find_tools_options, sent_arguments
from ._mcp_sessions import UpstreamSessions
from ._mcp_sync import failure_text, leaf_error, open_session, require_mcp
from ._mcp_upstream import Upstream, upstream_from_row
from ._models import JSON_VERSION, SessionCall, Tool
from ._observe import logger, span
from ._result import RouteResult, routed_json
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


class ClientSessions:
    """A session id of the catalog's log per MCP client connection, made up on first use. The connection is the SDK's
    session object (mcp 1.x), or the connection that object serves (mcp 2.x makes a session object per message)."""

    def __init__(self) -> None:
        self._ids: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    def of(self, ctx: Any) -> str | None:
        session = getattr(ctx, "session", None) if ctx is not None else None
        if session is None:
            return None
        connection = getattr(session, "_connection", None) or session
        if connection not in self._ids:
            self._ids[connection] = f"mcp-{uuid.uuid4().hex[:16]}"
        return self._ids[connection]


def logging_hook(store: AsyncToolStore, then: CallLog | None = None) -> CallLog:
    """A CallLog that records each call in ``store``'s session log (its ``session``), then calls ``then``."""

    async def log(record: CallRecord) -> None:
        if record.session is not None:
            try:
                await store.record_calls(record.session, [SessionCall(record.tool_id, ok=not record.is_error)])
            except ToolstoreError as exc:
                logger.warning("session log: could not record %s: %s", record.tool_id, exc)
        if then is not None:
            outcome = then(record)
            if outcome is not None:
                await outcome

    return log


def find_tools_json(result: RouteResult, names: list[str]) -> dict[str, Any]:
    """``find_tools``' answer: the routed tools as MCP definitions (under ``names``) and explain-lite ranks, and the
    tools the token budget left out (``skipped``, as ``toolstore route --json`` gives them: ``_result.routed_json``)."""
    tools = [r.tool for r in result.tools]
    ranks = []
    for r, name in zip(result.tools, names):
        rank: dict[str, Any] = {"name": name, "id": r.tool.id, "score": round(r.score, 6)}
        rank["signals"] = {s: getattr(r.signals, s) for s in SIGNALS if getattr(r.signals, s) is not None}
        rank.update({k: True for k in ("exact", "always_on") if getattr(r, k)})
        http = http_endpoint(r.tool)
        if http is not None:
            rank["http"] = http
        ranks.append(rank)
    return {
        "version": JSON_VERSION,
        "query": result.query,
        "tools": render(tools, "mcp", names=names),
        "ranks": ranks,
        "skipped": [routed_json(r) for r in result.skipped],
        "tokens_used": result.tokens_used,
        "token_budget": result.token_budget,
        "degraded_reason": result.degraded_reason,
        **({"abstained": result.abstained} if result.abstention is not None else {}),
    }


def _sdk() -> tuple[Any, type[Exception], type]:
    """The SDK's server class, the error a tool raises for an anticipated failure (its text reaches the client) and
    the request context class a tool receives when it asks for one."""
    require_mcp()
    try:  # mcp 2.x
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import Context  # type: ignore[no-redef, attr-defined]
        from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef, attr-defined]
        from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
    return MCPServer, ToolError, Context


def build_server(
    store: AsyncToolStore,
    *,
    gateway: bool = False,
    k: int = 8,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    call_log: CallLog | None = None,
    sessions: UpstreamSessions | None = None,
    name: str = "toolstore",
    session_log: bool = False,
) -> Any:
    """An MCP server (the SDK's ``MCPServer`` / ``FastMCP``) over an open :class:`AsyncToolStore`; the gateway
    forwards calls over ``sessions`` (open ones, kept across calls) or, without, a session per call.
    ``session_log``: record the gateway's calls in the catalog's session log, one session per client connection,
    and route ``find_tools`` with them. ``call_timeout``: seconds per forwarded call, a positive finite number."""
    if isinstance(call_timeout, bool) or not isinstance(call_timeout, (int, float)) or not 0 < call_timeout < math.inf:
        raise InvalidInputError(f"call_timeout must be a positive number of seconds, got {call_timeout!r}")
    server_class, tool_error, context_class = _sdk()
    server = _checking(server_class, tool_error)(name, instructions=_instructions(gateway))
    clients = ClientSessions()
    hook = logging_hook(store, call_log) if session_log else call_log

    async def find_tools(
        query: str, k: int = k, token_budget: int | None = None, abstain: bool = False, ctx: Any = None
    ) -> str:
        """Find the tools for a task: describe what you need to do in plain words. Returns JSON: the tools'
        MCP definitions, best first, and why each was picked (its rank in every retriever). With abstain, no tool
        comes back ("abstained": true) when none fits the task."""
        try:
            with span("toolstore.mcp.find_tools", catalog=store.catalog):
                session = clients.of(ctx) if session_log else None
                result = await store.route(
                    query, k=k, token_budget=token_budget, session=session, abstain=abstain, fmt="mcp"
                )
                names = await _catalog_names(store, result) if gateway else result.names
                return json.dumps(find_tools_json(result, names), ensure_ascii=False)
        except ToolstoreError as exc:
            raise tool_error(str(exc)) from exc

    find_tools.__annotations__.update(
        find_tools_options(), ctx=context_class
    )  # ctx: the SDK passes its request context there
    server.add_tool(find_tools)
    if gateway:

        async def call_tool(name: str, arguments: Any = None, ctx: Any = None) -> Any:
            """Call a tool that find_tools returned, by its name, with its arguments (a JSON object)."""
            session = clients.of(ctx) if session_log else None
            log = None if hook is None else _with_session(hook, session)
            try:
                return await forward_call(store, name, arguments, timeout=call_timeout, call_log=log, sessions=sessions)
            except ToolstoreError as exc:
                raise tool_error(str(exc)) from exc

        call_tool.__annotations__.update(arguments=sent_arguments(), ctx=context_class)
        server.add_tool(call_tool)
    return server


def _checking(server_class: Any, tool_error: type[Exception]) -> Any:
    """``server_class`` checking each call's required argument, then that it sends no other (:mod:`._mcp_args`), before
    the SDK's pydantic reads the call, whose error reached the model as pydantic's text (and which dropped an unknown
    argument unsaid); the tool error says it as the SDK says a tool's own (``Error executing tool NAME: ...``). Its
    tools' listed input schemas say they take no other argument (``additionalProperties: false``)."""

    class CheckingServer(server_class):  # type: ignore[misc, valid-type]
        async def list_tools(self) -> Any:
            tools = await super().list_tools()
            for tool in tools:
                if tool.name in TAKES:
                    schema = tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema  # mcp 2.x, 1.x
                    schema["additionalProperties"] = False
            return tools

        async def call_tool(self, name: str, arguments: dict[str, Any] | None, *args: Any, **kwargs: Any) -> Any:
            try:
                check_required(name, arguments)
                check_known(name, arguments)
            except InvalidInputError as exc:
                raise tool_error(f"Error executing tool {name}: {exc}") from exc
            return await super().call_tool(name, arguments, *args, **kwargs)

    return CheckingServer


def _with_session(hook: CallLog, session: str | None) -> CallLog:
    return lambda record: hook(replace(record, session=session))


def _instructions(gateway: bool) -> str:
    text = "Call find_tools with what you need to do; it returns the few tools that fit, best first."
    return text + (" Then call them through call_tool(name, arguments)." if gateway else "")


async def _gateway_names(store: AsyncToolStore) -> dict[str, str]:
    """Every tool's name in the gateway, by tool id: ``model_names`` of the whole catalog, so each is unique there
    and a later ``call_tool`` finds its tool without the result that offered it."""
    info = await store.info(counts=False)
    async with store.pool.connection() as conn:
        cur = await conn.execute(query("tool_names"), {"catalog": info.id})
        rows = [dict(zip(("id", "name", "provider"), r)) for r in await cur.fetchall()]
    tools = [name_row(r) for r in rows]
    return dict(zip((t.id for t in tools), model_names(tools)))


async def _catalog_names(store: AsyncToolStore, result: RouteResult) -> list[str]:
    """The gateway's names (:func:`_gateway_names`) of the result's tools."""
    by_id = await _gateway_names(store)
    return [by_id.get(r.tool.id, n) for r, n in zip(result.tools, result.names)]


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
    names = await _gateway_names(store)
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
        failed = bool(getattr(result, "is_error", getattr(result, "isError", False)))
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


def check_address(host: str, port: int) -> None:
    """InvalidInputError when the HTTP server could not listen on ``host`` and ``port`` (an unknown host, a port in use
    or not permitted): bound here as uvicorn binds them, each address the host resolves to, so the error is one line
    before the server starts (uvicorn's own exits the process from inside the server, a traceback)."""
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:  # a family this machine lacks: asyncio's create_server skips it too
                continue
            with sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InvalidInputError(f"cannot serve HTTP on host {host!r}, port {port}: {reason}") from None


async def serve(
    store: AsyncToolStore, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000, **options: Any
) -> None:
    """Run :func:`build_server` on ``transport`` (``stdio`` or ``http``: streamable HTTP at ``/mcp``) until stopped,
    with upstream sessions kept open across calls and closed on the way out."""
    if transport not in ("stdio", "http"):
        raise InvalidInputError(f"transport must be 'stdio' or 'http', got {transport!r}")
    if transport == "http":
        check_address(host, port)
    async with UpstreamSessions() as sessions:
        server = build_server(store, sessions=sessions, **options)
        if transport == "stdio":
            await server.run_stdio_async()
            return
        try:
            await server.run_streamable_http_async(host=host, port=port)
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host, server.settings.port = host, port
            await server.run_streamable_http_async()
