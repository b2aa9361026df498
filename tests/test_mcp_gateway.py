"""The gateway's call_tool end to end, through the official client SDK against the CLI's gateway on stdio and upstream
servers it starts on stdio: what a model's client may send as a call's arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolstore import AsyncToolStore, HashingEmbedder, InvalidInputError, ToolStore
from toolstore._mcp_server import forward_call
from toolstore._mcp_sync import Upstream, open_session, sync_mcp_stdio

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def _gateway(dsn: str, catalog: str) -> Upstream:
    """The CLI's gateway over ``catalog``, as a client starts it on stdio."""
    args = ["-m", "toolstore", "--dsn", dsn, "--embedder", "hashing-64", "-c", catalog, "serve", "mcp", "--gateway"]
    return Upstream("stdio", command=sys.executable, args=tuple(args))


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def test_call_tool_takes_arguments_written_as_a_json_string_and_names_the_tool_when_they_are_not_an_object(
    dsn: str,
) -> None:
    """Some clients send a call's arguments as the model wrote them, a JSON string: one holding an object is that
    object; one that is not JSON, or JSON that is not an object, is an error naming the tool and what is wrong (the
    SDK's pydantic said only 'Input should be a valid dictionary', naming neither), and nothing is sent upstream."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="args") as store:
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "weather"])

    async def main() -> list[tuple[bool, str]]:
        said = []
        async with open_session(_gateway(dsn, "args")) as (session, _):
            for arguments in [
                '{"city": "Paris", "days": 2}',
                " null ",
                '{"city": "Oslo"',
                "",
                '"Paris"',
                "[1, 2]",
                [1, 2],
                7,
            ]:
                sent = {"name": "get_forecast", "arguments": arguments}
                answer = await session.call_tool("call_tool", sent)
                said.append((_is_error(answer), _text(answer)))
        return said

    said = anyio.run(main)
    assert said[0] == (False, "sunny in Paris for 2 days")
    assert said[1][0] and "city" in said[1][1]  # no arguments: the upstream's own error for its required one
    tool = "Error executing tool call_tool: arguments of tool 'get_forecast'"
    assert said[2:] == [
        (
            True,
            f"{tool} are a string that is not JSON (Expecting ',' delimiter at line 1 column 16 of "
            '\'{"city": "Oslo"\'): send a JSON object',
        ),
        (True, f"{tool} are a string that is not JSON (Expecting value at line 1 column 1 of ''): send a JSON object"),
        (True, f"{tool} must be a JSON object, got a string that holds a string"),
        (True, f"{tool} must be a JSON object, got an array"),  # the SDK parsed the string's array
        (True, f"{tool} must be a JSON object, got an array"),
        (True, f"{tool} must be a JSON object, got a number"),
    ], said


def test_forward_call_reads_arguments_written_as_a_json_string(dsn: str) -> None:
    """The library's forward_call takes what call_tool takes: an object, or one written as a JSON string."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="args") as store:
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "weather"])

    async def main() -> str:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="args") as store:
            with pytest.raises(InvalidInputError, match="arguments of tool 'get_forecast' are a string that is not"):
                await forward_call(store, "get_forecast", "{city}")
            return _text(await forward_call(store, "get_forecast", json.dumps({"city": "Rome"}), timeout=30))

    assert anyio.run(main) == "sunny in Rome for 3 days"


def test_a_gateway_call_whose_stdio_upstream_dies_on_an_open_session_says_its_exit_status(dsn: str) -> None:
    """An upstream that exits while a call waits on the session the gateway holds (opened by an earlier call): the SDK
    says only "Connection closed", and only a session's opening said the status before; the call's error says it now
    (a status of 0 is not said), and the next call opens a new session."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="dies") as store:
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "faulty", "--variant", "faulty"])

    async def main() -> list[tuple[bool, str]]:
        said = []
        async with open_session(_gateway(dsn, "dies")) as (session, _):
            for name, arguments in [("nap", {"seconds": 0}), ("crash", {"status": 3}), ("nap", {"seconds": 0})]:
                answer = await session.call_tool("call_tool", {"name": name, "arguments": arguments})
                said.append((_is_error(answer), _text(answer)))
            answer = await session.call_tool("call_tool", {"name": "crash", "arguments": {"status": 0}})
            said.append((_is_error(answer), _text(answer)))
        return said

    failed = "Error executing tool call_tool: upstream 'faulty' failed on 'crash': Connection closed"
    assert anyio.run(main) == [
        (False, "slept 0.0"),
        (True, f"{failed} (the server exited with status 3)"),
        (False, "slept 0.0"),
        (True, failed),
    ]
