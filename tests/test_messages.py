"""Message lists in the three shapes agents hold (each fixture validated against the openai and anthropic SDK types):
turns, calls, failures, bounded reading, bad input naming the message index and field; and the agent-loop helper
recording what the model called in the session log, through the real SDKs."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from pydantic import TypeAdapter

from toolstore import (
    AsyncToolStore,
    InvalidInputError,
    Tool,
    ToolStore,
    UnknownToolError,
    export_catalog,
    parse_tools,
    read_messages,
)
from toolstore._messages import DIALECTS
from toolstore.integrations import anthropic as ts_anthropic
from toolstore.integrations import openai as ts_openai

CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "find the report"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "fs__cd", "arguments": '{"folder": "docs"}'}},
            {"id": "c2", "type": "function", "function": {"name": "find", "arguments": '{"name": "report"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "tool", "tool_call_id": "c2", "content": "report.txt"},
    {"role": "assistant", "content": "Found report.txt."},
    {"role": "user", "content": [{"type": "text", "text": "sort it by line"}]},
]
RESPONSES = [
    {"role": "user", "content": [{"type": "input_text", "text": "find the report"}]},
    {"type": "function_call", "call_id": "c1", "name": "fs__cd", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "c2", "name": "find", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c2", "output": "report.txt"},
    {"role": "assistant", "content": "Found report.txt."},
    {"role": "user", "content": "sort it by line"},
]
ANTHROPIC = [
    {"role": "user", "content": "find the report"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "c1", "name": "fs__cd", "input": {"folder": "docs"}},
            {"type": "tool_use", "id": "c2", "name": "find", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "no such folder", "is_error": True},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Found report.txt."}]},
    {"role": "user", "content": [{"type": "text", "text": "sort it by line"}]},
]
SHAPES = {
    "openai-chat": (CHAT, TypeAdapter(list[openai.types.chat.ChatCompletionMessageParam])),
    "openai-responses": (RESPONSES, TypeAdapter(list[openai.types.responses.ResponseInputItemParam])),
    "anthropic": (ANTHROPIC, TypeAdapter(list[anthropic.types.MessageParam])),
}


@pytest.mark.parametrize("dialect", list(SHAPES))
def test_each_shape_reads_into_turns_and_calls(dialect: str) -> None:
    messages, sdk_type = SHAPES[dialect]
    sdk_type.validate_python(messages)  # the fixture is what the SDK accepts
    conv = read_messages(messages)
    assert conv.dialect == dialect and conv.request == "sort it by line"
    assert [t.request for t in conv.turns] == ["find the report", "sort it by line"]
    assert [(c.name, c.id) for c in conv.turns[0].tool_calls] == [("fs__cd", "c1"), ("find", "c2")]
    assert conv.turns[1].tool_calls == [] and [c.name for c in conv.tool_calls] == ["fs__cd", "find"]
    assert conv.failed == (frozenset({"c2"}) if dialect == "anthropic" else frozenset())
    last = read_messages(messages, turns=1)
    assert [t.request for t in last.turns] == ["sort it by line"] and last.tool_calls == []


CUSTOM_CHAT_CALL = {"id": "c1", "type": "custom", "custom": {"name": "patch", "input": "+x"}}
CUSTOM_CALLS = {  # a custom tool's call (free-form input, not JSON arguments) as the first item that shows the dialect
    "openai-chat": [
        {"role": "user", "content": "fix the failing test"},
        {"role": "assistant", "tool_calls": [CUSTOM_CHAT_CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "applied"},
        {"role": "user", "content": "now run the tests"},
    ],
    "openai-responses": [
        {"role": "user", "content": "fix the failing test"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "+x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "applied"},
        {"role": "user", "content": "now run the tests"},
    ],
}


@pytest.mark.parametrize("dialect", list(CUSTOM_CALLS))
def test_custom_tool_calls_are_read_and_their_dialect_detected(dialect: str) -> None:
    messages = CUSTOM_CALLS[dialect]
    SHAPES[dialect][1].validate_python(messages)
    conv = read_messages(messages)
    assert conv.dialect == dialect and conv.request == "now run the tests"
    assert [(c.name, c.arguments, c.id) for c in conv.tool_calls] == [("patch", "+x", "c1")]


@pytest.mark.parametrize("dialect", list(CUSTOM_CALLS))
def test_a_custom_tools_input_stays_text_when_it_reads_as_json(dialect: str) -> None:
    """A custom tool takes free-form text: input that happens to be a JSON object (a grammar may produce one) is the
    text the model wrote, not parsed arguments; an input that is no string is refused, naming the message."""
    messages = json.loads(json.dumps(CUSTOM_CALLS[dialect]).replace('"+x"', json.dumps('{"a": 1}')))
    SHAPES[dialect][1].validate_python(messages)
    assert [c.arguments for c in read_messages(messages).tool_calls] == ['{"a": 1}']
    bad = json.loads(json.dumps(CUSTOM_CALLS[dialect]).replace('"+x"', "{}"))
    with pytest.raises(
        InvalidInputError, match=r"^messages\[1\]: a custom tool call's input must be a string, got dict"
    ):
        read_messages(bad)


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 5000 + "]" * 5000,
        '{"n": ' + "9" * 5000 + "}",
        '{"a": ' * 5000 + "1" + "}" * 5000,
        '{"a": ' * 150 + "1" + "}" * 150,
    ],
    ids=["nested", "integer past Python's digits", "object nested 5,000 deep", "object nested 150 deep"],
)
def test_arguments_the_parser_refuses_are_kept_as_text(raw: str) -> None:
    """Arguments nested deeper than 100 levels are kept as text on every Python: an object nested 5,000 deep was
    text on 3.11 and 3.12 (json.loads gave up) and a dict on 3.13, 150 deep a dict on each."""
    call = {"id": "c1", "type": "function", "function": {"name": "send", "arguments": raw}}
    conv = read_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [call]}])
    assert conv.tool_calls[0].arguments == raw


def _bad(dialect: str) -> list[tuple[list[Any], str]]:
    user = {"role": "user", "content": "hi"}
    common = [
        ([user, 7], r"messages\[1\]: expected an object, got int"),
        ([user, {"role": 5, "content": "x"}], r"messages\[1\]\.role: expected one of .*, got int"),
        ([user, {"role": "robot", "content": "x"}], r"messages\[1\]\.role: expected one of .*, got 'robot'"),
        ([{"content": "no role"}], r"messages\[0\]\.role: expected one of .*, got nothing"),
        ([user, {"role": "user", "content": 3}], r"messages\[1\]\.content: expected a string or a list of parts"),
        ([{"role": "user", "content": [{"text": "x"}]}], r"messages\[0\]\.content\[0\]: expected .* with a type"),
    ]
    if dialect == "openai-chat":
        call = {"id": "x", "type": "function", "function": {"arguments": "{}"}}
        return [
            *common,
            ([user, {"role": "assistant", "tool_calls": [call]}], r"messages\[1\]\.tool_calls\[0\]\.function\.name"),
        ]
    if dialect == "openai-responses":
        item = {"type": "function_call", "call_id": "x", "arguments": "{}"}
        return [*common, ([user, item], r"messages\[1\]\.name: expected a non-empty string")]
    block = {"type": "tool_use", "id": "x", "input": {}}
    return [*common, ([user, {"role": "assistant", "content": [block]}], r"messages\[1\]\.content\[0\]\.name")]


@pytest.mark.parametrize("dialect", list(SHAPES))
def test_bad_input_names_the_message_and_field(dialect: str) -> None:
    for messages, error in _bad(dialect):
        with pytest.raises(InvalidInputError, match=error):
            read_messages(messages, dialect)


@pytest.mark.parametrize(
    ("kind", "said"),
    [(3, "3"), (10**400, "an integer over 1000 bits"), (None, "None"), (["text"], "['text']"), ({}, "{}")],
    ids=["int", "huge int", "null", "list", "object"],
)
def test_a_content_parts_type_that_is_no_string_is_named(kind: object, said: str) -> None:
    """A content part whose type was a number, null or a list was said to have 'no type'; the type given is named (a
    huge integer as one: Python refuses to print it). The dialect told from the messages (auto, the default) hashed
    each part's type, so a list or an object there was a TypeError."""
    messages = [{"role": "user", "content": [{"type": kind, "text": "hello"}]}]
    for dialect in ("anthropic", "auto"):
        with pytest.raises(InvalidInputError) as raised:
            read_messages(messages, dialect)
        assert str(raised.value) == (
            f"messages[0].content[0]: expected a string or an object with a type, got a type that is no string, {said}"
        )
    with pytest.raises(
        InvalidInputError, match=r"content\[0\]: expected a string or an object with a type, got no type"
    ):
        read_messages([{"role": "user", "content": [{"text": "hello"}]}], "anthropic")


