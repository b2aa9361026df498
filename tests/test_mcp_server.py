"""The MCP server and gateway end to end, through the official client SDK: find_tools, call_tool forwarded to
FastMCP upstream servers the tests start (stdio and streamable HTTP on loopback), and bad input answered with MCP
errors while the server stays up."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import mcp
import mcp.types
import pytest
from test_ingest import CHATTY_ARGS, CHATTY_ENV, CHATTY_SECRETS, chatty_lines

from toolstore import AsyncToolStore, HashingEmbedder, McpSyncError, Tool, ToolStore
from toolstore._mcp_client import open_session
from toolstore._mcp_forward import CallRecord, forward_call
from toolstore._mcp_sync import (
    McpListing,
    Upstream,
    fetch_stdio,
    sync_listing,
    sync_mcp_http,
    sync_mcp_stdio,
)
from toolstore.cli.route import result_json

SERVER = str(Path(__file__).with_name("mcp_server.py"))
EMBEDDER = "hashing-64"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"server on port {port} did not start")
            time.sleep(0.1)


def _against_http_gateway(dsn: str, catalog: str, check: Callable[[str], Awaitable[None]]) -> None:
    """``check(url)`` run against ``serve mcp --gateway`` of ``catalog``, started on a free port of loopback over
    streamable HTTP, stopped after."""
    port = _free_port()
    args = ["-m", "toolstore", "--dsn", dsn, "--embedder", EMBEDDER, "-c", catalog, "serve", "mcp", "--gateway"]
    proc = subprocess.Popen(
        [sys.executable, *args, "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc)
        anyio.run(check, f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def http_upstream() -> Iterator[str]:
    """tests/mcp_server.py as a streamable-HTTP server named "web" on loopback."""
    port = _free_port()
    cmd = [sys.executable, SERVER, "--name", "web", "--http", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def gateway_catalog(dsn: str, http_upstream: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A catalog synced from three upstreams: weather and docs over stdio (same tool names), web over HTTP, plus
    a provider whose server is down and one whose server never answers."""
    monkeypatch.setenv("TOOLSTORE_TEST_TOKEN", "s3cret")
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="gw") as store:
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "weather"])
        sync_mcp_stdio(store, sys.executable, [SERVER, "--name", "docs"])
        sync_mcp_http(store, http_upstream, headers={"X-Token": "${TOOLSTORE_TEST_TOKEN}"})
        ghost = {"name": "ghost_lookup", "description": "Look up a ghost", "inputSchema": {"type": "object"}}
        down = Upstream("http", url=f"http://127.0.0.1:{_free_port()}/mcp")
        sync_listing(store, McpListing("ghost", [ghost], down))
        sleepy = {"name": "sleepy_nap", "description": "Take a nap", "inputSchema": {"type": "object"}}
        hang = Upstream("stdio", command=sys.executable, args=("-c", "import time; time.sleep(60)"))
        sync_listing(store, McpListing("sleepy", [sleepy], hang))
    return dsn


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _is_error(result: Any) -> bool:
    return bool(result.is_error)


#: The gateway's --call-timeout in the session checks: what a hanging upstream is given, and also what an upstream's
#: first call has for its start (a Python process importing the mcp SDK: over 3 s on a loaded 2-core machine).
CALL_TIMEOUT = "10"


async def _session_checks(upstream: Upstream) -> None:
    async with open_session(upstream) as (session, init):
        assert init["serverInfo"]["name"] == "toolstore"
        listed = await session.list_tools()
        assert sorted(t.name for t in listed.tools) == ["call_tool", "find_tools"]

        found = await session.call_tool("find_tools", {"query": "weather forecast for a city", "k": 4})
        data = json.loads(_text(found))
        assert data["version"] == 1 and len(data["tools"]) == 4
        for tool in data["tools"]:
            mcp.types.Tool.model_validate(tool)  # each one is an MCP tool definition
        names = [t["name"] for t in data["tools"]]
        assert "weather__get_forecast" in names and "docs__get_forecast" in names  # namespaced: names collide
        assert [r["name"] for r in data["ranks"]] == names and all("signals" in r for r in data["ranks"])

        answer = await session.call_tool("call_tool", {"name": "weather__get_forecast", "arguments": {"city": "Paris"}})
        assert not _is_error(answer) and _text(answer) == "sunny in Paris for 3 days"
        answer = await session.call_tool("call_tool", {"name": "web__search", "arguments": {"query": "pg"}})
        assert _text(answer) == "results for pg (max 10)"  # forwarded over HTTP, ${VAR} header expanded

        # bad input: MCP errors, and the server stays up
        for name, arguments, message in [
            ("find_tools", {"query": "x", "k": "many"}, "k"),
            ("find_tools", {"query": "x", "k": 0}, "k must be an integer from 1 to 1000"),
            ("find_tools", {"query": ""}, "query"),
            ("call_tool", {"name": "nope", "arguments": {}}, "no tool named 'nope'"),
            ("call_tool", {"name": "get_forecast", "arguments": {}}, "ambiguous"),
            ("call_tool", {"name": "weather__get_forecast", "arguments": {"days": 2}}, "city"),
            ("call_tool", {"name": "ghost_lookup", "arguments": {}}, "upstream 'ghost' failed on 'ghost_lookup': "),
        ]:
            bad = await session.call_tool(name, arguments)
            assert _is_error(bad) and message in _text(bad), (name, arguments, _text(bad))
        start = time.monotonic()
        slow = await session.call_tool("call_tool", {"name": "sleepy_nap", "arguments": {}})
        assert _is_error(slow) and f"did not answer 'sleepy_nap' within {CALL_TIMEOUT} s" in _text(slow)
        assert time.monotonic() - start < 3 * float(CALL_TIMEOUT)
        again = await session.call_tool("call_tool", {"name": "docs__search", "arguments": {"query": "ok"}})
        assert _text(again) == "results for ok (max 10)"
        # every forwarded call went to this connection's session log: find_tools ranks what followed get_forecast
        await session.call_tool("call_tool", {"name": "weather__get_forecast", "arguments": {"city": "Oslo"}})
        found = json.loads(_text(await session.call_tool("find_tools", {"query": "search the web", "k": 8})))
        web = [r for r in found["ranks"] if r["id"] == "web.search"]
        assert web and "transition" in web[0]["signals"], found["ranks"]


LOGGED = [
    ("weather.get_forecast", True),
    ("web.search", True),
    ("weather.get_forecast", False),  # the upstream refused the arguments
    ("ghost.ghost_lookup", False),
    ("sleepy.sleepy_nap", False),
    ("docs.search", True),
    ("weather.get_forecast", True),
]


def _logged(dsn: str) -> list[list[tuple[str, bool]]]:
    with ToolStore(dsn, embedder=None, catalog="gw", create=False) as store:
        return [[(c.tool_id, c.ok) for c in store.session_log(s["session_id"])] for s in store.sessions()]


def _cli(dsn: str, *args: str) -> list[str]:
    return ["-m", "toolstore", "--dsn", dsn, "--embedder", EMBEDDER, "-c", "gw", "serve", "mcp", *args]


