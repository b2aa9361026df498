"""toolstore as an MCP server: ``find_tools`` over a catalog and, in gateway mode, ``call_tool`` forwarded to the
upstream MCP server that owns the tool (recorded by ``toolstore sync mcp``).

This is the two-tool pattern MCP gateways use: a client with hundreds of upstream tools sees two, asks
``find_tools`` for the few that matter, and calls them through ``call_tool`` (forwarded by ``_mcp_forward``). The
server opens a session to each upstream (stdio or streamable HTTP) on first use and keeps it (``_mcp_sessions``); each
call is bounded by ``call_timeout``. A failing call is an MCP error result; the server stays up. The gateway calls
only the catalog's tools and never writes the catalog: a call of a tool an upstream added since the sync (its
session's latest listing names it) is refused, naming the provider to sync again.

With ``session_log``, each client connection is a session of the catalog's log: every forwarded call is recorded
there (tool id, outcome, time), and ``find_tools`` routes with that session's calls, so the tools that usually come
next rank higher. A failed log write is logged and never fails the call.
"""

from __future__ import annotations

import importlib
import json
import math
import socket
import uuid
import weakref
from contextlib import suppress
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ._errors import InvalidInputError, ToolstoreError
from ._formats import render
from ._formats.render import http_endpoint
from ._fusion import SIGNALS
from ._mcp_args import TAKES, check_known, check_required, find_tools_options, sent_arguments
from ._mcp_client import require_mcp, sdk_private
from ._mcp_forward import DEFAULT_CALL_TIMEOUT, CallLog, CallRecord, forward_call, gateway_names
from ._mcp_sessions import UpstreamSessions
from ._mcp_stdin import stdio_runner
from ._models import JSON_VERSION, SessionCall
from ._observe import logger, span
from ._result import RouteResult, routed_json

if TYPE_CHECKING:
    from ._async_store import AsyncToolStore


class ClientSessions:
    """A session id of the catalog's log per MCP client connection, made up on first use. The connection is the one
    the SDK's session object serves (``_connection``, private: the SDK makes a session object per message, and has no
    public handle on its connection; a release without it a McpSyncError naming it, ``sdk_private``)."""

    def __init__(self) -> None:
        self._ids: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    def of(self, ctx: Any) -> str | None:
        session = getattr(ctx, "session", None) if ctx is not None else None
        if session is None:
            return None
        connection = sdk_private(session, "_connection", "tell one client connection's calls from another's")
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
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    return MCPServer, ToolError, Context


#: What uvicorn, the HTTP server the SDK's streamable HTTP transport runs, imports as it starts with its default
#: settings: its protocols and lifespan, as its config names them (``HTTP_PROTOCOLS``, ``WS_PROTOCOLS``, ``LIFESPAN``).
_UVICORN_PARTS = ("uvicorn.protocols.http.auto", "uvicorn.protocols.websockets.auto", "uvicorn.lifespan.on")


def import_sdk(transport: str) -> None:
    """Import what :func:`serve` runs on ``transport`` (the SDK's server and stdio transport; on ``http`` the HTTP
    server it runs, uvicorn): seconds on a busy machine, which inside the event loop a Ctrl-C does not cut short (there
    it only cancels the server's task, which goes on importing till its next await). The command line imports them so
    before its event loop runs, where a Ctrl-C is a KeyboardInterrupt at once."""
    _sdk()
    importlib.import_module("mcp.server.stdio")
    if transport == "http":
        importlib.import_module("uvicorn")
        for name in _UVICORN_PARTS:
            with suppress(ImportError):  # another uvicorn's layout: imported in the loop, as before
                importlib.import_module(name)


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
        server.add_tool(call_tool, structured_output=False)  # the upstream's result as it is: no output schema
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
                    tool.input_schema["additionalProperties"] = False
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


async def _catalog_names(store: AsyncToolStore, result: RouteResult) -> list[str]:
    """The gateway's names (:func:`~._mcp_forward.gateway_names`) of the result's tools."""
    by_id = await gateway_names(store)
    return [by_id.get(r.tool.id, n) for r, n in zip(result.tools, result.names)]


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
    sessions = UpstreamSessions()
    server = build_server(store, sessions=sessions, **options)  # its calls use the sessions once they are open
    # on stdio, a cancel (Ctrl-C) ends its wait for the client's next line; an SDK it cannot run on is said here
    run = (
        stdio_runner(server)
        if transport == "stdio"
        else partial(server.run_streamable_http_async, host=host, port=port)
    )
    async with sessions:
        await run()
