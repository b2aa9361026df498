"""``toolstore serve mcp``: the catalog as an MCP server (``find_tools``), or a gateway (``call_tool`` too)."""

from __future__ import annotations

import click

from .._async_store import AsyncToolStore
from .._input import MAX_K
from .._interrupts import run_async
from .._mcp_forward import DEFAULT_CALL_TIMEOUT
from .._mcp_server import check_address, import_sdk, serve
from .app import command, embedder_option, options, store_dsn
from .params import Seconds


def _host(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--host, not empty: uvicorn (and check_address) take '' for every interface, which a script's unset variable
    should not open."""
    if not value.strip():
        raise click.BadParameter("it is empty: give an address (127.0.0.1; 0.0.0.0 or :: for every interface)")
    return value


@click.group("serve")
def serve_group() -> None:
    """Serve the catalog to agents."""


@command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (the client starts the server) or http (streamable HTTP at http://HOST:PORT/mcp).",
)
@click.option("--host", default="127.0.0.1", show_default=True, callback=_host, help="Address for --transport http.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="Port for --transport http."
)
@click.option("--gateway", is_flag=True, help="Also expose call_tool, forwarding to the synced upstream servers.")
@click.option(
    "-k", "--k", "k", default=8, show_default=True, type=click.IntRange(1, MAX_K), help="find_tools' default k."
)
@click.option(
    "--call-timeout",
    default=DEFAULT_CALL_TIMEOUT,
    show_default=True,
    type=Seconds(),
    help="Seconds per forwarded call.",
)
@click.option(
    "--no-session-log",
    is_flag=True,
    help="With --gateway: do not record forwarded calls in the session log (one session per client connection).",
)
@click.pass_context
def serve_mcp(
    ctx: click.Context,
    transport: str,
    host: str,
    port: int,
    gateway: bool,
    k: int,
    call_timeout: float,
    no_session_log: bool,
) -> None:
    """Run an MCP server over the catalog (-c): find_tools(query, k?, token_budget?, abstain?), and with --gateway
    call_tool(name, arguments) for tools synced by `toolstore sync mcp`, each call recorded in the session log
    (find_tools then ranks what usually comes next higher). Streamable HTTP serves at /mcp."""
    given = [
        f"--{name}" for name in ("host", "port") if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT
    ]
    if transport == "stdio" and given:  # else a server meant for the network waits on this terminal's stdin
        verb = "go" if len(given) > 1 else "goes"
        raise click.UsageError(f"{' and '.join(given)} {verb} with --transport http; stdio serves on stdin and stdout")
    opts = options(ctx)
    store = AsyncToolStore(
        store_dsn(ctx, create=False),
        catalog=opts["catalog"],
        schema=opts["schema"],
        embedder=embedder_option(ctx),
        create=False,
        statement_timeout=opts["statement_timeout"],
        transaction_pooling=opts["transaction_pooling"],
    )

    async def main() -> None:
        async with store:
            await store.info(counts=False)  # an unknown catalog fails now, not on the first request
            await serve(
                store,
                transport=transport,
                host=host,
                port=port,
                gateway=gateway,
                k=k,
                call_timeout=call_timeout,
                session_log=gateway and not no_session_log,
            )

    import_sdk(transport)  # before the event loop, where a Ctrl-C would only cancel its task (an SDK missing: said now)
    if transport == "http":
        check_address(host, port)  # an unknown host or a port in use: one line, before the note
    if transport == "http" and not opts.get("quiet"):
        click.echo(f"toolstore MCP server on http://{host}:{port}/mcp (catalog {store.catalog!r})", err=True)
    run_async(main)  # Ctrl-C: a KeyboardInterrupt, on Python 3.10 too


serve_group.add_command(serve_mcp)
COMMANDS = (serve_group,)
