"""An MCP client for the sync and the gateway: a session to an upstream server (stdio or streamable HTTP, through the
official ``mcp`` SDK), its tools listed page by page (``tools/list`` until there is no ``nextCursor``), a blocking
listing bounded by a timeout (:func:`fetch_stdio`, :func:`fetch_http`: errors are McpSyncError), and an upstream's
failure as text the gateway's client may read (:func:`failure_text`, with how a stdio server ended). What a sync writes
of a listing is ``_mcp_sync``'s; the gateway's sessions, held open across calls, are ``_mcp_sessions``'.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio

from ._errors import InvalidInputError, McpSyncError, add_notes, url_shown
from ._interrupts import run_async
from ._mcp_stderr import ENDED, Ending, ServerStderr
from ._mcp_upstream import Upstream, check_values, client_text, expand_vars

DEFAULT_TIMEOUT = 60.0  # seconds for the whole listing: start, initialize and every page
MAX_PAGES = 10_000


@dataclass(frozen=True)
class McpListing:
    """What a server offered: its ``serverInfo.name`` and its tools as MCP JSON objects (wire form), and how it was
    reached (recorded by ``_mcp_sync.sync_listing`` for the gateway)."""

    server_name: str
    tools: list[dict[str, Any]]
    upstream: Upstream | None = None


def require_mcp() -> Any:
    try:
        import mcp
    except ImportError:  # pragma: no cover - depends on the installation
        raise McpSyncError("MCP sync needs the `mcp` package: pip install mcp") from None
    return mcp


#: The mcp SDK releases whose private attributes toolstore reads (:func:`sdk_private`): pyproject's lowest and the
#: newest tested.
SDK_TESTED = "2.0.0 to 2.3.0"


def sdk_private(obj: object, name: str, why: str) -> Any:
    """``obj``'s attribute ``name``, private to the mcp SDK, read where the SDK has no public way to do what toolstore
    does (``why``); McpSyncError naming the SDK's version installed when that release has no such attribute."""
    try:
        return getattr(obj, name)
    except AttributeError:
        try:
            installed = version("mcp")
        except PackageNotFoundError:  # pragma: no cover - an SDK imported from no installed distribution
            installed = "(version unknown)"
        sdk_class = next((c for c in type(obj).__mro__ if c.__module__.startswith("mcp.")), type(obj))
        raise McpSyncError(
            f"mcp {installed} has no {sdk_class.__name__}.{name}, which toolstore reads to {why} (the SDK has no "
            f"public way to): install an mcp release toolstore was tested with ({SDK_TESTED}), "
            "or a toolstore that supports this one"
        ) from None


@asynccontextmanager
async def open_session(
    upstream: Upstream, message_handler: Any = None, ending: Ending | None = None
) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """An initialized ``mcp.ClientSession`` to ``upstream`` and its ``initialize`` result (JSON form);
    ``message_handler`` receives the server's notifications (on the session's reader: it must not wait on the
    session). A failure of a stdio server's session whose server exited with a status other than 0 carries a note
    saying so (:func:`failure_text` shows it: the SDK says only "Connection closed"); ``ending`` is told it when the
    session has closed, however it closed (for a call that failed on it meanwhile)."""
    mcp = require_mcp()
    stderr: ServerStderr | None = None
    try:
        async with AsyncExitStack() as stack:
            if upstream.transport == "stdio":
                env = expand_vars(upstream.env, "the server's environment") or None
                stderr = ServerStderr(upstream.describe(), upstream.secrets(), env)  # its lines shown redacted, named
                stack.push_async_callback(stderr.finish)  # after the process ended (the stack unwinds backwards)
                command, args = stderr.command(upstream.command or "", upstream.command_args(), env)
                params = mcp.StdioServerParameters(command=command, args=args, env=env)
                streams = await stack.enter_async_context(mcp.stdio_client(params, errlog=stderr.file))
                stderr.started()
            else:
                streams = await stack.enter_async_context(_http_streams(upstream.url or "", upstream.headers))
            handler = {"message_handler": message_handler} if message_handler is not None else {}
            session = await stack.enter_async_context(mcp.ClientSession(streams[0], streams[1], **handler))
            init = (await session.initialize()).model_dump(by_alias=True, mode="json")
            yield session, init
    except Exception as exc:
        note_ended(exc, stderr.ended() if stderr is not None else "")
        raise
    finally:
        if ending is not None:
            ending.close(stderr.ended() if stderr is not None else "")


def note_ended(exc: BaseException, ended: str) -> None:
    """Note on ``exc`` (its :func:`leaf_error`) how its stdio server ended, for :func:`failure_text`."""
    leaf = leaf_error(exc)
    if ended and ended not in getattr(leaf, "__notes__", ()):  # PEP 678's notes (BaseException.add_note from 3.11)
        add_notes(leaf, ended)


def failure_text(exc: BaseException) -> str:
    """The first line of an upstream's failure ``exc`` (inside exception groups: :func:`leaf_error`), as the gateway's
    client may read it (:func:`client_text`), with how its stdio server ended when :func:`open_session` noted it:
    "Connection closed (the server exited with status 127)"."""
    leaf = leaf_error(exc)
    message = str(leaf).strip().splitlines()[0] if str(leaf).strip() else type(leaf).__name__
    notes = [note for note in getattr(leaf, "__notes__", ()) if str(note).startswith(ENDED)]
    return client_text(message) + "".join(f" ({note})" for note in notes)