TOOLS = [
    Tool(id="fs.cd", name="cd", provider="fs", description="Change the current directory"),
    Tool(id="fs.find", name="find", provider="fs", description="Find files by name"),
    Tool(id="fs.sort", name="sort", provider="fs", description="Sort the lines of a file"),
    Tool(id="fs.cat", name="cat", provider="fs", description="Print a file"),
    Tool(id="mail.send", name="send", provider="mail", description="Send an email"),
]


@pytest.fixture
def fs(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    return store


@pytest.mark.parametrize("dialect", list(SHAPES))
def test_the_helper_records_each_call_once(fs: ToolStore, dialect: str) -> None:
    messages = SHAPES[dialect][0]
    first = ts_openai.route_messages(fs, messages, session="s1", k=3)
    assert first.query == "sort it by line" and first.session == "s1" and first.unresolved == []
    again = ts_openai.route_messages(fs, messages, session="s1", k=3)  # the same list again: nothing new
    log = fs.session_log("s1")
    assert [(c.tool_id, c.call_id, c.ok) for c in log] == [
        ("fs.cd", "c1", True),
        ("fs.find", "c2", dialect != "anthropic"),
    ]
    assert {r.tool.id: r.signals.transition for r in again}.get("fs.find") is None  # nothing follows find yet
    fs.record_calls("s0", ["fs.find", "fs.sort"])  # another session taught find -> sort
    ranked = {r.tool.id: r.signals.transition for r in ts_openai.route_messages(fs, messages, session="s1", k=3)}
    assert ranked["fs.sort"] == 1


LEGACY = [  # Chat Completions before tool_calls: the assistant's function_call, answered by a function message
    {"role": "user", "content": "find the report"},
    {"role": "assistant", "content": None, "function_call": {"name": "find", "arguments": '{"name": "report"}'}},
    {"role": "function", "name": "find", "content": "report.txt"},
    {"role": "user", "content": "sort it by line"},
]


def test_a_legacy_function_call_is_read_as_a_call(fs: ToolStore) -> None:
    """An assistant message's legacy function_call (older loops, stored conversations) was read as no call: route()
    looked back on nothing and calls() found none in a reply that had one. It reads as one call without a call id,
    from the SDK's own ChatCompletion as from the dicts its params types accept; a list of it alone is told to be
    Chat Completions; in a list read as another dialect it is refused by name, as tool_calls are, and one without a
    name is refused naming the field. A session logs it once, under an id made from its turn."""
    SHAPES["openai-chat"][1].validate_python(LEGACY)
    conv = read_messages(LEGACY[:2])
    assert conv.dialect == "openai-chat"
    assert [(c.name, c.arguments, c.id, c.index) for c in conv.turns[0].tool_calls] == [
        ("find", {"name": "report"}, None, 1)
    ]
    choice = {"index": 0, "finish_reason": "function_call", "message": LEGACY[1]}
    reply = ChatCompletion.model_validate(
        {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    )
    offered = fs.route("find the report", k=3)
    [call] = ts_openai.calls(offered, reply)
    assert (call.tool.id, call.name, call.arguments, call.id) == ("fs.find", "find", {"name": "report"}, None)
    invented = {**LEGACY[1], "function_call": {"name": "grep", "arguments": "{}"}}
    with pytest.raises(UnknownToolError, match="no offered tool is named 'grep'"):
        ts_openai.calls(offered, invented)
    messages = [LEGACY[0], reply.choices[0].message, *LEGACY[2:]]
    routed = fs.route(messages=messages, k=5, weights={"recent": 1.0})
    assert routed.query == "sort it by line" and {r.tool.id: r.signals.recent for r in routed}["fs.find"] == 1
    assert ts_openai.route_messages(fs, messages, session="legacy", k=3).unresolved == []
    assert ts_openai.route_messages(fs, messages, session="legacy", k=3).unresolved == []
    [logged] = fs.session_log("legacy")
    assert logged.tool_id == "fs.find" and (logged.call_id or "").startswith("function_call:")
    said = r"^messages\[1\] has function_call, which only openai-chat messages have, but dialect='anthropic' was given"
    with pytest.raises(InvalidInputError, match=said):
        read_messages(LEGACY, "anthropic")
    nameless = {**LEGACY[1], "function_call": {"arguments": "{}"}}
    with pytest.raises(InvalidInputError, match=r"^messages\[1\]\.function_call\.name: expected a non-empty string"):
        read_messages([LEGACY[0], nameless])


def test_unresolved_calls_are_reported_not_recorded(fs: ToolStore) -> None:
    messages = [
        {"role": "user", "content": "print the file"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "nope", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "?"}]},
    ]
    result = ts_anthropic.route_messages(fs, messages, session="s", k=2)
    assert result.unresolved == ["nope"] and fs.session_log("s") == []
    offered = fs.route("print the file", k=2)
    assert "fs.cat" in offered.ids
    messages[1]["content"][0]["name"] = offered.names[offered.ids.index("fs.cat")]  # type: ignore[index]
    assert ts_anthropic.route_messages(fs, messages, session="s", offered=offered, k=2).unresolved == []
    assert [c.tool_id for c in fs.session_log("s")] == ["fs.cat"]


