"""The MCP server's stdin on the stdio transport, read so that a cancel ends the wait for the client's next line.

The mcp SDK's ``stdio_server`` reads stdin in a worker thread blocked in ``read()``, which anyio does not abandon
when the server is cancelled: a server sent SIGINT (Ctrl-C) while its client kept stdin open waited for that client's
next line, or for stdin's end, before it ended. Here the event loop waits for stdin to be readable (a pipe, a socket or
a terminal), then reads what is there, and a cancel ends that wait at once. As the SDK does, the server reads its own
duplicate of stdin while descriptor 0 points at the null device (what it runs reads no end of the client's lines), and
descriptor 0 is put back on the way out. Where the loop cannot wait on stdin (Windows; stdin a file or a device, whose
reads do not wait) the SDK reads it as it does.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

import anyio

from ._mcp_client import require_mcp, sdk_private

_CHUNK = 65536


class _Lines:
    """The lines read from descriptor ``fd`` (each with its ``\\n``, the last one without if the input ends without
    one), decoded as UTF-8 with errors replaced, as the SDK reads them; the wait for more is the event loop's. Each
    byte read is copied into the buffer once and looked at once for the end of its line, however long the line and
    however many reads it takes (a line read whole by joining and scanning again the bytes held at every read took
    time growing with the square of its length)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._scanned = 0  # how many of the first bytes of _pending hold no "\n"
        self._ended = False

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while (end := self._pending.find(b"\n", self._scanned)) < 0 and not self._ended:
            self._scanned = len(self._pending)
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:  # stdin left non-blocking by the client, and read by another meanwhile
                continue
            self._pending += chunk
            self._ended = not chunk
        if not self._pending:
            raise StopAsyncIteration
        cut = end + 1 if end >= 0 else len(self._pending)
        line = self._pending[:cut].decode("utf-8", errors="replace")
        del self._pending[:cut]  # a bytearray drops its first bytes without moving the rest
        self._scanned = 0
        return line


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait for ``fd`` to be readable: a pipe, a socket or a terminal (epoll refuses files
    and most devices; Windows' loop waits on sockets only)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


@contextmanager
def _diverted_stdin() -> Iterator[int]:
    """A duplicate of stdin (not inherited by child processes) to read the client's lines from, with descriptor 0
    pointing at the null device meanwhile; 0 is put back after. Where it cannot be diverted, 0 itself."""
    try:
        own = os.dup(0)
    except OSError:
        yield 0
        return
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
    except OSError:
        os.close(own)
        yield 0
        return
    try:
        yield own
    finally:
        with suppress(OSError):
            os.dup2(own, 0)
        os.close(own)


def stdio_runner(server: Any) -> Callable[[], Awaitable[None]]:
    """What runs the SDK's ``MCPServer`` ``server`` on stdin and stdout until its client ends stdin or it is cancelled.
    On stdin the loop can wait on, that is the low-level server the ``MCPServer`` holds, private to the SDK (mcp 2.0 to
    2.3 have no public way to run it on other streams), looked up now: McpSyncError naming the SDK's release when that
    has none, raised before the caller enters the task groups it serves in (whose exception groups would wrap it)."""
    if not _pollable(0):
        return cast("Callable[[], Awaitable[None]]", server.run_stdio_async)
    require_mcp()
    from mcp.server.stdio import stdio_server

    # what the SDK's run_stdio_async runs on its own stdin: the SDK has no public way to run an MCPServer on streams
    lowlevel = sdk_private(server, "_lowlevel_server", "run the MCP server on its own stdin reader")

    async def run() -> None:
        with _diverted_stdin() as fd:
            async with stdio_server(stdin=_Lines(fd)) as (read_stream, write_stream):  # type: ignore[arg-type]
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    return run