def _http_sdk() -> tuple[Any, Any]:
    """The mcp SDK's streamable HTTP client module and its httpx client factory."""
    require_mcp()
    from mcp.client import streamable_http
    from mcp.shared._httpx_utils import create_mcp_http_client

    return streamable_http, create_mcp_http_client


def _http_streams(url: str, headers: Mapping[str, str]) -> Any:
    streamable_http, create_mcp_http_client = _http_sdk()
    headers = expand_vars(headers, "a header")

    @asynccontextmanager
    async def streams() -> AsyncIterator[Any]:
        async with create_mcp_http_client(headers=dict(headers)) as http:
            async with streamable_http.streamable_http_client(url, http_client=http) as found:
                yield found

    return streams()


async def list_upstream(upstream: Upstream) -> McpListing:
    """Initialize, then page through ``tools/list`` until there is no ``nextCursor``."""
    async with open_session(upstream) as (session, init):
        server_name = str((init.get("serverInfo") or {}).get("name") or "").strip()
        return McpListing(server_name, await list_session_tools(session), upstream)


async def list_session_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool an open session's server lists (JSON form), page by page until there is no ``nextCursor``."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await _list_page(session, cursor)
        tools.extend(page.get("tools") or [])
        cursor = page.get("nextCursor")
        if not cursor:
            return tools
        if cursor in seen:
            raise McpSyncError(f"server repeated the tools/list cursor {cursor!r}; stopping")
        seen.add(cursor)
    raise McpSyncError(f"server returned more than {MAX_PAGES} pages of tools")


async def _list_page(session: Any, cursor: str | None) -> dict[str, Any]:
    if cursor is None:
        result = await session.list_tools()
    else:
        result = await session.list_tools(params=require_mcp().types.PaginatedRequestParams(cursor=cursor))
    page: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return page


async def list_tools_stdio(
    command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None
) -> McpListing:
    """Start ``command args`` as an MCP server on stdio and list its tools (the process is stopped after)."""
    return await list_upstream(Upstream("stdio", command=command, args=tuple(args), env=dict(env or {})))


async def list_tools_http(url: str, *, headers: Mapping[str, str] | None = None) -> McpListing:
    """List the tools of a streamable-HTTP MCP server at ``url`` (``headers`` e.g. for authorization)."""
    return await list_upstream(Upstream("http", url=url, headers=dict(headers or {})))


def leaf_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups raised by anyio task groups."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _run(where: str, coro_fn: Any, *args: Any, timeout: float, **kwargs: Any) -> McpListing:
    """``coro_fn(*args, **kwargs)`` run to its end within ``timeout``, its errors McpSyncError. What it imports of the
    SDK its caller imports before (seconds on a busy machine): an import inside the event loop went on after a Ctrl-C,
    which there only cancels the task, at its next await."""

    async def bounded() -> McpListing:
        with anyio.fail_after(timeout if timeout and timeout > 0 else math.inf):
            result: McpListing = await coro_fn(*args, **kwargs)
            return result

    try:
        return run_async(bounded)  # a Ctrl-C a KeyboardInterrupt on Python 3.10 too
    except McpSyncError:
        raise
    except Exception as exc:
        leaf = leaf_error(exc)
        if isinstance(leaf, McpSyncError):
            raise leaf from None
        if isinstance(leaf, TimeoutError):
            raise McpSyncError(f"{where}: no complete tools/list within {timeout:g} s") from None
        # a server's error (or a command not found) may quote a secret, an HTTP client's the URL: as the gateway's
        raise McpSyncError(f"{where}: {failure_text(exc)}") from None  # nor its cause, which quotes it as it is


def fetch_stdio(
    command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> McpListing:
    """Blocking :func:`list_tools_stdio` with a time limit; errors are :class:`McpSyncError`."""
    if not command:
        raise InvalidInputError("an MCP server command is required")
    upstream = Upstream("stdio", command=command, args=tuple(args), env=dict(env or {}))
    check_values(upstream)
    require_mcp()  # before the event loop (_run)
    return _run(_server_named(upstream), list_tools_stdio, command, list(args), env=env, timeout=timeout)


def fetch_http(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> McpListing:
    """Blocking :func:`list_tools_http` with a time limit; errors are :class:`McpSyncError`."""
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"MCP server URL must start with http:// or https://, got {url_shown(url)!r}")
    upstream = Upstream("http", url=url, headers=dict(headers or {}))
    check_values(upstream)
    _http_sdk()  # before the event loop (_run)
    return _run(_server_named(upstream), list_tools_http, url, headers=headers, timeout=timeout)


def _server_named(upstream: Upstream) -> str:
    """How a sync's failure names its server: :meth:`Upstream.describe`, as the gateway's log lines and a stdio
    server's stderr lines do (its transport left out): a command with its arguments, a secret flag's value and what
    else looks like a credential redacted, or a URL without credentials or query, with its header names; never an env
    or header value."""
    return f"MCP server {upstream.describe().partition(': ')[2]}"