def test_openai_loop_with_a_session_through_the_sdk(fs: ToolStore) -> None:
    """The README's loop: each step records what the model called since the last one, then routes."""
    script = iter(["find", "sort", None])

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        name = next(script)
        offered = [t["function"]["name"] for t in body["tools"]]
        message: dict[str, Any] = {"role": "assistant", "content": "done"}
        if name is not None:
            assert name in offered, (name, offered)
            call = {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": "{}"}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        return httpx2.Response(
            200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        )

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://api.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    messages: list[Any] = [{"role": "user", "content": "find the report and sort its lines"}]
    result = None
    while True:
        result = ts_openai.route_messages(fs, messages, session="chat-1", offered=result, k=3)
        reply = client.chat.completions.create(model="m", messages=messages, tools=result.definitions("openai"))
        messages.append(reply.choices[0].message)
        if not reply.choices[0].message.tool_calls:
            break
        for call in ts_openai.calls(result, reply):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ran {call.tool.id}"})
    assert [(c.tool_id, c.call_id) for c in fs.session_log("chat-1")] == [
        ("fs.find", "call_find"),
        ("fs.sort", "call_sort"),
    ]
    assert fs.transitions() == [{"prev_tool": "fs.find", "next_tool": "fs.sort", "n": 1}]


def test_async_helper_records_and_routes(dsn: str, fs: ToolStore) -> None:
    async def main() -> Any:
        async with AsyncToolStore(dsn, embedder=fs.embedder, catalog=fs.catalog) as store:
            result = await ts_openai.aroute_messages(store, CHAT, session="a1", k=3)
            return result, await store.session_log("a1")

    result, log = asyncio.run(main())
    assert result.query == "sort it by line" and [c.tool_id for c in log] == ["fs.cd", "fs.find"]


