"""The stdio MCP server's own stdin reader (``_mcp_stdin``), without a server process: lines read whole however the
reads cut them."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

from toolstore import _mcp_stdin

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
