"""The stdio MCP server's own stdin reader (``_mcp_stdin``), without a server process: lines read whole however the
reads cut them."""

from __future__ import annotations

import os
import re
import threading
from functools import partial
from importlib.metadata import version
from typing import Any, cast

import anyio
import pytest

from toolstore import McpSyncError, _mcp_server, _mcp_stdin

#: What each read may take at most in the test: a prime, so the reads cut lines, and UTF-8 characters, anywhere.
READ_AT_MOST = 997


def _lines_of(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], int]:
    """The lines ``_Lines`` reads from a pipe a thread writes ``data`` to, then closes; each read at most
    :data:`READ_AT_MOST` bytes. Also how many reads it took."""
    reads = 0
    real_read = os.read

    def read(fd: int, size: int) -> bytes:
        nonlocal reads
        reads += 1
        return real_read(fd, min(size, READ_AT_MOST))

    monkeypatch.setattr(_mcp_stdin.os, "read", read)
    r, w = os.pipe()

    def write() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(w, view) :]
        finally:
            os.close(w)

    writer = threading.Thread(target=write)
    got: list[str] = []

    async def main() -> None:
        async for line in _mcp_stdin._Lines(r):
            got.append(line)

    writer.start()
    try:
        anyio.run(main)
    finally:
        writer.join()
        os.close(r)
    return got, reads


def test_a_long_line_split_across_many_reads_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON-RPC line of a megabyte read in a thousand pieces, some cut inside a UTF-8 character, then two short lines
    in one read and a last line without its newline: each line comes out once, whole, in order."""
    text = "é" * 300_000 + "x" * 400_000
    long_line = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"q":"' + text + '"}}\n'
    data = (long_line + "second\nthird\nlast, no newline").encode()
    lines, reads = _lines_of(data, monkeypatch)
    assert reads > len(long_line.encode()) // READ_AT_MOST  # the line came in that many pieces
    assert lines == [long_line, "second\n", "third\n", "last, no newline"]


def test_an_empty_input_and_empty_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _lines_of(b"", monkeypatch)[0] == []
    assert _lines_of(b"\n\nx\n", monkeypatch)[0] == ["\n", "\n", "x\n"]


def test_a_broken_utf8_byte_is_replaced_as_the_sdk_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _lines_of(b"a\xffb\n", monkeypatch)[0] == ["a\ufffdb\n"]


def test_an_sdk_without_the_low_level_server_toolstore_runs_is_said_naming_its_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stdio server runs the low-level server an ``MCPServer`` holds (``_lowlevel_server``, private to the SDK: mcp
    2.0 to 2.3 have no public way to run one on streams of toolstore's). Where an SDK release has none, ``serve`` raises
    a McpSyncError naming the release and what is missing (the command line's one line, exit 1) before stdin is
    touched: not an AttributeError from inside the server, in an exception group (a traceback)."""
    from mcp.server.mcpserver import MCPServer

    class Without(MCPServer):  # type: ignore[misc, type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            assert callable(self._lowlevel_server.run)  # the releases toolstore is tested with have it
            del self._lowlevel_server

    sdk = _mcp_server._sdk()
    monkeypatch.setattr(_mcp_server, "_sdk", lambda: (Without, *sdk[1:]))
    monkeypatch.setattr(_mcp_stdin, "_pollable", lambda fd: True)  # as for a pipe: the path that needs it
    release = re.escape(version("mcp"))
    with pytest.raises(McpSyncError, match=rf"^mcp {release} has no MCPServer\._lowlevel_server, which toolstore "):
        anyio.run(partial(_mcp_server.serve, cast(Any, object()), transport="stdio"))