def test_async_helper_does_not_log_calls_again_after_a_prune(dsn: str, fs: ToolStore) -> None:
    """A session whose calls a prune took all: the same list again logs nothing, and a later call only itself."""
    more = [
        *CHAT,
        {
            "role": "assistant",
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "sort", "arguments": "{}"}}],
        },
    ]

    async def main() -> Any:
        async with AsyncToolStore(dsn, embedder=fs.embedder, catalog=fs.catalog) as store:
            await ts_openai.aroute_messages(store, CHAT, session="a1", k=3)
            with fs.connection() as conn:
                conn.execute("update session_calls set called_at = called_at - interval '30 days'")
            pruned = await store.prune_sessions(older_than=timedelta(days=7))
            await ts_openai.aroute_messages(store, CHAT, session="a1", k=3)
            again = await store.session_log("a1")
            await ts_openai.aroute_messages(store, more, session="a1", k=3)
            return pruned, again, await store.session_log("a1")

    pruned, again, log = asyncio.run(main())
    assert pruned["calls"] == 2 and again == [] and [(c.tool_id, c.call_id) for c in log] == [("fs.sort", "c3")]
    assert fs.transitions() == []


CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "Customer records.",
    "tools": [{"type": "function", "name": "search", "description": "Search customers.", "parameters": None}],
}
TICKETS = {
    "type": "namespace",
    "name": "tickets",
    "description": "Support tickets.",
    "tools": [{"type": "function", "name": "search", "description": "Search tickets.", "parameters": None}],
}
NAMESPACED = [  # the model called crm's search, inside its namespace (two namespaces have a "search")
    {"role": "user", "content": "find the customer Ada"},
    {"type": "function_call", "call_id": "n1", "namespace": "crm", "name": "search", "arguments": '{"q": "Ada"}'},
    {"type": "function_call_output", "call_id": "n1", "output": "Ada Lovelace"},
    {"role": "user", "content": "now open a ticket for her"},
]


