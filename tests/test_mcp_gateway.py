"""The gateway's call_tool end to end, through the official client SDK against the CLI's gateway on stdio and upstream
servers it starts on stdio: what a model's client may send as a call's arguments, the names a model is given for
upstream tools named as no model's API takes, and a call whose upstream dies on a session the gateway holds."""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolstore import AsyncToolStore, HashingEmbedder, InvalidInputError, McpSyncError, ToolStore
from toolstore._mcp_args import call_arguments
from toolstore._mcp_client import open_session
from toolstore._mcp_forward import forward_call
from toolstore._mcp_sessions import _ended
from toolstore._mcp_sync import Upstream, sync_mcp_stdio

from mcp_server import ODD_NAMES

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def _gateway(dsn: str, catalog: str) -> Upstream:
    """The CLI's gateway over ``catalog``, as a client starts it on stdio."""
    args = ["-m", "toolstore", "--dsn", dsn, "--embedder", "hashing-64", "-c", catalog, "serve", "mcp", "--gateway"]
    return Upstream("stdio", command=sys.executable, args=tuple(args))


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _is_error(result: Any) -> bool:
    return bool(result.is_error)


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


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        (
            '{"city": "Oslo",}',
            "a string that is not JSON (Illegal trailing comma before end of object at line 1 column 16",
        ),
        ('{"a": ' * 150 + "1" + "}" * 150, "a string that cannot be read: nested deeper than 100 levels"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "a string that cannot be read: nested deeper than 100 levels"),
        (  # json's own 'Invalid control character at' was followed by 'at line 1 ...': 'at at'
            '{"city": "Oslo\n"}',
            "a string that is not JSON (a control character inside a string (a raw tab or line break: write it as "
            "\\t or \\n) at line 1 column 15",
        ),
    ],
    ids=["trailing comma", "nested 150 deep", "nested 5,000 deep", "raw line break"],
)
def test_arguments_written_as_a_json_string_are_read_the_same_on_every_python(sent: str, said: str) -> None:
    """A trailing comma was 'Expecting property name enclosed in double quotes' (at the brace) before Python 3.13;
    an object nested 5,000 deep 'nested too deeply to read' on 3.11 and 3.12 and read on 3.13, 150 deep read on each.
    Every Python says the trailing comma as 3.13 does and refuses nesting past 100 levels."""
    with pytest.raises(InvalidInputError) as raised:
        call_arguments("get_forecast", sent)
    assert str(raised.value).startswith(f"arguments of tool 'get_forecast' are {said}"), raised.value


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


@pytest.mark.parametrize(("held", "missing"), [("session", "ClientSession._dispatcher"), ("dispatcher", "._closed")])
def test_an_sdk_without_the_session_state_the_gateway_reads_is_said_naming_its_release(held: str, missing: str) -> None:
    """Whether an upstream session's connection ended is read from the SDK's private state (the session's
    ``_dispatcher``, its ``_closed``: mcp 2.x has no public way to tell). An SDK release without it was taken for a
    session still open, each call then failing with "Connection closed" on a session never replaced; it is a
    McpSyncError naming the release and what it lacks, as the stdio server's own private lookup says."""
    from mcp import ClientSession

    async def main() -> bool:
        send, receive = anyio.create_memory_object_stream[Any](1)
        async with send, receive:
            session = ClientSession(receive, send)
            assert _ended(session) is False  # the releases toolstore is tested with have both
            if held == "session":
                del session._dispatcher
            else:
                del session._dispatcher._closed  # type: ignore[attr-defined]
            return _ended(session)

    release = re.escape(version("mcp"))
    with pytest.raises(
        McpSyncError, match=rf"^mcp {release} has no \w*{re.escape(missing)}, which toolstore reads to "
    ):
        anyio.run(main)


#: The names OpenAI's and Anthropic's APIs take for a tool.
VALID_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_the_gateway_hands_a_model_valid_unique_names_for_upstream_tools_named_otherwise_and_calls_them_back(
    dsn: str,
) -> None:
    """An upstream's tools named ``send message``, ``a.b`` beside ``a_b``, 76 characters long, or in a script without a
    valid character are stored as the upstream names them; find_tools hands each to the model under a name its API
    takes, no two alike (``a.b`` and ``a_b`` collide once made valid: both get a hash of their id), and call_tool with
    that name calls the upstream's tool by its own name. A name no tool was given that two tools' names may mean is
    refused as ambiguous, never guessed; a raw name only one tool has is that tool."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="odd") as store:
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "odd", "--variant", "odd"])
        stored = sorted(t.name for t in store.tools() if t.id.startswith("odd."))
    assert set(ODD_NAMES) <= set(stored)

    async def main() -> tuple[dict[str, str], list[tuple[str, bool, str]]]:
        async with open_session(_gateway(dsn, "odd")) as (session, _):
            found = json.loads(_text(await session.call_tool("find_tools", {"query": "look up a key", "k": 20})))
            given = {rank["id"]: rank["name"] for rank in found["ranks"]}
            assert [t["name"] for t in found["tools"]] == list(given.values())
            said = []
            for name in [*(given[f"odd.{raw}"] for raw in ODD_NAMES), "send message", "a_b"]:
                answer = await session.call_tool("call_tool", {"name": name, "arguments": {"x": 5}})
                said.append((name, _is_error(answer), _text(answer)))
        return given, said

    given, said = anyio.run(main)
    assert sorted(given) == sorted(f"odd.{name}" for name in stored)  # every tool of the catalog offered
    assert all(VALID_NAME.match(name) for name in given.values()), given
    assert len(set(given.values())) == len(given), given
    assert given["odd.send message"] == "send_message" and given["odd.查询天气"] == "tool"
    assert given["odd.a.b"] != given["odd.a_b"] and {given["odd.a.b"][:9], given["odd.a_b"][:9]} == {"odd__a_b_"}
    calls = [(given[f"odd.{raw}"], False, f"{raw} 5") for raw in ODD_NAMES]
    ambiguous = "Error executing tool call_tool: tool name 'a_b' is ambiguous (odd.a.b, odd.a_b)"
    assert said[:-1] == [*calls, ("send message", False, "send message 5")], said
    assert said[-1][:2] == ("a_b", True) and said[-1][2].startswith(ambiguous), said
