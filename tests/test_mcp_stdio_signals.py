"""Ctrl-C (SIGINT) and SIGTERM of the MCP commands: `toolstore serve mcp` on stdio ends while its client keeps stdin
open; `toolstore sync mcp` (and the library's listing) ends while its server never answers."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from terminal import controlling, drawn_until, read_all

from toolstore import HashingEmbedder, Tool, ToolStore

#: How long the server may take to answer, then to end after the signal, before it is killed and the test fails: far
#: past its time, a guard against a hang (the server waited for a line on stdin), not a timed assertion.
HANG_SECONDS = 60.0

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}


@pytest.fixture
def sig_catalog(dsn: str) -> list[str]:
    """A catalog of one tool, and the arguments of `python` that serve it on stdio."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="sig") as store:
        store.upsert([Tool(id="t.weather", name="weather", description="the weather in a city")])
    return ["-m", "toolstore", "--dsn", dsn, "--embedder", "hashing-64", "-c", "sig", "serve", "mcp"]


@pytest.fixture
def serving(sig_catalog: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """`toolstore serve mcp` on stdio, its stdin a pipe this test holds open, once it answered ``initialize``."""
    proc = subprocess.Popen(
        [sys.executable, *sig_catalog], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        if not select.select([proc.stdout], [], [], HANG_SECONDS)[0]:
            raise AssertionError(f"no answer to initialize in {HANG_SECONDS:.0f} s")
        assert json.loads(proc.stdout.readline())["id"] == 1
        yield proc
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def _ended(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The server's exit status and stderr; if it has not ended within HANG_SECONDS, it is killed and the test fails."""
    try:
        status = proc.wait(timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the server did not end in {HANG_SECONDS:.0f} s after the signal (hung)") from None
    return status, "" if proc.stderr is None else proc.stderr.read().decode(errors="replace")


def test_ctrl_c_ends_the_stdio_server_while_its_client_keeps_stdin_open(serving: subprocess.Popen[bytes]) -> None:
    """SIGINT (Ctrl-C) of a stdio server whose stdin was still open left it waiting for the
    next line (the mcp SDK reads stdin in a worker thread, which a cancel does not end), until its client wrote one or
    closed stdin; it ends, with `aborted` and exit status 130, as any command on Ctrl-C."""
    serving.send_signal(signal.SIGINT)
    status, said = _ended(serving)
    assert (status, said.splitlines()[-1:]) == (130, ["aborted"]), said


def test_sigterm_ends_the_stdio_server_while_its_client_keeps_stdin_open(serving: subprocess.Popen[bytes]) -> None:
    """A client that stops its server with SIGTERM, stdin still open, sees it end (by the signal)."""
    serving.send_signal(signal.SIGTERM)
    status, _ = _ended(serving)
    assert status == -signal.SIGTERM


def test_ctrl_c_typed_on_the_terminal_ends_the_stdio_server(sig_catalog: list[str]) -> None:
    """The same, the server run by hand on a terminal, Ctrl-C typed there: `aborted` after the echoed `^C`, 130."""
    proc, leader = controlling([sys.executable, *sig_catalog])
    os.write(leader, json.dumps(INITIALIZE).encode() + b"\n")
    drawn_until(leader, '"id":1,')  # the answer (the typed line echoed says '"id": 1,')
    os.write(leader, b"\x03")
    drawn = read_all(leader)  # to the server's end: killed, and the test failed, if it hung
    assert (_ended(proc)[0], drawn.split("^C")[-1].split()) == (130, ["aborted"]), drawn


def test_a_stdin_its_client_left_non_blocking_is_waited_on(sig_catalog: list[str]) -> None:
    """A client that left its end of the pipe non-blocking (the flag is the pipe's, shared): the server waits for each
    line, answers it, and ends when the client closes stdin."""
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    proc = subprocess.Popen([sys.executable, *sig_catalog], stdin=reader, stdout=subprocess.PIPE)
    os.close(reader)
    assert proc.stdout is not None
    try:
        with open(writer, "wb", buffering=0) as client:
            for asked in (INITIALIZE, {"jsonrpc": "2.0", "id": 2, "method": "ping"}):
                client.write(json.dumps(asked).encode() + b"\n")
                if not select.select([proc.stdout], [], [], HANG_SECONDS)[0]:
                    raise AssertionError(f"no answer to {asked['method']} in {HANG_SECONDS:.0f} s")
                answer = proc.stdout.readline()
                assert answer, f"the server ended without answering {asked['method']}: {_ended(proc)}"
                assert json.loads(answer)["id"] == asked["id"]
        assert _ended(proc)[0] == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


#: An MCP server that says it started (on stderr) and never answers ``initialize``.
SILENT_SERVER = "import sys, time; print('listening', file=sys.stderr, flush=True); time.sleep(600)"


def _listening(proc: subprocess.Popen[bytes]) -> None:
    """Wait until ``proc`` (its stderr a pipe) has started the silent server, which says so on stderr."""
    assert proc.stderr is not None
    seen = b""
    while not seen.rstrip().endswith(b"listening"):
        if not select.select([proc.stderr], [], [], HANG_SECONDS)[0]:
            raise AssertionError(f"the silent server did not start in {HANG_SECONDS:.0f} s: {seen!r}")
        line = proc.stderr.readline()
        assert line, f"ended before the silent server started: {seen!r}"
        seen += line


def test_ctrl_c_ends_a_sync_waiting_for_a_server_that_never_answers(dsn: str) -> None:
    """Ctrl-C of `toolstore sync mcp` while its server had not answered `initialize` ended, on Python 3.10, with an
    asyncio.CancelledError traceback and exit status 1 (anyio's runner cancels its task on SIGINT, and only 3.11 turns
    that back into KeyboardInterrupt); it ends with `aborted` and 130, as any command on Ctrl-C, on every Python."""
    sync = ["-m", "toolstore", "--dsn", dsn, "--embedder", "hashing-64", "-c", "sig", "sync", "mcp"]
    proc = subprocess.Popen([sys.executable, *sync, "--", sys.executable, "-c", SILENT_SERVER], stderr=subprocess.PIPE)
    try:
        _listening(proc)
        proc.send_signal(signal.SIGINT)
        status, said = _ended(proc)
    finally:
        proc.kill()
        proc.wait()
    assert (status, said.splitlines()[-1:]) == (130, ["aborted"]), said


def test_ctrl_c_of_a_library_listing_is_a_keyboard_interrupt() -> None:
    """The library's blocking listing (`fetch_stdio`) interrupted by Ctrl-C raises KeyboardInterrupt on every Python
    (on 3.10 it was asyncio.CancelledError), the event loop's cancellation its cause."""
    script = (
        "from toolstore._mcp_client import fetch_stdio\n"
        "import sys\n"
        "try:\n"
        f"    fetch_stdio(sys.executable, ['-c', {SILENT_SERVER!r}], timeout=600)\n"
        "except BaseException as exc:\n"
        "    print(type(exc).__name__, type(exc.__cause__ or exc.__context__).__name__, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _listening(proc)
        proc.send_signal(signal.SIGINT)
        status, _ = _ended(proc)
        assert proc.stdout is not None
        said = proc.stdout.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert (status, said.split()) == (0, ["KeyboardInterrupt", "CancelledError"])