def test_gateway_over_stdio(gateway_catalog: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLSTORE_TEST_TOKEN", "s3cret")
    args = _cli(gateway_catalog, "--gateway", "--call-timeout", CALL_TIMEOUT)
    anyio.run(
        _session_checks,
        Upstream("stdio", command=sys.executable, args=tuple(args), env={"TOOLSTORE_TEST_TOKEN": "s3cret"}),
    )
    assert _logged(gateway_catalog) == [LOGGED]


def test_gateway_over_streamable_http(gateway_catalog: str) -> None:
    port = _free_port()
    args = _cli(
        gateway_catalog, "--gateway", "--call-timeout", CALL_TIMEOUT, "--transport", "http", "--port", str(port)
    )
    proc = subprocess.Popen(
        [sys.executable, *args],
        env={**__import__("os").environ, "TOOLSTORE_TEST_TOKEN": "s3cret"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_port(port, proc)
        anyio.run(_session_checks, Upstream("http", url=f"http://127.0.0.1:{port}/mcp"))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert b"s3cret" not in err  # no secret in the server's logs
    assert _logged(gateway_catalog) == [LOGGED]


def test_the_gateway_shows_an_upstreams_stderr_line_by_line_redacted_and_named(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway starts a synced stdio upstream with the catalog's env (a ${VAR} expanded from its own) and secret
    flags: what that server writes to its stderr reaches the gateway's stderr as the sync shows it (test_ingest), no
    value handed to it in there."""
    monkeypatch.setenv("TOOLSTORE_TEST_SECRET", CHATTY_SECRETS[0])
    args = [SERVER, "--name", "chatty", *CHATTY_ARGS]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="chatty") as store:
        sync_mcp_stdio(store, sys.executable, args, env=CHATTY_ENV)
    gateway = ["-m", "toolstore", "--dsn", dsn, "--embedder", EMBEDDER, "-c", "chatty", "serve", "mcp", "--gateway"]
    params = mcp.StdioServerParameters(command=sys.executable, args=gateway, env=dict(os.environ))

    async def main() -> str:
        with (tmp_path / "gateway.err").open("w") as errlog:
            async with mcp.stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    answer = await session.call_tool("call_tool", {"name": "search", "arguments": {"query": "q"}})
        assert _text(answer) == "results for q (max 10)"
        return (tmp_path / "gateway.err").read_text(errors="replace")

    chatty_lines(anyio.run(main), args)  # the last line, at the upstream's exit, only if the gateway exits in time


def test_find_tools_only_without_gateway(gateway_catalog: str) -> None:
    async def check() -> None:
        args = tuple(_cli(gateway_catalog))
        async with open_session(Upstream("stdio", command=sys.executable, args=args)) as (session, _):
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["find_tools"]
            data = json.loads(_text(await session.call_tool("find_tools", {"query": "active storm alerts", "k": 1})))
            assert data["ranks"][0]["id"].endswith(".list_alerts") and "abstained" not in data
            asked = {"query": "active storm alerts", "k": 1, "abstain": True}
            data = json.loads(_text(await session.call_tool("find_tools", asked)))
            assert data["abstained"] is False and data["ranks"][0]["id"].endswith(".list_alerts")
            asked["query"] = "bake a sourdough bread with rye flour"
            data = json.loads(_text(await session.call_tool("find_tools", asked)))
            assert data["abstained"] is True and data["tools"] == []

    anyio.run(check)


def test_find_tools_takes_its_arguments_as_strictly_as_route(dsn: str) -> None:
    """find_tools took k="3" and k=true (the mcp SDK's pydantic made them 3 and 1), token_budget="500", abstain="yes"
    or 1, where route(k=True) is refused; each is a tool error naming the argument, as route() says it, its input
    schema unchanged, and the server answers good arguments after, a whole number sent as 2.0 among them (JSON
    Schema's integer)."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="strict") as store:
        store.upsert([Tool(id=f"t.tool{i}", name=f"tool{i}", description=f"weather task {i}") for i in range(3)])
    args = ("-m", "toolstore", "--dsn", dsn, "--embedder", EMBEDDER, "-c", "strict", "serve", "mcp")

    async def check() -> None:
        async with open_session(Upstream("stdio", command=sys.executable, args=args)) as (session, _):
            [listed] = (await session.list_tools()).tools
            schema = listed.input_schema if hasattr(listed, "input_schema") else listed.inputSchema
            assert schema["properties"]["k"] == {"default": 8, "title": "K", "type": "integer"}
            assert schema["properties"]["abstain"] == {"default": False, "title": "Abstain", "type": "boolean"}
            for arguments, said in [
                ({"k": "3"}, "k must be an integer from 1 to 1000, got '3'"),
                ({"k": True}, "k must be an integer from 1 to 1000, got True"),
                ({"k": 2.5}, "k must be an integer from 1 to 1000, got 2.5"),
                ({"token_budget": "500"}, "token_budget must be None or an integer from 0 to 10,000,000, got '500'"),
                ({"token_budget": False}, "token_budget must be None or an integer from 0 to 10,000,000, got False"),
                ({"abstain": "yes"}, "abstain must be True or False, got 'yes'"),
                ({"abstain": 1}, "abstain must be True or False, got 1"),
            ]:
                bad = await session.call_tool("find_tools", {"query": "weather", **arguments})
                assert _is_error(bad) and _text(bad).endswith(said), (arguments, _text(bad))
            for asked in [
                {"query": "weather", "k": 2, "token_budget": None, "abstain": False},
                {"query": "weather", "k": 2.0, "token_budget": 10_000.0},  # JSON's 2.0 is 2: schema-valid integers
            ]:
                good = await session.call_tool("find_tools", asked)
                assert not _is_error(good) and len(json.loads(_text(good))["tools"]) == 2, _text(good)

    anyio.run(check)


def test_a_missing_or_mistyped_required_argument_is_a_tool_error_saying_what_to_send(dsn: str) -> None:
    """find_tools without query (or with null, a number, an array, a blank string) and call_tool without a string name
    answered with the mcp SDK's pydantic text ("1 validation error for find_toolsArguments ... errors.pydantic.dev");
    each is a tool error naming the argument and what to send, over streamable HTTP on loopback, and the server
    answers a good call after."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="required") as store:
        store.upsert([Tool(id=f"t.tool{i}", name=f"tool{i}", description=f"weather task {i}") for i in range(3)])
    task = "a description of the task in plain words, such as 'send a message to a Slack channel'"
    named = "the name of a tool that find_tools returned"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("find_tools", {}, f"query is required: {task}"),
        ("find_tools", {"k": 2}, f"query is required: {task}"),
        ("find_tools", {"query": None}, f"query is required: {task}"),
        ("find_tools", {"query": 5}, f"query must be a string, got a number: send {task}"),
        ("find_tools", {"query": ["weather"]}, f"query must be a string, got an array: send {task}"),
        ("find_tools", {"query": {"task": "weather"}}, f"query must be a string, got an object: send {task}"),
        ("find_tools", {"query": ""}, f"query is empty: send {task}"),
        ("find_tools", {"query": " \n"}, f"query is empty: send {task}"),
        ("find_tools", {"query": "weather", "k": 0}, "k must be an integer from 1 to 1000, got 0"),
        ("find_tools", {"query": "weather", "k": 1001}, "k must be an integer from 1 to 1000, got 1001"),
        ("call_tool", {}, f"name is required: {named}"),
        ("call_tool", {"name": None, "arguments": {}}, f"name is required: {named}"),
        ("call_tool", {"name": 3}, f"name must be a string, got a number: send {named}"),
        ("call_tool", {"name": ""}, f"name is empty: send {named}"),
    ]

    async def check(url: str) -> None:
        async with open_session(Upstream("http", url=url)) as (session, _):
            for tool, arguments, said in cases:
                bad = await session.call_tool(tool, arguments)
                text = _text(bad)
                assert _is_error(bad) and text == f"Error executing tool {tool}: {said}", (tool, arguments, text)
            good = await session.call_tool("find_tools", {"query": "weather", "k": 2})
            assert not _is_error(good) and len(json.loads(_text(good))["tools"]) == 2, _text(good)

    _against_http_gateway(dsn, "required", check)


def test_an_argument_a_tool_does_not_take_is_a_tool_error_naming_the_ones_it_takes(dsn: str) -> None:
    """find_tools dropped what it does not take unsaid: a model sending ``limit`` or ``top_k`` got 8 tools, not its 3,
    and call_tool dropped a called tool's arguments sent beside ``name``. Each is a tool error naming the argument and
    those the tool takes (the real SDK client, streamable HTTP on loopback), the listed schemas say
    ``additionalProperties: false``, and the server answers good calls after."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="extra") as store:
        store.upsert([Tool(id=f"t.tool{i}", name=f"tool{i}", description=f"weather task {i}") for i in range(12)])
    find = "it takes query, k (how many tools), token_budget and abstain"
    call = "it takes name and arguments (the called tool's own, as one JSON object)"
    takes = {"find_tools": {"query", "k", "token_budget", "abstain"}, "call_tool": {"name", "arguments"}}
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("find_tools", {"query": "weather", "limit": 3}, f"find_tools takes no argument 'limit': {find}"),
        ("find_tools", {"query": "weather", "top_k": 3, "k": 2}, f"find_tools takes no argument 'top_k': {find}"),
        ("find_tools", {"query": "weather", "a": 1, "b": 2, "c": 3, "d": 4}, "'a', 'b', 'c' (and 1 more): " + find),
        ("call_tool", {"name": "tool1", "city": "Paris"}, f"call_tool takes no argument 'city': {call}"),
    ]

    async def check(url: str) -> None:
        async with open_session(Upstream("http", url=url)) as (session, _):
            for tool, arguments, said in cases:
                bad = await session.call_tool(tool, arguments)
                text = _text(bad)
                assert _is_error(bad) and text.startswith(f"Error executing tool {tool}: "), (tool, text)
                assert text.endswith(said), (tool, arguments, text)
            for listed in (await session.list_tools()).tools:
                schema = listed.input_schema if hasattr(listed, "input_schema") else listed.inputSchema
                assert schema["additionalProperties"] is False, listed.name
                assert set(schema["properties"]) == takes[listed.name], listed.name
            good = await session.call_tool("find_tools", {"query": "weather", "k": 3})
            assert not _is_error(good) and len(json.loads(_text(good))["tools"]) == 3, _text(good)

    _against_http_gateway(dsn, "extra", check)


def test_find_tools_says_which_tools_the_token_budget_left_out(dsn: str) -> None:
    """find_tools packed its tools into token_budget without saying which it left out, where ``toolstore route --json``
    lists them (``skipped``); its answer has them too, each as route's JSON gives it, and the budget beside
    ``tokens_used``."""
    tools = [
        Tool(id=f"t.tool{i}", name=f"tool{i}", description=f"weather forecast task {i} " + "with details " * 20 * i)
        for i in range(6)
    ]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="budget") as store:
        store.upsert(tools)
        routed = store.route("weather forecast", k=6, token_budget=300, fmt="mcp")
    assert routed.skipped and routed.tools  # the budget keeps some and leaves some out
    args = ("-m", "toolstore", "--dsn", dsn, "--embedder", EMBEDDER, "-c", "budget", "serve", "mcp")

    async def check() -> None:
        async with open_session(Upstream("stdio", command=sys.executable, args=args)) as (session, _):
            asked = {"query": "weather forecast", "k": 6, "token_budget": 300}
            data = json.loads(_text(await session.call_tool("find_tools", asked)))
            assert [r["id"] for r in data["ranks"]] == routed.ids
            assert data["skipped"] == result_json(routed)["skipped"]
            assert [t["id"] for t in data["skipped"]] == [r.tool.id for r in routed.skipped]
            assert (data["tokens_used"], data["token_budget"]) == (routed.tokens_used, 300)
            everything = json.loads(_text(await session.call_tool("find_tools", {"query": "weather forecast"})))
            assert (everything["skipped"], everything["token_budget"]) == ([], None)

    anyio.run(check)


def test_the_call_log_hook_records_each_forwarded_call(gateway_catalog: str) -> None:
    records: list[CallRecord] = []

    async def main() -> None:
        async with AsyncToolStore(gateway_catalog, embedder=HashingEmbedder(64), catalog="gw") as store:
            await forward_call(store, "weather__search", {"query": "q"}, call_log=records.append)
            with pytest.raises(Exception, match="within 1 s"):
                await forward_call(store, "sleepy_nap", {}, timeout=1, call_log=records.append)

    asyncio.run(main())
    assert [(r.tool_id, r.is_error) for r in records] == [("weather.search", False), ("sleepy.sleepy_nap", True)]


def test_a_secret_flags_value_may_be_a_reference_expanded_at_each_start(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret flag's value among a stdio server's arguments may be a ${VAR} reference, as env and header values:
    the sync and the gateway start the server with the variable's value (the test server exits on an unexpanded one),
    the catalog keeps the reference, never the value, and an unset variable is an error naming it."""
    monkeypatch.setenv("TOOLSTORE_TEST_KEY", "sk-live-abc123")
    args = [SERVER, "--name", "keyed", "--api-key", "${TOOLSTORE_TEST_KEY}"]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="keyed") as store:
        sync_mcp_stdio(store, sys.executable, args)
        assert "keyed.key_suffix" in [t.id for t in store.tools()]
        with store.connection() as conn:
            [(stored,)] = conn.execute("select array_to_string(args, ' ') from mcp_upstreams").fetchall()
    assert stored.endswith("--api-key ${TOOLSTORE_TEST_KEY}") and "abc123" not in stored, stored

    async def main() -> str:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="keyed") as astore:
            return _text(await forward_call(astore, "key_suffix", {}))

    assert asyncio.run(main()) == "123"
    monkeypatch.delenv("TOOLSTORE_TEST_KEY")
    with pytest.raises(
        McpSyncError, match=r"a secret flag's value refers to \$\{TOOLSTORE_TEST_KEY\}, which is not set"
    ):
        fetch_stdio(sys.executable, args)


def test_upstream_sessions_are_kept_and_renewed() -> None:
    """One session per upstream across calls; when the HTTP upstream restarts, the new process refuses the old
    session ("Session not found", before running the tool), so the call is made again on a new session and succeeds,
    and so does the next."""
    from toolstore._mcp_sessions import UpstreamSessions

    port = _free_port()
    cmd = [sys.executable, SERVER, "--name", "web", "--http", str(port)]
    upstream = Upstream("http", url=f"http://127.0.0.1:{port}/mcp")
    outcomes: list[str] = []

    async def main(restart: Any) -> None:
        async with UpstreamSessions() as sessions:
            first = await sessions.call(upstream, "search", {"query": "a"})
            held = list(sessions._held.values())
            second = await sessions.call(upstream, "search", {"query": "b"})
            assert list(sessions._held.values()) == held and len(held) == 1  # the same session, still open
            assert (_text(first), _text(second)) == ("results for a (max 10)", "results for b (max 10)")
            await anyio.to_thread.run_sync(restart)
            for query in ("c", "d"):
                try:
                    with anyio.fail_after(20):
                        outcomes.append(_text(await sessions.call(upstream, "search", {"query": query})))
                except Exception as exc:
                    outcomes.append(f"error: {exc}")
            renewed = list(sessions._held.values())
            assert len(renewed) == 1 and renewed[0][0] is not held[0][0]
        assert sessions._held == {}

    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]

    def restart() -> None:
        procs[-1].terminate()
        procs[-1].wait(timeout=10)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_port(port, procs[-1])

    try:
        _wait_for_port(port, procs[0])
        anyio.run(main, restart)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
    assert outcomes == ["results for c (max 10)", "results for d (max 10)"], outcomes


def test_only_an_http_servers_refusal_of_the_session_is_retried() -> None:
    """The refusal of an unknown session (the Python SDK's -32600 and the TypeScript SDK's -32001 "Session not found",
    the client's "Session terminated" for a bare 404) says the call never ran; any other error, or the same words
    from a stdio server, may follow a call that ran, and is not made again."""
    from mcp.shared.exceptions import MCPError

    from toolstore._mcp_sessions import _refused_session

    http, stdio = Upstream("http", url="http://127.0.0.1:1/mcp"), Upstream("stdio", command="server")
    for code, message in [(-32600, "Session not found"), (-32001, "Session not found"), (-32600, "Session terminated")]:
        assert _refused_session(http, MCPError(code, message)) and not _refused_session(stdio, MCPError(code, message))
    for code, message in [(-32600, "Invalid request"), (-32602, "Session not found"), (-32603, "Internal error")]:
        assert not _refused_session(http, MCPError(code, message))
    assert not _refused_session(http, RuntimeError("Session not found"))


def test_the_gateway_tells_client_connections_apart_by_the_one_each_sdk_session_serves() -> None:
    """The SDK makes a session object per message; the session log's session is the client connection that object
    serves (``_connection``, private to the SDK: no public handle at mcp 2.0 to 2.3). An SDK whose session has none
    is a McpSyncError naming the release (the tool's error text), not every message taken for a new connection (mcp
    1.x's session object was the connection; toolstore needs mcp 2.0 or later)."""
    from importlib.metadata import version
    from types import SimpleNamespace

    from toolstore._mcp_server import ClientSessions

    class Connection:  # the SDK's: weakly referenced, as a connection ends
        pass

    clients = ClientSessions()
    one, other = Connection(), Connection()
    first, again = (clients.of(SimpleNamespace(session=SimpleNamespace(_connection=one))) for _ in range(2))
    assert first == again and first is not None and first.startswith("mcp-")
    assert clients.of(SimpleNamespace(session=SimpleNamespace(_connection=other))) not in (first, None)
    assert clients.of(None) is None and clients.of(SimpleNamespace(session=None)) is None
    with pytest.raises(McpSyncError, match=rf"^mcp {re.escape(version('mcp'))} has no SimpleNamespace\._connection"):
        clients.of(SimpleNamespace(session=SimpleNamespace()))


def test_call_tool_calls_the_tool_find_tools_named(dsn: str) -> None:
    """The gateway's names are unique across the catalog, but a name can be another tool's id: call_tool must mean
    the tool find_tools gave that name (here no upstream is recorded, so the error names the tool it resolved)."""
    from toolstore import Tool
    from toolstore._mcp_server import _catalog_names

    tools = [
        Tool(id="web.search", name="search", provider="web", description="Search the web"),
        Tool(id="search", name="lookup", description="Look a word up in the dictionary"),
    ]

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="names") as store:
            await store.upsert(tools)
            result = await store.route("search the web for news", k=2)
            names = dict(zip(result.ids, await _catalog_names(store, result)))
            assert names["web.search"] == "search"
            with pytest.raises(Exception, match="tool 'web.search' has no upstream"):
                await forward_call(store, "search", {})
            with pytest.raises(Exception, match="tool 'search' has no upstream"):
                await forward_call(store, "lookup", {})

    asyncio.run(main())


FAULTY = Upstream("stdio", command=sys.executable, args=(SERVER, "--name", "faulty", "--variant", "faulty"))


def test_an_upstream_error_reply_keeps_the_session_and_the_calls_in_flight() -> None:
    """A JSON-RPC error answering one call (TypeScript servers answer bad arguments so) says nothing about the
    connection: the session stays open, and another call in flight on it completes."""
    from toolstore._mcp_sessions import UpstreamSessions

    outcomes: dict[str, str] = {}

    async def main() -> None:
        async with UpstreamSessions() as sessions:
            await sessions.call(FAULTY, "nap", {"seconds": 0})
            held = list(sessions._held.values())

            async def call(name: str, arguments: dict[str, Any], delay: float) -> None:
                await anyio.sleep(delay)
                try:
                    with anyio.fail_after(20):
                        outcomes[name] = _text(await sessions.call(FAULTY, name, arguments))
                except Exception as exc:
                    outcomes[name] = f"error: {exc}"

            async with anyio.create_task_group() as group:
                group.start_soon(call, "nap", {"seconds": 2}, 0)
                group.start_soon(call, "refuse", {"x": 1}, 0.5)
            assert list(sessions._held.values()) == held  # the same session, still open

    anyio.run(main)
    assert outcomes == {"nap": "slept 2.0", "refuse": "error: invalid arguments for refuse: 1"}


def test_a_call_after_the_upstream_process_exited_is_retried_on_a_fresh_session() -> None:
    """The upstream exited between two calls: the next call could not even be sent on the dead session, so it is
    made on a fresh one (a new process) instead of failing."""
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> list[str]:
        async with UpstreamSessions() as sessions:
            first = _text(await sessions.call(FAULTY, "exit_soon", {}))
            await anyio.sleep(1.5)  # the process is gone
            with anyio.fail_after(20):
                second = _text(await sessions.call(FAULTY, "exit_soon", {}))
            return [first, second]

    first, second = anyio.run(main)
    assert first.startswith("bye from ") and second.startswith("bye from ") and first != second


def test_an_upstream_session_knows_every_page_of_tools(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's client checks each call's result by the called tool's listing: a gateway session lists every page
    once, so calling a tool past the first page costs no extra tools/list and logs no warning."""
    from toolstore._mcp_sessions import UpstreamSessions

    paged = Upstream("stdio", command=sys.executable, args=(SERVER, "--page-size", "1"))

    async def main() -> list[str]:
        async with UpstreamSessions() as sessions:
            return [_text(await sessions.call(paged, "list_alerts", {"region": r})) for r in ("north", "south")]

    with caplog.at_level("WARNING"):
        assert anyio.run(main) == ["no alerts in north", "no alerts in south"]
    assert not [r.getMessage() for r in caplog.records if "not listed" in r.getMessage()]


def test_the_gateway_lists_an_upstreams_tools_again_when_they_change(caplog: pytest.LogCaptureFixture) -> None:
    """An upstream's notifications/tools/list_changed: the gateway's session lists every page of its tools again, so a
    call to the tool it added is checked against its listing (no "not listed" warning, no extra tools/list), and a
    call to the tool it dropped is a clear error naming it, never sent."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    changing = Upstream("stdio", command=sys.executable, args=(SERVER, "--variant", "changing", "--page-size", "1"))

    async def main() -> list[str]:
        async with UpstreamSessions() as sessions:
            answers = [_text(await sessions.call(changing, "list_alerts", {"region": "north"}))]
            answers.append(_text(await sessions.call(changing, "change_tools", {})))
            for _ in range(400):  # the listing runs beside the calls: wait (a while at most) until it has the new tool
                if "late_news" in _listed(sessions, changing):
                    break
                await anyio.sleep(0.05)
            answers.append(_text(await sessions.call(changing, "late_news", {"topic": "postgres"})))
            with pytest.raises(McpSyncError, match="no longer offers tool 'list_alerts'.*sync mcp --prune"):
                await sessions.call(changing, "list_alerts", {"region": "south"})
            answers.append(_text(await sessions.call(changing, "search", {"query": "q"})))  # the session is fine
            return answers

    with caplog.at_level("WARNING"):
        assert anyio.run(main) == ["no alerts in north", "changed", "news about postgres", "results for q (max 10)"]
    assert not [r.getMessage() for r in caplog.records if "not listed" in r.getMessage()]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_change_sent_just_before_an_answer_is_read_by_the_listing_asked_next(transport: str) -> None:
    """Through the SDK's own transports: the upstream says its tools changed just before it answers a call
    (``change_tools``), so the notification is read when the answer is, but handed to the session's message handler in
    a task of its own; the listing the gateway asks for right after the answer, for a tool the catalog lacks
    (``listed``, no await between), reads it within :data:`PENDING_TURNS` turns and names the new tool. A transport or
    SDK whose reader takes more turns than that fails here rather than in a gateway refusing a tool as unknown."""
    from toolstore._mcp_sessions import PENDING_TURNS, UpstreamSessions

    args = [SERVER, "--name", "changing", "--variant", "changing"]

    async def main(upstream: Upstream) -> frozenset[str] | None:
        async with UpstreamSessions() as sessions:
            assert _text(await sessions.call(upstream, "change_tools", {})) == "changed"
            return await sessions.listed(upstream)

    if transport == "stdio":
        listed = anyio.run(main, Upstream("stdio", command=sys.executable, args=tuple(args)))
    else:
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, *args, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for_port(port, proc)
            listed = anyio.run(main, Upstream("http", url=f"http://127.0.0.1:{port}/mcp"))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert listed == {"search", "get_forecast", "late_news", "change_tools"}, (PENDING_TURNS, listed)


def _listed(sessions: Any, upstream: Upstream) -> frozenset[str]:
    """The names the gateway's session to ``upstream`` listed last (none before it keeps them)."""
    listing = getattr(sessions, "_listings", {}).get(upstream.key())
    return (listing.names if listing is not None else None) or frozenset()


#: An SDK session's dispatcher, private, as the gateway reads it (``_mcp_sessions._ended``): its connection open.
_OPEN = SimpleNamespace(_closed=False)


class _FakeUpstream:
    """An upstream server in memory for :class:`UpstreamSessions` (``open_session`` patched): ``names`` is what it
    offers now (None: its tools/list fails); each tools/list answers what it offered when asked, held back until
    released when ``gates`` has an event for it (``held`` is set then); ``answered`` counts the listings it finished
    and ``calls`` the tools/call it received."""

    def __init__(self, *names: str) -> None:
        self.names: set[str] | None = set(names)
        self.gates: list[anyio.Event] = []
        self.held = anyio.Event()
        self.answered = 0
        self.calls: list[str] = []
        self.notify: Any = None  # the gateway's message handler, once connected
        self.wire: Any = None  # what it sends, handed on to ``notify`` by the session's reader, once connected
        self._dispatcher = _OPEN  # what the gateway reads to tell a session whose connection ended, as the SDK's has

    async def list_tools(self, **_: Any) -> Any:
        names = None if self.names is None else sorted(self.names)
        if self.gates:
            gate = self.gates.pop(0)
            self.held.set()
            await gate.wait()
        self.answered += 1
        if names is None:
            raise RuntimeError("tools/list failed")
        return mcp.types.ListToolsResult.model_validate({"tools": [{"name": n, "inputSchema": {}} for n in names]})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        self.calls.append(name)
        return f"called {name}"

    async def change(self, *names: str | None) -> None:
        """Offer ``names`` instead (None: fail to list) and say so (notifications/tools/list_changed), as the SDK's
        reader hands it on."""
        self.names = None if names == (None,) else {str(n) for n in names}
        await self.notify(mcp.types.ToolListChangedNotification(method="notifications/tools/list_changed"))

    def send_change(self, *names: str) -> None:
        """Offer ``names`` instead and send notifications/tools/list_changed, which the session has not read yet: its
        reader hands it on when it next runs."""
        self.names = set(names)
        self.wire.send_nowait(mcp.types.ToolListChangedNotification(method="notifications/tools/list_changed"))

    async def listings(self, count: int) -> None:
        """Let the gateway's tasks run until ``count`` listings have been answered (and so stored: in the same step)."""
        for _ in range(10_000):
            if self.answered >= count:
                return
            await anyio.sleep(0)
        raise AssertionError(f"{self.answered} listings answered, waiting for {count}")


FAKE = Upstream("stdio", command="fake-mcp")


@pytest.fixture
def fake_upstream(monkeypatch: pytest.MonkeyPatch) -> _FakeUpstream:
    from contextlib import asynccontextmanager

    import toolstore._mcp_sessions

    fake = _FakeUpstream("search", "list_alerts")

    @asynccontextmanager
    async def open_fake(upstream: Upstream, message_handler: Any = None, ending: Any = None) -> Any:
        fake.notify = message_handler
        fake.wire, received = anyio.create_memory_object_stream[Any](10)

        async def read() -> None:  # the session's reader
            async for message in received:
                await message_handler(message)

        async with anyio.create_task_group() as reader:
            reader.start_soon(read)
            yield fake, {"serverInfo": {"name": "fake"}}
            reader.cancel_scope.cancel()

    monkeypatch.setattr(toolstore._mcp_sessions, "open_session", open_fake)
    return fake


def test_the_listing_asked_for_a_tool_the_catalog_lacks_reads_a_change_already_sent(
    fake_upstream: _FakeUpstream,
) -> None:
    """The upstream added a tool and said so, but the session has not read the notification yet: what the gateway asks
    for a tool the catalog lacks (``listed``) reads it first, so the tools are listed again and the new one is named
    (then refused as unsynced, not as unknown); with nothing sent, nothing is listed again."""
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> None:
        async with UpstreamSessions() as sessions:
            assert await sessions.call(FAKE, "search", {}) == "called search"
            assert await sessions.listed(FAKE) == {"search", "list_alerts"} and fake_upstream.answered == 1
            fake_upstream.send_change("search", "list_alerts", "late_news")  # no checkpoint since: not read
            assert await sessions.listed(FAKE) == {"search", "list_alerts", "late_news"}
            assert fake_upstream.answered == 2

    anyio.run(main)


def test_a_tool_the_upstream_does_not_list_is_refused_and_not_sent(fake_upstream: _FakeUpstream) -> None:
    """A catalog's tool missing from the session's first listing (the upstream restarted with other tools and sent no
    notification, or the catalog is stale) is refused as one dropped later is, naming it and asking for a sync; after
    a listing that failed nothing is refused."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> None:
        async with UpstreamSessions() as sessions:
            with pytest.raises(McpSyncError, match="no longer offers tool 'late_news'.*sync mcp --prune"):
                await sessions.call(FAKE, "late_news", {})
            assert await sessions.call(FAKE, "search", {}) == "called search"
            await fake_upstream.change(None)  # its tools changed, and listing them fails
            await fake_upstream.listings(2)
            assert await sessions.call(FAKE, "late_news", {}) == "called late_news"

    anyio.run(main)
    assert fake_upstream.calls == ["search", "late_news"]


def test_close_relistings_keep_the_newest(fake_upstream: _FakeUpstream) -> None:
    """Two notifications close together, the first listing still running when the second comes: the listings run one
    after the other, so the newest is kept even when the older ends last; likewise a notification during the session's
    first listing. A tool just added is sent, one just dropped refused."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> None:
        async with UpstreamSessions() as sessions:
            first = anyio.Event()
            fake_upstream.gates.append(first)
            async with anyio.create_task_group() as group:  # the first call waits for the session's first listing
                group.start_soon(sessions.call, FAKE, "search", {})
                await fake_upstream.held.wait()
                await fake_upstream.change("search", "late_news")  # during the first listing
                first.set()
            await fake_upstream.listings(2)
            assert _listed(sessions, FAKE) == {"search", "late_news"}

            older = anyio.Event()
            fake_upstream.gates.append(older)
            fake_upstream.held = anyio.Event()
            await fake_upstream.change("search", "list_alerts")
            await fake_upstream.held.wait()  # that listing is under way, and held back
            await fake_upstream.change("search", "weekly_report")
            older.set()
            await fake_upstream.listings(4)
            assert _listed(sessions, FAKE) == {"search", "weekly_report"}
            assert await sessions.call(FAKE, "weekly_report", {}) == "called weekly_report"
            for dropped in ("list_alerts", "late_news"):
                with pytest.raises(McpSyncError, match=f"no longer offers tool '{dropped}'"):
                    await sessions.call(FAKE, dropped, {})

    anyio.run(main)
    assert fake_upstream.calls == ["search", "weekly_report"]


def test_a_call_made_while_the_tools_are_listed_again_waits_for_that_listing(fake_upstream: _FakeUpstream) -> None:
    """A call that comes while the listing after notifications/tools/list_changed runs is checked against that listing,
    not the one held before: a tool just added is sent once the listing ends, one just dropped is refused. The wait is
    bounded: past ``listing_wait`` the call goes on with the listing held."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    outcomes: dict[str, Any] = {}

    async def call(sessions: UpstreamSessions, name: str) -> None:
        try:
            outcomes[name] = await sessions.call(FAKE, name, {})
        except McpSyncError as exc:
            outcomes[name] = exc

    async def main(listing_wait: float) -> None:
        async with UpstreamSessions(listing_wait=listing_wait) as sessions:
            assert await sessions.call(FAKE, "search", {}) == "called search"
            gate = anyio.Event()
            fake_upstream.gates.append(gate)
            fake_upstream.held = anyio.Event()
            await fake_upstream.change("search", "late_news")
            await fake_upstream.held.wait()  # the new listing is under way, and held back
            async with anyio.create_task_group() as group:
                for name in ("late_news", "list_alerts"):
                    group.start_soon(call, sessions, name)
                for _ in range(100):
                    await anyio.sleep(0)
                if listing_wait > 1:
                    assert outcomes == {} and fake_upstream.calls == ["search"]  # both wait for the listing
                    gate.set()
            gate.set()

    anyio.run(main, 60.0)
    assert outcomes["late_news"] == "called late_news"
    assert isinstance(outcomes["list_alerts"], McpSyncError) and "'list_alerts'" in str(outcomes["list_alerts"])
    assert fake_upstream.calls == ["search", "late_news"]

    outcomes.clear()
    fake_upstream.names, fake_upstream.calls, fake_upstream.answered = {"search", "list_alerts"}, [], 0
    anyio.run(main, 0.01)  # the listing is held past the wait: the calls go on with the listing held
    assert outcomes["list_alerts"] == "called list_alerts"
    assert isinstance(outcomes["late_news"], McpSyncError), outcomes
    assert "listing them again took over 0.01 s" in str(outcomes["late_news"])
    assert fake_upstream.calls == ["search", "list_alerts"]


def test_a_listing_that_hangs_is_abandoned_so_later_calls_do_not_wait_for_it(
    fake_upstream: _FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A listing after notifications/tools/list_changed that never ends is abandoned after ``listing_timeout`` (a
    warning) and counts as answered with the listing held: a call made then does not wait its ``listing_wait`` for it
    (its refusal, after the one more listing a refusal makes, which hangs too, does not say the listing was still
    running), nor does any later call; the next notification lists again."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> None:
        async with UpstreamSessions(listing_wait=2.0, listing_timeout=0.01) as sessions:
            assert await sessions.call(FAKE, "search", {}) == "called search"
            fake_upstream.gates += [anyio.Event() for _ in range(3)]  # never set: this listing hangs, and the 2 next
            fake_upstream.held = anyio.Event()
            await fake_upstream.change("search", "late_news")
            await fake_upstream.held.wait()
            for _ in range(2):
                with pytest.raises(McpSyncError) as refused:
                    await sessions.call(FAKE, "late_news", {})
                message = str(refused.value)
                assert "no longer offers tool 'late_news'" in message and "took over" not in message, message
            assert await sessions.call(FAKE, "list_alerts", {}) == "called list_alerts"  # the listing held
            await fake_upstream.change("search", "late_news")  # listed again, and answered
            await fake_upstream.listings(2)
            assert await sessions.call(FAKE, "late_news", {}) == "called late_news"

    with caplog.at_level("WARNING", logger="toolstore"):
        anyio.run(main)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("tools/list did not answer within 0.01 s" in m for m in warned), warned
    assert fake_upstream.calls == ["search", "list_alerts", "late_news"]


class _TokenServers:
    """Upstreams in memory for :class:`UpstreamSessions` (``open_session`` patched), each answering with the token it
    was started with (its env's TOKEN, else its command): ``opened`` and ``closed`` list the sessions by token; a call
    of ``slow`` sets ``in_flight`` and waits for ``release``."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.closed: list[str] = []
        self.in_flight, self.release = anyio.Event(), anyio.Event()

    def session(self, token: str) -> Any:
        servers = self

        class Session:
            _dispatcher = _OPEN

            async def list_tools(self, **_: Any) -> Any:
                tools = [{"name": n, "inputSchema": {}} for n in ("search", "slow")]
                return mcp.types.ListToolsResult.model_validate({"tools": tools})

            async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
                if name == "slow":
                    servers.in_flight.set()
                    await servers.release.wait()
                return f"{name} with {token}"

        return Session()


@pytest.fixture
def token_servers(monkeypatch: pytest.MonkeyPatch) -> _TokenServers:
    from contextlib import asynccontextmanager

    import toolstore._mcp_sessions

    servers = _TokenServers()

    @asynccontextmanager
    async def open_fake(upstream: Upstream, message_handler: Any = None, ending: Any = None) -> Any:
        token = upstream.env.get("TOKEN", upstream.command or "")
        servers.opened.append(token)
        try:
            yield servers.session(token), {"serverInfo": {"name": "fake"}}
        finally:
            servers.closed.append(token)

    monkeypatch.setattr(toolstore._mcp_sessions, "open_session", open_fake)
    return servers


def test_the_session_to_a_rotated_upstream_is_closed_once_the_new_one_serves(token_servers: _TokenServers) -> None:
    """A provider's values were rotated (a sync recorded a new token): its next call opens a session with the new one,
    and the session with the old one (a stdio process holding the old token) is closed, but only once the call in
    flight on it has ended, which is answered; another provider's session, and a call without a provider, are left
    alone."""
    from toolstore._mcp_sessions import UpstreamSessions

    opened, closed = token_servers.opened, token_servers.closed
    old, new = (Upstream("stdio", command="fake-mcp", env={"TOKEN": t}) for t in ("old", "new"))
    other = Upstream("stdio", command="other-mcp")
    outcomes: list[str] = []

    async def slow() -> None:
        outcomes.append(await sessions.call(old, "slow", {}, provider="fake"))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            assert await sessions.call(old, "search", {}, provider="fake") == "search with old"
            assert await sessions.call(other, "search", {}, provider="other") == "search with other-mcp"
            group.start_soon(slow)
            await token_servers.in_flight.wait()
            assert await sessions.call(new, "search", {}, provider="fake") == "search with new"
            for _ in range(100):
                await anyio.sleep(0)
            assert closed == []  # a call is in flight on the old session
            token_servers.release.set()
        for _ in range(100):
            if closed:
                break
            await anyio.sleep(0)
        assert outcomes == ["slow with old"] and closed == ["old"]
        assert await sessions.call(new, "search", {}, provider="fake") == "search with new"
        assert await sessions.call(old, "search", {}) == "search with old"  # no provider: nothing is retired
        assert await sessions.call(new, "search", {}) == "search with new"
        assert opened == ["old", "other-mcp", "new", "old"] and closed == ["old"]

    sessions = UpstreamSessions()

    async def run() -> None:
        async with sessions:
            await main()

    anyio.run(run)
    assert sorted(closed) == ["new", "old", "old", "other-mcp"]


def test_a_call_that_read_the_upstream_before_a_rotation_goes_to_the_new_one(
    dsn: str, token_servers: _TokenServers
) -> None:
    """A gateway call reads its provider's upstream, then a sync records a rotated token and another call serves it
    (the old session closed) before the first call reaches the sessions: the first call reads the record again and goes
    to the new session, so the old one is not opened again and the next call needs no reconnect."""
    from toolstore._mcp_sessions import UpstreamSessions

    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    old, new = (Upstream("stdio", command="fake-mcp", env={"TOKEN": t}) for t in ("old", "new"))
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="rotated") as store:
        sync_listing(store, McpListing("fake", tools, old))
    read, gate = anyio.Event(), anyio.Event()

    class Sessions(UpstreamSessions):
        stop_next = False  # the next call waits at the gate, after forward_call read the upstream

        async def call(self, *args: Any, **kwargs: Any) -> Any:
            if self.stop_next:
                self.stop_next = False
                read.set()
                await gate.wait()
            return await super().call(*args, **kwargs)

    def rotate() -> None:
        with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="rotated") as store:
            sync_listing(store, McpListing("fake", tools, new), provider="fake")

    async def main() -> list[str]:
        answers: list[str] = []
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="rotated") as store:
            async with Sessions() as sessions:
                answers.append(await forward_call(store, "search", {}, sessions=sessions))
                sessions.stop_next = True

                async def stale() -> None:
                    answers.append(await forward_call(store, "search", {}, sessions=sessions))

                async with anyio.create_task_group() as group:
                    group.start_soon(stale)
                    await read.wait()  # the stale call has read the old upstream
                    await anyio.to_thread.run_sync(rotate)
                    answers.append(await forward_call(store, "search", {}, sessions=sessions))
                    gate.set()
                answers.append(await forward_call(store, "search", {}, sessions=sessions))
        return answers

    assert anyio.run(main) == ["search with old", "search with new", "search with new", "search with new"]
    assert token_servers.opened == ["old", "new"]


def test_a_session_a_second_rotation_abandons_while_a_call_opens_it_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider's key rotated twice, to B then C, each rotation served by a call: the call that read B opens its
    session while the call that read C serves C (the session to A retired), so it reads the record again and goes to
    C too. The session to B it opened and left serves no one: it is closed (its stdio server exits), not kept until the
    gateway closes. Real servers on stdio, each started with its key (``--api-key``), counted as their sessions open
    and close."""
    from contextlib import asynccontextmanager

    import toolstore._mcp_sessions
    from toolstore._mcp_sessions import UpstreamSessions

    real_open = toolstore._mcp_sessions.open_session
    a, b, c = (
        Upstream("stdio", command=sys.executable, args=(SERVER, "--api-key", key))
        for key in ("sk-aaa", "sk-bbb", "sk-ccc")
    )
    open_now: list[str] = []  # the key of each session open now, until its server has exited
    closed = {key: anyio.Event() for key in ("sk-aaa", "sk-bbb", "sk-ccc")}
    b_opening, c_served = anyio.Event(), anyio.Event()

    @asynccontextmanager
    async def counted(upstream: Upstream, message_handler: Any = None, ending: Any = None) -> Any:
        key = upstream.args[-1]
        if upstream == b:  # the call that read B opens its session once the call that read C has served
            b_opening.set()
            await c_served.wait()
        open_now.append(key)
        try:
            async with real_open(upstream, message_handler, ending) as opened:
                yield opened
        finally:
            open_now.remove(key)
            closed[key].set()

    monkeypatch.setattr(toolstore._mcp_sessions, "open_session", counted)
    record = [a]  # the provider's upstream as recorded now

    async def recorded() -> Upstream:
        return record[0]

    async def main() -> None:
        async with UpstreamSessions() as sessions:

            async def call(upstream: Upstream) -> str:
                return _text(await sessions.call(upstream, "key_suffix", {}, provider="keyed", recorded=recorded))

            assert await call(a) == "aaa"
            answers: list[str] = []

            async def read_b() -> None:
                answers.append(await call(b))

            record[0] = b  # the first rotation
            async with anyio.create_task_group() as group:
                group.start_soon(read_b)
                await b_opening.wait()
                record[0] = c  # the second
                answers.append(await call(c))
                c_served.set()
            assert answers == ["ccc", "ccc"]
            with anyio.fail_after(30):  # a bound on a hang, nothing timed: the sessions left are closed
                await closed["sk-aaa"].wait()
                await closed["sk-bbb"].wait()
            assert open_now == ["sk-ccc"] and await call(c) == "ccc"
        assert open_now == [] and closed["sk-ccc"].is_set()

    anyio.run(main)


def test_a_call_of_a_tool_the_listing_held_lacks_lists_the_tools_once_more_before_it_is_refused(
    fake_upstream: _FakeUpstream,
) -> None:
    """The listing held can be older than the upstream's tools: the listing after notifications/tools/list_changed was
    abandoned (it hung), or the call came before the notification was read. A call of a tool it lacks lists them once
    more, bounded by ``listing_timeout``, and is sent when that listing names it, without waiting for another
    notification; a tool that listing lacks too is refused after exactly one listing, and not sent."""
    from toolstore import McpSyncError
    from toolstore._mcp_sessions import UpstreamSessions

    async def main() -> None:
        async with UpstreamSessions(listing_wait=2.0, listing_timeout=0.01) as sessions:
            assert await sessions.call(FAKE, "search", {}) == "called search"
            fake_upstream.gates.append(anyio.Event())  # never set: the listing after the notification hangs
            fake_upstream.held = anyio.Event()
            await fake_upstream.change("search", "late_news")
            await fake_upstream.held.wait()
            assert await sessions.call(FAKE, "late_news", {}) == "called late_news"
            fake_upstream.names = {"search", "late_news", "weekly_report"}  # its notification not read yet
            assert await sessions.call(FAKE, "weekly_report", {}) == "called weekly_report"
            answered = fake_upstream.answered
            with pytest.raises(McpSyncError, match="no longer offers tool 'list_alerts'"):
                await sessions.call(FAKE, "list_alerts", {})
            assert fake_upstream.answered == answered + 1
            assert await sessions.call(FAKE, "search", {}) == "called search"  # named: no listing
            assert fake_upstream.answered == answered + 1

    anyio.run(main)
    assert fake_upstream.calls == ["search", "late_news", "weekly_report", "search"]


def test_a_tool_added_while_the_listing_hung_is_named_for_a_sync(dsn: str, fake_upstream: _FakeUpstream) -> None:
    """A call of a name the catalog lacks asks each session's latest listing whether its upstream added it: when that
    session's last listing was abandoned (it hung), its tools are listed once more first, so a tool added meanwhile is
    named for a sync instead of being unknown; a made-up name costs no listing of a session whose listing ended."""
    from toolstore import McpSyncError, UnknownToolError
    from toolstore._mcp_sessions import UpstreamSessions

    listed = [{"name": "search", "inputSchema": {"type": "object"}}]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="hung") as store:
        sync_listing(store, McpListing("fake", listed, FAKE))

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="hung") as store:
            async with UpstreamSessions(listing_wait=2.0, listing_timeout=0.01) as sessions:
                assert await forward_call(store, "search", {}, sessions=sessions) == "called search"
                answered = fake_upstream.answered
                with pytest.raises(UnknownToolError, match="no tool named 'nope'"):
                    await forward_call(store, "nope", {}, sessions=sessions)
                assert fake_upstream.answered == answered
                fake_upstream.gates.append(anyio.Event())  # never set: the listing after the notification hangs
                fake_upstream.held = anyio.Event()
                await fake_upstream.change("search", "late_news")
                await fake_upstream.held.wait()
                with pytest.raises(McpSyncError, match="upstream 'fake' lists it as 'late_news'"):
                    await forward_call(store, "late_news", {}, sessions=sessions)

    anyio.run(main)
    assert fake_upstream.calls == ["search"]


@pytest.mark.parametrize(
    "upstream",
    [
        Upstream(
            "stdio",
            command="fake-mcp",
            args=("--dsn", "postgresql://app:pw0rd@db/app"),
            env={"FAKE_TOKEN": "s3cret", "FAKE_KEY": "Bearer ${FAKE_KEY}"},
        ),
        Upstream("http", url="https://me:pw0rd@mcp.example.com/t/tok3n/mcp?key=s3cret", headers={"X-Key": "k3y"}),
    ],
    ids=["stdio", "http"],
)
def test_a_tool_an_upstream_added_that_the_catalog_lacks_is_refused_naming_the_sync(
    dsn: str, fake_upstream: _FakeUpstream, upstream: Upstream
) -> None:
    """An upstream's latest listing names a tool the catalog does not have (it was added since the sync): a call of it,
    by its name, id or namespaced name, is not sent; the error, which the client (the model) reads, names the tool and
    the provider and says to sync that upstream again, and holds nothing of how it is reached: no command, argument,
    URL, env or header name or value (a DSN or token there is a secret; a value written as ``...`` in a command the user
    copies would be recorded over the real one). The gateway writes nothing: the catalog is as synced, and a name
    nothing lists is unknown as before."""
    from toolstore import McpSyncError, UnknownToolError
    from toolstore._mcp_sessions import UpstreamSessions

    listed = [{"name": n, "inputSchema": {"type": "object"}} for n in ("search", "list_alerts")]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="added") as store:
        sync_listing(store, McpListing("fake", listed, upstream))

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="added") as store:
            async with UpstreamSessions() as sessions:
                assert await forward_call(store, "search", {}, sessions=sessions) == "called search"
                await fake_upstream.change("search", "list_alerts", "late_news")
                await fake_upstream.listings(2)
                for name in ("late_news", "fake__late_news", "fake.late_news"):
                    with pytest.raises(McpSyncError) as refused:
                        await forward_call(store, name, {}, sessions=sessions)
                    message = str(refused.value)
                    assert f"tool {name!r} is not in catalog 'added', but upstream 'fake' lists it" in message, message
                    assert "toolstore -c added sync mcp --provider fake ... with the command or URL" in message
                    for hidden in ("fake-mcp", "--dsn", "pw0rd", "FAKE_", "s3cret", "example.com", "tok3n", "X-Key"):
                        assert hidden not in message, (hidden, message)
                    assert "=..." not in message and ": ..." not in message, message
                with pytest.raises(UnknownToolError, match="no tool named 'nope'"):
                    await forward_call(store, "nope", {}, sessions=sessions)
            assert [t.id for t in await store.tools()] == ["fake.list_alerts", "fake.search"]

    anyio.run(main)
    assert fake_upstream.calls == ["search"]


def test_the_listings_of_every_upstream_are_awaited_at_once_for_a_tool_the_catalog_lacks(dsn: str) -> None:
    """A call of a name the catalog lacks asks every upstream's session for its latest listing, each of which may wait
    for a listing under way (``listing_wait``): they are awaited together, not one after the other (a made-up name cost
    that wait once per upstream), and the one that lists the name is named."""
    from toolstore import McpSyncError

    class Sessions:
        def __init__(self) -> None:
            self.waiting, self.most = 0, 0

        async def listed(self, upstream: Upstream) -> frozenset[str]:
            self.waiting += 1
            self.most = max(self.most, self.waiting)
            for _ in range(5):  # a listing under way: the others are asked meanwhile
                await anyio.sleep(0)
            self.waiting -= 1
            return frozenset({"search", *(["late_news"] if upstream.command == "b-mcp" else [])})

    listed = [{"name": "search", "inputSchema": {"type": "object"}}]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="many") as store:
        for provider in ("a", "b", "c"):
            sync_listing(store, McpListing(provider, listed, Upstream("stdio", command=f"{provider}-mcp")))
    sessions = Sessions()

    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="many") as store:
            with pytest.raises(McpSyncError, match="upstream 'b' lists it as 'late_news'"):
                await forward_call(store, "late_news", {}, sessions=sessions)  # type: ignore[arg-type]

    anyio.run(main)
    assert sessions.most == 3


def test_the_gateways_errors_name_the_upstream_by_its_provider_only(dsn: str, fake_upstream: _FakeUpstream) -> None:
    """The errors of a forwarded call reach the client, the model: a tool the upstream no longer lists, a call that
    fails, one that does not answer in time each name the upstream by its provider, never by its command, arguments or
    URL (a DSN with its password as an argument, a token in a URL's path)."""
    from toolstore import McpSyncError

    listed = [{"name": n, "inputSchema": {"type": "object"}} for n in ("search", "gone", "broken", "nap", "leaky")]
    upstream = Upstream("stdio", command="fake-mcp", args=("--dsn", "postgresql://app:pw0rd@db/app"))
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="named") as store:
        sync_listing(store, McpListing("fake", listed, upstream))
    fake_upstream.names = {"search", "broken", "nap", "leaky"}

    async def call_tool(name: str, arguments: dict[str, Any]) -> str:
        fake_upstream.calls.append(name)
        if name == "broken":
            raise RuntimeError("boom")
        if name == "nap":
            await anyio.sleep_forever()
        if name == "leaky":  # as httpx words a refusal: the URL with its path and query
            raise RuntimeError(
                "Client error '401 Unauthorized' for url 'https://u:pw0rd@mcp.example.com:8443/v1/sk-x9/mcp?token=t0k'"
            )
        return f"called {name}"

    fake_upstream.call_tool = call_tool  # type: ignore[method-assign]
    messages: list[str] = []

    async def main() -> None:
        from toolstore._mcp_sessions import UpstreamSessions

        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="named") as store:
            async with UpstreamSessions() as sessions:
                assert await forward_call(store, "search", {}, sessions=sessions) == "called search"
                for name, timeout in [("gone", 30.0), ("broken", 30.0), ("nap", 0.05), ("leaky", 30.0)]:
                    with pytest.raises(McpSyncError) as refused:
                        await forward_call(store, name, {}, sessions=sessions, timeout=timeout)
                    messages.append(str(refused.value))

    anyio.run(main)
    assert messages[0].startswith("upstream 'fake' no longer offers tool 'gone'"), messages
    assert messages[1] == "upstream 'fake' failed on 'broken': boom", messages
    assert messages[2] == "upstream 'fake' did not answer 'nap' within 0.05 s", messages
    assert messages[3] == "upstream 'fake' failed on 'leaky': Client error '401 Unauthorized' for url " + (
        "'https://mcp.example.com:8443'"
    ), messages
    secrets = ("fake-mcp", "--dsn", "pw0rd", "stdio", "sk-x9", "t0k")
    assert not [m for m in messages if any(s in m for s in secrets)], messages
    assert fake_upstream.calls == ["search", "broken", "nap", "leaky"]


def test_the_gateway_says_with_what_status_an_upstream_that_exits_at_once_ended(dsn: str) -> None:
    """A call whose stdio upstream exited before it answered said only the SDK's "Connection closed": the SDK does not
    hand on the server's exit status. The call's error says it now, through a gateway's sessions or a session of its
    own; a server that ends with status 0 is said as before."""
    from toolstore._mcp_sessions import UpstreamSessions

    quits = {"name": "quit", "description": "Quit at once", "inputSchema": {"type": "object"}}
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="quits") as store:
        for provider, code in (("quitter", 5), ("leaver", 0)):
            upstream = Upstream("stdio", command=sys.executable, args=("-c", f"import sys; sys.exit({code})"))
            sync_listing(store, McpListing(provider, [quits], upstream))

    async def main() -> list[str]:
        said = []
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="quits") as store:
            async with UpstreamSessions() as sessions:
                for name, shared in (("quitter.quit", sessions), ("quitter.quit", None), ("leaver.quit", None)):
                    with pytest.raises(McpSyncError) as raised:
                        await forward_call(store, name, {}, timeout=30, sessions=shared)
                    said.append(str(raised.value))
        return said

    assert anyio.run(main) == [
        "upstream 'quitter' failed on 'quit': Connection closed (the server exited with status 5)",
        "upstream 'quitter' failed on 'quit': Connection closed (the server exited with status 5)",
        "upstream 'leaver' failed on 'quit': Connection closed",
    ]