def test_a_call_inside_a_responses_namespace_is_resolved_in_it(store: ToolStore) -> None:
    """A Responses call item of a tool inside a namespace names it (``namespace``): the namespace is its tools'
    provider, so the call means crm's search, not tickets' (by name alone "search" is ambiguous), when read, recorded
    in a session (resolved across the catalog) or resolved among the tools offered."""
    SHAPES["openai-responses"][1].validate_python(NAMESPACED)
    store.upsert(parse_tools([CRM, TICKETS]))
    result = ts_openai.route_messages(store, NAMESPACED, session="n", k=2)
    assert result.unresolved == [] and [c.tool_id for c in store.session_log("n")] == ["crm.search"]
    offered = store.route("search", k=2)
    assert sorted(offered.names) == ["crm__search", "tickets__search"]
    assert [c.tool.id for c in ts_openai.calls(offered, NAMESPACED[1:2])] == ["crm.search"]
    ts_openai.route_messages(store, NAMESPACED, session="o", offered=offered, k=2)
    assert [c.tool_id for c in store.session_log("o")] == ["crm.search"]
    only_tickets = store.route("search", k=1, allow=["tickets.*"])
    assert only_tickets.names == ["search"]  # offered by its plain name: the crm call must not resolve to it
    with pytest.raises(UnknownToolError, match="no offered tool is in namespace 'crm'"):
        ts_openai.calls(only_tickets, NAMESPACED[1:2])
    [call] = read_messages(NAMESPACED).tool_calls
    assert (call.namespace, call.name, call.qualified_name) == ("crm", "search", "crm__search")


def test_a_namespaced_call_resolves_when_namespace_and_name_pass_64_characters(dsn: str, store: ToolStore) -> None:
    """A call inside a namespace names the pair (namespace, name): it is resolved as the pair, not as one joined
    string, whose catalog-wide form carries a hash once namespace__name is over 64 characters (14 + 2 + 56 here), in
    route()'s messages, a session's log (both stores) and among the tools offered."""
    name = "create_" + "x" * 49  # 56 characters: salesforce_crm__<name> is 72
    crm = {**CRM, "name": "salesforce_crm", "tools": [{**CRM["tools"][0], "name": name}]}
    other = {**TICKETS, "tools": [{**TICKETS["tools"][0], "name": name}]}  # the same name in another namespace
    store.upsert(parse_tools([crm, other]))
    call = {"type": "function_call", "call_id": "l1", "namespace": "salesforce_crm", "name": name, "arguments": "{}"}
    messages = [NAMESPACED[0], call, {"type": "function_call_output", "call_id": "l1", "output": "ok"}, NAMESPACED[3]]
    assert store.route(messages=messages, k=2).unresolved == []
    result = ts_openai.route_messages(store, messages, session="l", k=2)
    assert result.unresolved == [] and [c.tool_id for c in store.session_log("l")] == [f"salesforce_crm.{name}"]

    async def main() -> list[str]:
        async with AsyncToolStore(dsn, embedder=store.embedder, catalog=store.catalog) as astore:
            await ts_openai.aroute_messages(astore, messages, session="la", k=2)
            return [c.tool_id for c in await astore.session_log("la")]

    assert asyncio.run(main()) == [f"salesforce_crm.{name}"]
    offered = store.route(name, k=2)
    assert [c.tool.id for c in ts_openai.calls(offered, [call])] == [f"salesforce_crm.{name}"]


