"""The MCP listing (`toolstore sync mcp`, the library's fetch_stdio and fetch_http) imports the mcp SDK before its
event loop runs: imported inside it (seconds for the SDK's models on a busy machine), a Ctrl-C only cancelled the
listing's task, which went on importing till its next await: `sync mcp --url` interrupted 3 s in ended 3 to 5 s
later."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from toolstore import HashingEmbedder, Tool, ToolStore

#: How long a server may take to end after SIGINT before the test fails: a guard against a hang, not a timed assertion.
HANG_SECONDS = 120.0

#: Records the SDK modules imported while an event loop runs, then lists a server that cannot be reached.
LISTING = """
import asyncio, json, socket, sys

HEAVY = {"mcp", "mcp.client.stdio", "mcp.client.streamable_http", "mcp.shared._httpx_utils", "httpx"}
in_loop = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY:
            try:
                asyncio.get_running_loop()
                in_loop.append(name)
            except RuntimeError:
                pass
        return None

sys.meta_path.insert(0, Watch())
from toolstore._errors import McpSyncError
from toolstore._mcp_client import fetch_http, fetch_stdio

closed = socket.socket()
closed.bind(("127.0.0.1", 0))
port = closed.getsockname()[1]
closed.close()  # nothing listens there: refused at once
try:
    if sys.argv[1] == "http":
        fetch_http(f"http://127.0.0.1:{port}/mcp", timeout=60)
    else:
        fetch_stdio(sys.executable, ["-c", "pass"], timeout=60)  # ends without answering
except McpSyncError:
    pass
print(json.dumps(in_loop))
"""


def imported_in_the_loop(transport: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", LISTING, transport], capture_output=True, text=True, timeout=300, check=True
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_an_http_listing_imports_the_sdk_before_its_event_loop() -> None:
    assert imported_in_the_loop("http") == []


def test_a_stdio_listing_imports_the_sdk_before_its_event_loop() -> None:
    assert imported_in_the_loop("stdio") == []


#: Runs the command line (its arguments after the first, the file to write to), writing on exit the modules of the
#: mcp SDK and the HTTP server it runs that were imported while an event loop ran.
SERVING = """
import asyncio, json, sys

SERVERS = ("mcp", "mcp_types", "uvicorn", "starlette", "sse_starlette")
in_loop = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SERVERS and name not in sys.modules:
            try:
                asyncio.get_running_loop()
                in_loop.append(name)
            except RuntimeError:
                pass
        return None

sys.meta_path.insert(0, Watch())
written, sys.argv = sys.argv[1], ["toolstore", *sys.argv[2:]]
try:
    from toolstore.cli import main

    main()
finally:
    with open(written, "w") as out:
        json.dump(in_loop, out)
"""


def _serve_args(dsn: str) -> list[str]:
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="sdk") as store:
        store.upsert([Tool(id="t.weather", name="weather", description="the weather in a city")])
    return ["--dsn", dsn, "--embedder", "hashing-64", "-c", "sdk", "serve", "mcp"]


def test_a_stdio_server_imports_the_sdk_before_its_event_loop(dsn: str, tmp_path: Path) -> None:
    """`toolstore serve mcp` on stdio, whose client closes stdin at once: it ends, and nothing of the SDK was imported
    while its event loop ran, where a Ctrl-C only cancels the server's task."""
    written = tmp_path / "in_loop.json"
    done = subprocess.run(
        [sys.executable, "-c", SERVING, str(written), *_serve_args(dsn)],
        input=b"",
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert json.loads(written.read_text()) == []


def test_an_http_server_imports_the_sdk_and_its_http_server_before_its_event_loop(dsn: str, tmp_path: Path) -> None:
    """`toolstore serve mcp --transport http`, sent SIGINT once it accepts connections: nothing of the SDK or of the
    HTTP server it runs (uvicorn, starlette) was imported while its event loop ran."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    written = tmp_path / "in_loop.json"
    args = [*_serve_args(dsn), "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVING, str(written), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        given_up = time.monotonic() + HANG_SECONDS
        while not _accepts(port):
            assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")
            assert time.monotonic() < given_up, f"the server did not listen in {HANG_SECONDS:.0f} s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, said = proc.communicate(timeout=HANG_SECONDS)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, said.decode(errors="replace")
    assert json.loads(written.read_text()) == [], said.decode(errors="replace")


def _accepts(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) == 0
