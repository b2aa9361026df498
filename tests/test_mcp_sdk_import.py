"""The MCP listing (`toolstore sync mcp`, the library's fetch_stdio and fetch_http) imports the mcp SDK before its
event loop runs: imported inside it (seconds for the SDK's models on a busy machine), a Ctrl-C only cancelled the
listing's task, which went on importing till its next await: `sync mcp --url` interrupted 3 s in ended 3 to 5 s
later."""

from __future__ import annotations

import json
import subprocess
import sys

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