def test_a_namespaced_call_resolves_to_a_tool_that_names_its_own_provider(store: ToolStore) -> None:
    """A tool of a namespace that names its own provider (x-toolstore, a benchmark row's provider) is still exported
    and called inside that namespace: a call's namespace is matched on the tool's own namespace, falling back to its
    provider, among the offered tools and across the catalog."""
    own = {**CRM, "tools": [{**CRM["tools"][0], "x-toolstore": {"provider": "sales"}}]}
    store.upsert(parse_tools([own, TICKETS]))
    assert [t.id for t in store.tools()] == ["sales.search", "tickets.search"]
    [crm, _] = export_catalog(store.tools(), "openai-responses")["tools"]
    assert (crm["name"], [t["name"] for t in crm["tools"]]) == ("crm", ["search"])  # exported inside crm
    assert store.route(messages=NAMESPACED, k=2).unresolved == []
    result = ts_openai.route_messages(store, NAMESPACED, session="s", k=2)
    assert result.unresolved == [] and [c.tool_id for c in store.session_log("s")] == ["sales.search"]
    offered = store.route("search", k=2)
    assert [c.tool.id for c in ts_openai.calls(offered, NAMESPACED[1:2])] == ["sales.search"]
    sales = {**NAMESPACED[1], "namespace": "sales"}  # no namespace is called so: the provider answers only without one
    with pytest.raises(UnknownToolError, match="no offered tool is in namespace 'sales'"):
        ts_openai.calls(offered, [sales])


def test_the_calls_of_another_dialect_are_refused_not_left_unread() -> None:
    """A list read as another dialect than its calls' (a dialect given wrongly, or a list that mixes dialects) read as
    holding none of them: route() looked back on no call and route_messages logged none, without a word. Such an item
    is an InvalidInputError naming it, its mark and the dialect to give; one list in one dialect reads as before."""
    chat_call = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]}
    tool_use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    ask = {"role": "user", "content": "file a bug"}
    refused = [
        (
            [ask, chat_call],
            "anthropic",
            "messages[1] has tool_calls, which only openai-chat messages have, but dialect='anthropic' was given",
        ),
        (
            [ask, {"role": "tool", "tool_call_id": "c", "content": "ok"}],
            "openai-responses",
            "messages[1] has role 'tool', which only openai-chat messages have, but dialect='openai-responses' was "
            "given",
        ),
        (
            [ask, tool_use],
            "openai-chat",
            "messages[1] has a tool_use block, which only anthropic messages have, but dialect='openai-chat' was given",
        ),
        (
            [ask, chat_call, tool_use, result],
            "auto",
            "messages[2] has a tool_use block, which only anthropic messages "
            "have, but the list is read as openai-chat (it mixes dialects)",
        ),
    ]
    for messages, dialect, said in refused:
        with pytest.raises(InvalidInputError) as info:
            read_messages(messages, dialect)
        assert str(info.value).startswith(said), str(info.value)
        assert "give dialect=" in str(info.value)
    assert [c.name for c in read_messages([ask, tool_use, result], "anthropic").tool_calls] == ["f"]
    assert [c.name for c in read_messages([ask, chat_call], "openai-chat").tool_calls] == ["f"]


