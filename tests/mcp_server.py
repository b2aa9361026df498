"""A small MCP server for the ingestion tests, written with the official SDK (FastMCP / MCPServer).

    python tests/mcp_server.py [--name NAME] [--variant base|changed|fewer] [--page-size N] [--http PORT] [--chatty]

``--name`` is the server name (``serverInfo.name``, the default provider). ``--variant changed`` edits
the description of ``get_forecast``; ``--variant fewer`` drops ``list_alerts``; ``--variant faulty`` adds ``refuse``
(answers a JSON-RPC error, as TypeScript SDK servers do for bad arguments), ``nap`` (sleeps), ``exit_soon``
(answers, then the process exits) and ``crash`` (exits at once with a status, answering nothing); ``--variant
changing`` adds ``change_tools``, which swaps ``list_alerts`` for ``late_news`` and sends
``notifications/tools/list_changed``; ``--variant odd`` adds tools with names a model's API refuses
(:data:`ODD_NAMES`). ``--chatty`` writes to stderr, before it serves, its command line, the value
of each env variable named ``CHATTY_*``, bytes that are not UTF-8, a line of 200,000 characters and 5,000 short lines
(more than a pipe holds), and ``bye`` without a newline when it exits.
``--page-size`` splits ``tools/list`` into pages linked by ``nextCursor`` (mcp 2.x). ``--http`` serves streamable
HTTP on 127.0.0.1:PORT at ``/mcp`` instead of stdio.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
import time
from typing import Any

try:  # mcp 2.x
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context, FastMCP  # type: ignore[no-redef]


def search(query: str, limit: int = 10) -> str:
    """Search the knowledge base for documents matching a query."""
    return f"results for {query} (max {limit})"


def get_forecast(city: str, days: int = 3) -> str:
    """Weather forecast for a city over the next few days."""
    return f"sunny in {city} for {days} days"


def list_alerts(region: str) -> str:
    """Active severe weather alerts (storms, floods) for a region."""
    return f"no alerts in {region}"


def refuse(x: int = 0) -> str:
    """Always refused with a JSON-RPC error (invalid params)."""
    from mcp.shared import exceptions

    error = getattr(exceptions, "MCPError", None) or exceptions.McpError  # type: ignore[attr-defined]
    try:
        raise error(code=-32602, message=f"invalid arguments for refuse: {x}")
    except TypeError:  # mcp 1.x: McpError(ErrorData)
        from mcp.types import ErrorData

        raise error(ErrorData(code=-32602, message=f"invalid arguments for refuse: {x}")) from None


def nap(seconds: float = 1.0) -> str:
    """Sleep for a while, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


def exit_soon() -> str:
    """Answer, then exit the server process."""
    threading.Timer(0.3, os._exit, (0,)).start()
    return f"bye from {os.getpid()}"


def crash(status: int = 3) -> str:
    """Exit the server process at once with ``status``, answering nothing."""
    os._exit(status)


#: ``--variant odd``'s tools: names a model's API refuses (OpenAI and Anthropic take ``^[a-zA-Z0-9_-]{1,64}$``), each
#: answering its own name and ``x``.
ODD_NAMES = {
    "send message": "Send a chat message to a channel",
    "a.b": "Look up a dotted key",
    "a_b": "Look up an underscored key",
    "fetch_" + "very_long_" * 7 + "report": "Fetch the very long quarterly report",
    "查询天气": "Weather in Chinese",
}


def _echo(label: str) -> Any:
    def echo(x: int = 0) -> str:
        return f"{label} {x}"

    return echo


def build(name: str, variant: str, page_size: int) -> Any:
    server_class: Any = FastMCP
    if page_size > 0 and hasattr(FastMCP, "_handle_list_tools"):
        server_class = _paginating(FastMCP, page_size)
    server = server_class(name)
    server.add_tool(search)
    forecast_doc = "Weather forecast for a city, hour by hour, for up to 10 days." if variant == "changed" else None
    server.add_tool(get_forecast, description=forecast_doc)
    if variant != "fewer":
        server.add_tool(list_alerts, title="Weather alerts")
    if variant == "faulty":
        for tool in (refuse, nap, exit_soon, crash):
            server.add_tool(tool)
    if variant == "odd":
        for odd_name, doc in ODD_NAMES.items():
            server.add_tool(_echo(odd_name), name=odd_name, description=doc)
    if variant == "changing":

        async def change_tools(ctx: Context) -> str:  # type: ignore[type-arg]
            """Offer late_news instead of list_alerts, and say so (notifications/tools/list_changed)."""
            server.remove_tool("list_alerts")
            server.add_tool(late_news)
            await ctx.session.send_tool_list_changed()
            return "changed"

        server.add_tool(change_tools)
    return server


def late_news(topic: str) -> str:
    """The latest news on a topic (offered once change_tools ran)."""
    return f"news about {topic}"


def _paginating(base: Any, page_size: int) -> Any:
    """A server class whose ``tools/list`` answers ``page_size`` tools per page with a ``nextCursor``."""
    from mcp.types import ListToolsResult

    class Paginating(base):  # type: ignore[misc, valid-type]
        async def _handle_list_tools(self, ctx: Any, params: Any) -> Any:
            tools = await self.list_tools()
            start = int(params.cursor) if params is not None and params.cursor else 0
            end = start + page_size
            return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    return Paginating


def chatter() -> None:
    """What ``--chatty`` writes to stderr (as many servers log their start), and ``bye`` at exit."""
    err = sys.stderr.buffer
    err.write(f"started as {' '.join(sys.argv)}\n".encode())
    for name in sorted(n for n in os.environ if n.startswith("CHATTY_")):
        err.write(f"{name} is {os.environ[name]}\n".encode())
    err.write(b"bad bytes \xff\xfe end\n" + b"x" * 200_000 + b"\n")
    err.write(b"".join(b"noise %d\n" % i for i in range(5000)))
    err.flush()
    atexit.register(lambda: (err.write(b"bye"), err.flush()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="weather")
    parser.add_argument("--variant", choices=["base", "changed", "fewer", "faulty", "changing", "odd"], default="base")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on this port")
    parser.add_argument("--chatty", action="store_true", help="write secrets and much else to stderr")
    parser.add_argument("--api-key", help="a secret flag: the server exits when it is an unexpanded ${VAR}")
    args = parser.parse_args()
    if args.api_key is not None and "${" in args.api_key:
        sys.exit(f"--api-key was not expanded: {args.api_key}")
    if args.chatty:
        chatter()
    server = build(args.name, args.variant, args.page_size)
    if args.api_key is not None:
        key = args.api_key

        def key_suffix() -> str:
            """The last three characters of the API key this server was started with."""
            return key[-3:]

        server.add_tool(key_suffix)
    if args.http:
        try:
            server.run("streamable-http", host="127.0.0.1", port=args.http)
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host, server.settings.port = "127.0.0.1", args.http
            server.run("streamable-http")
    else:
        server.run()


if __name__ == "__main__":
    main()