def test_a_whole_reply_in_the_list_is_named_with_what_to_add_instead() -> None:
    """An agent loop that appended the model's whole reply rather than its message (``messages.append(reply)``) was
    told ``messages[1].role: ... got nothing`` for a ChatCompletion or a Responses Response: each is named, with what
    to add instead, whatever the dialect. An Anthropic Message, which holds its role and content (``calls()`` takes
    it), was read as a Responses item (its ``type: message``), so the list 'mixed dialects': it reads as its message."""
    ask = {"role": "user", "content": "file a bug"}
    chat = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        }
    )
    response = Response.model_validate(
        {
            "id": "r",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
        }
    )
    said = {
        "chat": "messages[1] is a whole Chat Completions reply, not a message: append reply.choices[0].message",
        "response": "messages[1] is a whole Responses reply, not an input item: add its items (input += "
        "response.output)",
    }
    for reply, key in ((chat, "chat"), (response, "response")):
        for dialect in ("auto", *DIALECTS):
            with pytest.raises(InvalidInputError) as info:
                read_messages([ask, reply], dialect)
            assert str(info.value) == said[key], (key, dialect)
    message = Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    read = read_messages([ask, message, result, {"role": "user", "content": "and close it"}])
    assert (read.dialect, [(c.name, c.id) for c in read.tool_calls], read.request) == (
        "anthropic",
        [("f", "t")],
        "and close it",
    )


def test_a_tool_input_nested_as_deep_as_json_reads_is_read(fs: ToolStore) -> None:
    """A model's tool input (or a tool result's part) nested a few hundred levels deep, which Python's JSON parser
    reads, made reading the messages a RecursionError (a dict walked two frames a level) or, the SDK's ToolUseBlock,
    pydantic's ValueError 'Maximum serialization depth exceeded': the loop's next step failed, and every later one
    while the message was among the last turns. Read as any input is; the call logged and resolved."""
    depth = 800
    deep = json.loads('{"a": ' * depth + "1" + "}" * depth)
    part = {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "ok", "extra": deep}]}
    for use in (
        {"type": "tool_use", "id": "c1", "name": "find", "input": deep},
        anthropic.types.ToolUseBlock(type="tool_use", id="c1", name="find", input=deep),
    ):
        messages = [
            {"role": "user", "content": "find the report"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [part]},
            {"role": "user", "content": "sort it by line"},
        ]
        result = ts_anthropic.route_messages(fs, messages, session=f"deep-{type(use).__name__}", k=3)
        assert result.unresolved == [] and [c.tool_id for c in fs.session_log(result.session or "")] == ["fs.find"]
        (call,) = ts_anthropic.calls(result, messages[1])
        assert (call.tool.id, call.arguments) == ("fs.find", deep)


def test_a_responses_loop_on_previous_response_id_routes_its_request_with_only_the_new_items(
    dsn: str, fs: ToolStore
) -> None:
    """A Responses loop that keeps its conversation on the server (``previous_response_id``) sends each step only the
    new items, the calls' outputs, which hold no user request: route_messages refused them ('no user message with text
    in messages'), its calls unlogged, and took no request beside them (TypeError: unexpected keyword 'query'). Given
    ``query``, the step logs the items' calls and routes it, with the items as earlier context, as route() does; from
    an AsyncToolStore too."""
    items = [
        {"type": "function_call", "call_id": "p1", "name": "find", "arguments": '{"name": "report"}'},
        {"type": "function_call_output", "call_id": "p1", "output": "report.txt"},
    ]
    result = ts_openai.route_messages(fs, items, query="sort it by line", session="prev", fmt="openai-responses", k=3)
    assert result.query == "sort it by line" and result.fmt == "openai-responses"
    assert result.ids == fs.route("sort it by line", session="prev", k=3).ids
    assert [(c.tool_id, c.call_id) for c in fs.session_log("prev")] == [("fs.find", "p1")]

    async def main() -> Any:
        async with AsyncToolStore(dsn, embedder=fs.embedder, catalog=fs.catalog) as store:
            routed = await ts_openai.aroute_messages(store, items, query="sort it by line", session="aprev", k=3)
            return routed, await store.session_log("aprev")

    routed, log = asyncio.run(main())
    assert routed.ids == result.ids and [(c.tool_id, c.call_id) for c in log] == [("fs.find", "p1")]
