"""Agent loops through the real SDKs: message lists read (three dialects), tools routed for the next call, the
model's calls resolved; Anthropic tool references; langgraph-bigtool retrieval. The providers' HTTP APIs are
played by handlers on the SDKs' own mock transport, which check what the real APIs check (valid, unique names)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import TypeAdapter

from toolstore import (
    AsyncToolStore,
    InvalidInputError,
    RouteCall,
    SessionCall,
    Tool,
    ToolStore,
    UnknownToolError,
    read_messages,
)
from toolstore.integrations import anthropic as ts_anthropic
from toolstore.integrations import langgraph as ts_langgraph
from toolstore.integrations import openai as ts_openai

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PARAMS = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
TOOLS = [
    Tool(
        id=f"{p}.create_issue",
        name="create_issue",
        provider=p,
        description=f"Create an issue in {p}",
        parameters=PARAMS,
    )
    for p in ("github", "jira", "linear")
] + [
    Tool(id="slack.send_message", name="send_message", provider="slack", description="Post a message to Slack"),
    Tool(id="weather.forecast", name="forecast", provider="weather", description="Weather forecast for a city"),
]


@pytest.fixture
def issues(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    return store


def _check_tools(tools: list[dict[str, Any]], key: Any) -> None:
    names = [key(t) for t in tools]
    if len(set(names)) != len(names):
        raise AssertionError("400: Tool names must be unique")
    assert all(VALID.match(n) for n in names), names


# -- reading message lists --------------------------------------------------------------------------------


def test_read_messages_in_three_dialects() -> None:
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "file a bug about login"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "jira__create_issue", "arguments": '{"title": "login"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "JIRA-1"},
        {"role": "user", "content": [{"type": "text", "text": "now tell the team"}]},
    ]
    conv = read_messages(chat)
    assert (conv.dialect, conv.request, conv.request_index) == ("openai-chat", "now tell the team", 4)
    assert [(c.name, c.arguments, c.id, c.index) for c in conv.tool_calls] == [
        ("jira__create_issue", {"title": "login"}, "c1", 2)
    ]
    responses = [
        {"role": "user", "content": [{"type": "input_text", "text": "what's the weather"}]},
        {"type": "function_call", "call_id": "c2", "name": "forecast", "arguments": "{bad json"},
        {"type": "function_call_output", "call_id": "c2", "output": "sunny"},
    ]
    conv = read_messages(responses)
    assert (conv.dialect, conv.request) == ("openai-responses", "what's the weather")
    assert conv.tool_calls[0].arguments == "{bad json"  # kept raw: the model's own output
    assert read_messages("just a string").request == "just a string"
    claude = [
        {"role": "user", "content": "open an issue"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "linear__create_issue", "input": {"title": "x"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
    ]
    conv = read_messages(claude)
    assert (conv.dialect, conv.request, conv.request_index) == (
        "anthropic",
        "open an issue",
        0,
    )  # a tool result is no request
    assert conv.tool_calls[0].arguments == {"title": "x"}
    # SDK objects read like dicts
    message = anthropic.types.Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "x",
            "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "t9", "name": "forecast", "input": {"city": "Oslo"}}],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    assert read_messages([message], "anthropic").tool_calls[0].arguments == {"city": "Oslo"}
    appended = [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": message.content}]
    assert read_messages(appended).tool_calls[0].id == "t9"  # content blocks appended as the SDK returned them


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ({"role": "user"}, "messages must be a list"),
        ([{"role": "user", "content": "hi"}, 3], r"messages\[1\]: expected an object, got int"),
        ([{"content": "hi"}], r"messages\[0\].role: expected one of .*, got nothing"),
        ([{"role": "user", "content": 5}], r"messages\[0\].content: expected a string or a list of parts, got int"),
        ([{"role": "user", "content": [{"type": "text"}]}], r"messages\[0\].content\[0\].text: expected a non-empty"),
        ([{"role": "assistant", "tool_calls": [{"id": "x"}]}], r"messages\[0\].tool_calls\[0\].function: expected"),
    ],
)
def test_read_messages_names_the_bad_field(messages: Any, error: str) -> None:
    with pytest.raises(InvalidInputError, match=error):
        read_messages(messages)


# -- OpenAI ------------------------------------------------------------------------------------------------


def test_openai_chat_loop_through_the_sdk(issues: ToolStore) -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        seen.append(body)
        _check_tools(body["tools"], lambda t: t["function"]["name"])
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "linear__create_issue", "arguments": '{"title": "login bug"}'},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        if body["messages"][-1]["role"] == "tool":  # the tool's answer is in: the model replies in words
            message = {"role": "assistant", "content": f"done: {body['messages'][-1]['content']}"}
        reply = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
        return httpx2.Response(200, json=reply)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://api.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    messages: list[Any] = [{"role": "user", "content": "create an issue for the login bug"}]
    result = ts_openai.route_messages(issues, messages, k=4)
    reply = client.chat.completions.create(model="gpt-test", messages=messages, tools=result.definitions("openai"))
    calls = ts_openai.calls(result, reply)
    assert [(c.tool.id, c.arguments, c.id) for c in calls] == [
        ("linear.create_issue", {"title": "login bug"}, "call_1")
    ]
    assert "linear__create_issue" in [t["function"]["name"] for t in seen[0]["tools"]]
    # the next turn: the reply joins the list, and the store resolves the name without the old result
    messages += [reply.choices[0].message, {"role": "tool", "tool_call_id": "call_1", "content": "LIN-7"}]
    assert read_messages(messages).tool_calls[0].name == "linear__create_issue"
    assert issues.resolve("linear__create_issue", among=result.ids).id == "linear.create_issue"
    again = ts_openai.route_messages(issues, messages, k=4)  # the SDK's message object reads like a dict
    final = client.chat.completions.create(model="gpt-test", messages=messages, tools=again.definitions("openai"))
    assert seen[-1]["messages"][1]["tool_calls"][0]["function"]["name"] == "linear__create_issue"
    assert final.choices[0].message.content == "done: LIN-7" and ts_openai.calls(again, final) == []


def test_openai_responses_loop_through_the_sdk(issues: ToolStore) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        _check_tools(body["tools"], lambda t: t["name"])
        output = [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_9",
                "name": "forecast",
                "arguments": '{"city": "Oslo"}',
                "status": "completed",
            }
        ]
        reply = {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": body["model"],
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body["tools"],
        }
        return httpx2.Response(200, json=reply)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://api.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    items = [{"role": "user", "content": [{"type": "input_text", "text": "weather forecast for Oslo"}]}]
    result = ts_openai.route_messages(issues, items, k=3)
    response = client.responses.create(model="gpt-test", input=items, tools=result.definitions("openai-responses"))
    [call] = ts_openai.calls(result, response)
    assert (call.tool.id, call.arguments, call.id) == ("weather.forecast", {"city": "Oslo"}, "call_9")


# -- Anthropic ---------------------------------------------------------------------------------------------


def _anthropic(handler: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-ant-test",
        base_url="http://api.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def test_anthropic_loop_through_the_sdk(issues: ToolStore) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        try:
            _check_tools(body["tools"], lambda t: t["name"])
        except AssertionError as exc:
            return httpx2.Response(
                400, json={"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
            )
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": "toolu_1", "name": "github__create_issue", "input": {"title": "login"}}
        ]
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and last[0]["type"] == "tool_result":
            content = [{"type": "text", "text": f"created {last[0]['content']}"}]
        reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx2.Response(200, json=reply)

    client = _anthropic(handler)
    messages = [{"role": "user", "content": "create an issue for the login bug"}]
    result = ts_anthropic.route_messages(issues, messages, k=4)
    raw = [r.tool.name for r in result]
    assert raw.count("create_issue") == 3  # what the API would refuse as tool names ...
    with pytest.raises(anthropic.BadRequestError, match="unique"):
        client.messages.create(
            model="claude-test",
            max_tokens=100,
            messages=messages,
            tools=[{"name": n, "input_schema": PARAMS} for n in raw],
        )
    reply = client.messages.create(
        model="claude-test", max_tokens=100, messages=messages, tools=result.definitions("anthropic")
    )
    [call] = ts_anthropic.calls(result, reply)  # ... and what it accepts
    assert (call.tool.id, call.arguments) == ("github.create_issue", {"title": "login"})
    with pytest.raises(UnknownToolError):
        ts_anthropic.calls(
            result, {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "nope", "input": {}}]}
        )
    # the README's loop: the reply's blocks go back as they are, then the tool results
    messages.append({"role": "assistant", "content": reply.content})  # type: ignore[dict-item]
    results = [{"type": "tool_result", "tool_use_id": call.id, "content": "GH-42"}]
    messages.append({"role": "user", "content": results})  # type: ignore[dict-item]
    again = ts_anthropic.route_messages(issues, messages, k=4)
    assert again.ids == result.ids  # still the user's request, not the tool result
    tools = again.definitions("anthropic")
    final = client.messages.create(model="claude-test", max_tokens=100, messages=messages, tools=tools)
    assert final.content[0].text == "created GH-42" and ts_anthropic.calls(again, final) == []


def test_anthropic_tool_references(issues: ToolStore) -> None:
    everything = issues.tools()
    deferred = ts_anthropic.deferred_definitions(everything)
    assert all(d["defer_loading"] is True for d in deferred)
    TypeAdapter(list[anthropic.types.ToolParam]).validate_python(deferred)
    result = issues.route("post to slack that the issue is fixed", k=2)
    block = ts_anthropic.tool_search_result(result, "toolu_search", deferred=everything)
    TypeAdapter(anthropic.types.ToolResultBlockParam).validate_python(block)
    names = {d["name"] for d in deferred}
    assert [ref["tool_name"] for ref in block["content"]] == [
        n
        for n in (dict(zip([t.id for t in everything], [d["name"] for d in deferred])).get(i) for i in result.ids)
        if n
    ]
    assert all(ref["tool_name"] in names and ref["type"] == "tool_reference" for ref in block["content"])


def test_deferred_given_the_definitions_instead_of_the_tools_is_an_error_saying_what_to_pass(issues: ToolStore) -> None:
    """README: tools = store.tools(), sent as deferred_definitions(tools), then deferred=tools. Passing the definitions
    (dicts without a tool id) was an AttributeError from deep inside the naming code; it is an InvalidInputError
    naming what deferred= takes, from tool_search_result and calls() alike."""
    definitions = ts_anthropic.deferred_definitions(issues.tools())
    result = issues.route("post to slack that the issue is fixed", k=2)
    with pytest.raises(InvalidInputError, match=r"deferred= takes the Tools .*item 0 is a dict"):
        ts_anthropic.tool_search_result(result, "toolu_search", deferred=definitions)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"deferred= takes the Tools .*item 0 is a dict"):
        ts_anthropic.calls(result, _tool_use("create_issue"), deferred=definitions)  # type: ignore[arg-type]


def test_anthropic_tool_search_calls_resolve_the_names_the_search_referenced(issues: ToolStore) -> None:
    """The catalog goes out deferred (catalog-wide names: three create_issue tools, so github__create_issue); the
    search routes github's alone, whose own name in that result is create_issue; the model calls the tool it loaded
    by the name the tool_reference gave, and calls() of the search result resolves it."""
    everything = issues.tools()
    search = {"name": "search_tools", "description": "Find tools", "input_schema": {"type": "object"}}

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        _check_tools(body["tools"], lambda t: t["name"])
        loaded = [r["tool_name"] for r in body["messages"][-1]["content"][0]["content"]]  # the tool_reference blocks
        assert all(r in {t["name"] for t in body["tools"]} for r in loaded)
        use = {"type": "tool_use", "id": "toolu_2", "name": loaded[0], "input": {"title": "login"}}
        reply = {"id": "m", "type": "message", "role": "assistant", "model": body["model"], "content": [use]}
        reply |= {"stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        return httpx2.Response(200, json=reply)

    result = issues.route("create an issue", k=1, providers=["github"])
    assert result.ids == ["github.create_issue"] and result.names == ["create_issue"]
    asked = {"type": "tool_use", "id": "toolu_1", "name": "search_tools", "input": {"query": "create an issue"}}
    messages = [
        {"role": "user", "content": "create an issue for the login bug"},
        {"role": "assistant", "content": [asked]},
        {"role": "user", "content": [ts_anthropic.tool_search_result(result, "toolu_1", deferred=everything)]},
    ]
    tools = [search, *ts_anthropic.deferred_definitions(everything)]
    reply = _anthropic(handler).messages.create(model="claude-test", max_tokens=100, messages=messages, tools=tools)
    assert reply.content[0].name == "github__create_issue"  # type: ignore[union-attr]
    for kwargs in ({}, {"deferred": everything}):
        [call] = ts_anthropic.calls(result, reply, **kwargs)  # type: ignore[arg-type]
        assert (call.tool.id, call.name) == ("github.create_issue", "github__create_issue")
        assert call.arguments == {"title": "login"}
    with pytest.raises(UnknownToolError):  # the search referred to it by its catalog-wide name only
        ts_anthropic.calls(result, _tool_use("create_issue"), deferred=everything)
    assert [c.tool.id for c in ts_anthropic.calls(result, _tool_use("create_issue"))] == ["github.create_issue"]


def _tool_use(name: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": name, "input": {}}]}


# -- langgraph-bigtool ---------------------------------------------------------------------------------------


def test_langgraph_bigtool_retrieves_from_the_store(issues: ToolStore) -> None:
    """create_agent's tool selection runs our retriever. (Executing the selected tool afterwards is left out:
    langgraph-bigtool 0.0.3 calls ToolNode.inject_tool_args, which langgraph-prebuilt 1.1 no longer has.)"""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool
    from langgraph_bigtool import create_agent

    bound: list[list[str]] = []

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            bound.append([getattr(t, "name", "") for t in tools])
            return self

    def make(tool: Tool) -> StructuredTool:
        def call(title: str = "") -> str:
            return f"{tool.id} done"

        return StructuredTool.from_function(call, name=tool.id.replace(".", "_"), description=tool.description)

    registry = {tool.id: make(tool) for tool in issues.tools()}
    retrieve = {"name": "retrieve_tools", "args": {"query": "post a message to slack"}, "id": "r1"}
    script = iter([AIMessage(content="", tool_calls=[retrieve]), AIMessage(content="found it")])
    retriever = ts_langgraph.bigtool_retriever(issues, k=2)
    assert retriever("post a message to slack")[0] == "slack.send_message"
    model = FakeModel(messages=script)
    agent = create_agent(model, registry, retrieve_tools_function=retriever).compile()
    state = agent.invoke({"messages": [{"role": "user", "content": "tell slack hello"}]})
    assert state["selected_tool_ids"] == retriever("post a message to slack")
    assert state["messages"][-1].content == "found it"
    assert "slack_send_message" in bound[-1]  # the next model call was given the retrieved tool


def test_an_empty_bigtool_query_selects_no_tools_and_the_run_goes_on(dsn: str, issues: ToolStore) -> None:
    """The model searches with a blank query first: create_agent's tool selection gets no tools (and tells the model
    so) instead of an InvalidInputError ending the run; its next, real search selects as usual."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph_bigtool import create_agent

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    registry = {
        t.id: StructuredTool.from_function(lambda: "", name=t.id.replace(".", "_"), description=t.description)
        for t in issues.tools()
    }
    retriever = ts_langgraph.bigtool_retriever(issues, k=2)
    for blank in ("", "   \n\t"):
        assert retriever(blank) == []
        assert asyncio.run(_coroutine(dsn, issues, blank)) == []
    searches = [{"name": "retrieve_tools", "args": {"query": q}, "id": f"r{i}"} for i, q in enumerate(["  ", "slack"])]
    script = iter([AIMessage(content="", tool_calls=[c]) for c in searches] + [AIMessage(content="done")])
    agent = create_agent(FakeModel(messages=script), registry, retrieve_tools_function=retriever).compile()
    state = agent.invoke({"messages": [{"role": "user", "content": "tell slack hello"}]})
    answers = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert answers[0] == "Available tools: []" and "slack_send_message" in answers[1], answers
    assert state["selected_tool_ids"][0] == "slack.send_message" and state["messages"][-1].content == "done"


@pytest.mark.parametrize(
    ("options", "message"),
    [({"k": 0}, "k must be an integer from 1 to 1000, got 0"), ({"token_budget": -1}, "token_budget must be None")],
)
def test_a_bigtool_retrievers_bad_options_are_refused_when_it_is_made(
    issues: ToolStore, options: dict[str, Any], message: str
) -> None:
    """bigtool_retriever(store, k=0) was made without a word and raised at the model's first search, ending the
    agent's run; the options are checked when either retriever is made, as route() checks them."""
    with pytest.raises(InvalidInputError, match=message):
        ts_langgraph.bigtool_retriever(issues, **options)
    with pytest.raises(InvalidInputError, match=message):
        ts_langgraph.bigtool_coroutine(issues, **options)  # type: ignore[arg-type]  # made without a store call


async def _coroutine(dsn: str, issues: ToolStore, query: str) -> list[str]:
    async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
        return await ts_langgraph.bigtool_coroutine(store, k=1)(query)


def test_langgraph_bigtool_coroutine_over_the_async_store(dsn: str, issues: ToolStore) -> None:
    async def main() -> list[str]:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            return await ts_langgraph.bigtool_coroutine(store, k=1)("post a message to slack")

    assert asyncio.run(main()) == ["slack.send_message"]


def test_a_call_logged_under_an_earlier_offer_is_not_unresolved(issues: ToolStore) -> None:
    """Step 2 offers only slack: the create_issue call of step 1 (github's, logged then) is ambiguous across the
    catalog, but it is in the log and looked back on, so it is not reported unresolved."""
    from toolstore._result import RoutedTool, RouteResult, Signals
    from toolstore.integrations.openai import route_messages

    def offer(*ids: str) -> RouteResult:
        return RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in issues.tools(list(ids))])

    def call(call_id: str, name: str) -> list[dict[str, Any]]:
        tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        return [
            {"role": "assistant", "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": call_id, "content": "ok"},
        ]

    messages = [{"role": "user", "content": "file a bug about login, then tell the team"}, *call("c1", "create_issue")]
    assert route_messages(issues, messages, session="chat", offered=offer("github.create_issue"), k=2).unresolved == []
    messages += call("c2", "send_message")
    result = route_messages(issues, messages, session="chat", offered=offer("slack.send_message"), k=2)
    assert [c.tool_id for c in issues.session_log("chat")] == ["github.create_issue", "slack.send_message"]
    assert result.unresolved == []
    messages += call("c3", "create_issue")  # a new ambiguous call, offered nothing to resolve it: reported
    assert route_messages(issues, messages, session="chat", k=2).unresolved == ["create_issue"]


def test_a_call_seen_before_a_prune_is_not_unresolved_again(dsn: str, issues: ToolStore) -> None:
    """A call logged under an earlier offer, ambiguous under the next one, is not reported unresolved after retention
    or a prune took it from the log: the session has seen it (its last call id is a later one). Nor is an ambiguous
    call before the last one the session has seen; a new one after it is, by both stores."""
    from toolstore._result import RoutedTool, RouteResult, Signals
    from toolstore.integrations.openai import aroute_messages, route_messages

    def offer(*ids: str) -> RouteResult:
        return RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in issues.tools(list(ids))])

    def call(call_id: str, name: str) -> list[dict[str, Any]]:
        tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
        return [
            {"role": "assistant", "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": call_id, "content": "ok"},
        ]

    async def aunresolved(messages: list[dict[str, Any]], **options: Any) -> list[str]:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            return list((await aroute_messages(store, messages, session="chat", k=2, **options)).unresolved)

    messages = [{"role": "user", "content": "file a bug about login, then tell the team"}, *call("c0", "no_such_tool")]
    assert route_messages(issues, messages, session="chat", k=2).unresolved == ["no_such_tool"]
    messages += call("c1", "create_issue")
    result = route_messages(issues, messages, session="chat", offered=offer("github.create_issue"), k=2)
    assert result.unresolved == []  # reported once: the step that first saw it remembered it
    messages += call("c2", "send_message")
    issues.set_session_retention(max_calls=1)
    route_messages(issues, messages, session="chat", offered=offer("slack.send_message"), k=2)
    assert [c.call_id for c in issues.session_log("chat")] == ["c2"]  # c1 was trimmed
    for offered in (offer("slack.send_message"), None):  # c0 matches nothing, c1 is ambiguous: both seen
        assert route_messages(issues, messages, session="chat", offered=offered, k=2).unresolved == []
        assert asyncio.run(aunresolved(messages, offered=offered)) == []
    assert issues.new_calls("chat", ["c0", "c1", "c2", "c3"]) == ["c3"]
    issues.prune_sessions(older_than=timedelta(0))  # every call taken: the session keeps the call ids it has seen
    assert route_messages(issues, messages, session="chat", k=2).unresolved == []
    assert issues.session_log("chat") == [] and issues.new_calls("chat", ["c0", "c1", "c2"]) == []
    messages += call("c3", "create_issue")  # a new ambiguous call: reported, once
    assert asyncio.run(aunresolved(messages)) == ["create_issue"]
    assert route_messages(issues, messages, session="chat", k=2).unresolved == []
    messages += call("c4", "create_issue")
    assert route_messages(issues, messages, session="chat", k=2).unresolved == ["create_issue"]
    assert issues.session_log("chat") == []


def _call(call_id: str, name: str) -> list[dict[str, Any]]:
    tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        {"role": "assistant", "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": call_id, "content": "ok"},
    ]


def test_a_call_that_resolves_to_no_tool_is_reported_once(dsn: str, issues: ToolStore) -> None:
    """A call that matches no tool is reported unresolved at the step that first sees it, not again at every later
    step while no later call is logged (the session remembers it as reported without logging it), by both stores."""
    from toolstore.integrations.openai import aroute_messages, route_messages

    async def aunresolved(messages: list[dict[str, Any]]) -> list[str]:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            return list((await aroute_messages(store, messages, session="chat", k=2)).unresolved)

    messages = [{"role": "user", "content": "file a bug about login"}, *_call("c0", "no_such_tool")]
    assert route_messages(issues, messages, session="chat", k=2).unresolved == ["no_such_tool"]
    assert route_messages(issues, messages, session="chat", k=2).unresolved == []
    assert asyncio.run(aunresolved(messages)) == []
    messages += _call("c1", "other_missing_tool")
    assert asyncio.run(aunresolved(messages)) == ["other_missing_tool"]
    assert route_messages(issues, messages, session="chat", k=2).unresolved == []
    assert issues.session_log("chat") == [] and [r["session_id"] for r in issues.sessions()] == ["chat"]
    assert issues.prune_sessions(session="chat") == {"calls": 0, "sessions": 1}  # forgotten: new again
    assert route_messages(issues, messages, session="chat", k=2).unresolved == ["no_such_tool", "other_missing_tool"]


def test_however_many_unresolved_calls_each_is_reported_once(issues: ToolStore) -> None:
    """The session remembers every unresolved call of the list still new, not the newest 64: 70 of them are reported at
    the first step and none at the next two (a capped record would report the oldest again in turn). One that resolves
    later is logged then, unless a later call was logged first: the log keeps the conversation's order."""
    ids = [f"u{i}" for i in range(70)]
    assert issues.record_new_calls("many", ids, []) == ids
    assert issues.record_new_calls("many", ids, []) == [] and issues.record_new_calls("many", ids, []) == []
    logged = [SessionCall("slack.send_message", call_id="u69")]
    assert issues.record_new_calls("many", ids, logged) == ["u69"]
    assert [c.call_id for c in issues.session_log("many")] == ["u69"]
    late = [SessionCall("slack.send_message", call_id="u0")]  # before the logged u69: seen with it
    assert issues.record_new_calls("many", ids, late) == [] and len(issues.session_log("many")) == 1
    assert issues.record_new_calls("mixed", ["v1"], []) == ["v1"]
    assert issues.record_calls("mixed", ["slack.send_message"]) == 1  # a call without a call id, logged beside
    assert issues.record_new_calls("mixed", ["v1"], []) == []  # still reported: that write kept the record


def test_two_concurrent_steps_report_a_new_unresolved_call_once(dsn: str, issues: ToolStore) -> None:
    """Two steps of one session with the same new calls, on two stores (two connections), run at once: which calls
    are new is told under the session's lock in the write that logs them, so one step reports the unresolved call
    and the other does not, and the resolved call is logged once. The steps are held at that lock until both wait."""
    from toolstore.integrations.openai import route_messages

    issues.record_calls("chat", [SessionCall("slack.send_message", call_id="c0")])  # the session's row exists
    messages = [
        {"role": "user", "content": "file a bug about login"},
        *_call("c0", "send_message"),
        *_call("c1", "no_such_tool"),
        *_call("c2", "forecast"),
    ]
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def step(store: ToolStore) -> None:
        try:
            results.append(list(route_messages(store, messages, session="chat", k=2).unresolved))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with (
        ToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as one,
        ToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as two,
        issues.connection() as holder,
    ):
        with holder.transaction():
            holder.execute("select 1 from sessions where session_id = 'chat' for update")
            threads = [threading.Thread(target=step, args=(s,)) for s in (one, two)]
            for t in threads:
                t.start()
            with issues.connection() as watcher:
                for _ in range(600):  # until both steps wait for the session's row (or one ended early: an error)
                    row = watcher.execute(
                        "select count(*) from pg_stat_activity where datname = current_database()"
                        " and cardinality(pg_blocking_pids(pid)) > 0"
                    ).fetchone()
                    if row == (2,) or not all(t.is_alive() for t in threads):
                        break
                    time.sleep(0.05)
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert sorted(results) == [[], ["no_such_tool"]]
    assert [(c.call_id, c.tool_id) for c in issues.session_log("chat")] == [
        ("c0", "slack.send_message"),
        ("c2", "weather.forecast"),
    ]


def test_a_bad_route_option_records_no_call(issues: ToolStore) -> None:
    from toolstore import InvalidInputError
    from toolstore.integrations.openai import route_messages

    call = {"id": "c1", "type": "function", "function": {"name": "send_message", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "tell the team"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "and file a bug"},
    ]
    for bad in ({"k": 0}, {"turns": 10**6}, {"weights": {"bogus": 1.0}}):
        with pytest.raises(InvalidInputError):
            route_messages(issues, messages, session="chat", **bad)  # type: ignore[arg-type]
    assert issues.session_log("chat") == []  # refused before anything was recorded
    route_messages(issues, messages, session="chat", k=2)
    assert [c.tool_id for c in issues.session_log("chat")] == ["slack.send_message"]


def test_route_messages_routes_in_the_dialect_it_was_given(dsn: str, issues: ToolStore) -> None:
    """route_messages(dialect=...) reads the messages in that dialect for route() too, not only to record their calls:
    a Responses list given as Chat messages is refused with a session or without one, and so is a Chat list given as
    Anthropic messages (it read as holding no call: a session logged none of its calls); route(dialect=...) reads them
    so itself; by both stores."""
    from toolstore.integrations.openai import aroute_messages, route_messages

    chat = [{"role": "user", "content": "file a bug about login"}, *_call("c0", "no_such_tool")]
    responses = [
        {"role": "user", "content": "file a bug about login"},
        {"type": "function_call", "call_id": "r0", "name": "create_issue", "arguments": "{}"},
    ]

    async def aunresolved(messages: list[dict[str, Any]], dialect: str) -> list[str]:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            assert (await store.route(messages=messages, dialect=dialect, k=2)).unresolved == unresolved
            return list((await aroute_messages(store, messages, dialect=dialect, k=2)).unresolved)

    for dialect, unresolved in (("openai-chat", ["no_such_tool"]), ("auto", ["no_such_tool"])):
        assert route_messages(issues, chat, dialect=dialect, k=2).unresolved == unresolved, dialect
        assert issues.route(messages=chat, dialect=dialect, k=2).unresolved == unresolved, dialect
        assert asyncio.run(aunresolved(chat, dialect)) == unresolved, dialect
    for session in ("chat", None):
        with pytest.raises(InvalidInputError, match=r"messages\[1\]\.role"):
            route_messages(issues, responses, session=session, dialect="openai-chat", k=2)
    with pytest.raises(InvalidInputError, match=r"messages\[1\]\.role"):
        asyncio.run(aunresolved(responses, "openai-chat"))
    foreign = r"^messages\[1\] has tool_calls, which only openai-chat messages have, but dialect='anthropic' was given"
    for session in ("chat", None):
        with pytest.raises(InvalidInputError, match=foreign):
            route_messages(issues, chat, session=session, dialect="anthropic", k=2)
    with pytest.raises(InvalidInputError, match=foreign):
        asyncio.run(aunresolved(chat, "anthropic"))
    with pytest.raises(InvalidInputError, match="unknown message dialect 'chat'"):
        issues.route(messages=chat, dialect="chat", k=2)
    assert issues.session_log("chat") == []


def test_a_step_looks_each_call_up_once_and_the_write_checks_the_ids(
    dsn: str, issues: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """route_messages resolves the calls it records (among the offered tools, else with resolve_calls: one
    call_candidates) and the write takes the ids as given, checking them in the statement that appends them, not by
    looking them up again; an id that names no tool writes nothing, and a name given to record_calls is still
    resolved. By both stores."""
    import toolstore._sessions
    import toolstore._steps
    from toolstore._result import RoutedTool, RouteResult, Signals
    from toolstore.integrations.openai import aroute_messages, route_messages

    blocks: list[str] = []

    def counting(original: Any) -> Any:
        def run(name: str) -> Any:
            blocks.append(name)
            return original(name)

        return run

    monkeypatch.setattr(toolstore._steps, "raw_query", counting(toolstore._steps.raw_query))
    monkeypatch.setattr(toolstore._sessions, "query", counting(toolstore._sessions.query))
    slack = issues.tools(["slack.send_message"])
    offered = RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in slack])
    messages = [{"role": "user", "content": "tell the team"}, *_call("c0", "send_message")]
    route_messages(issues, messages, session="chat", offered=offered, k=2)
    assert blocks.count("call_candidates") == 0 and blocks.count("append_calls") == 1, blocks
    messages += _call("c1", "forecast")
    blocks.clear()
    route_messages(issues, messages, session="chat", k=2)  # c1 resolved across the catalog, once
    assert blocks.count("call_candidates") == 1 and blocks.count("append_calls") == 1, blocks

    async def astep() -> None:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            await aroute_messages(store, messages, session="chat", k=2)

    messages += _call("c2", "send_message")
    blocks.clear()
    asyncio.run(astep())
    assert blocks.count("call_candidates") == 1 and blocks.count("append_calls") == 1, blocks
    assert [(c.call_id, c.tool_id) for c in issues.session_log("chat")] == [
        ("c0", "slack.send_message"),
        ("c1", "weather.forecast"),
        ("c2", "slack.send_message"),
    ]
    with pytest.raises(UnknownToolError, match="'no.such_tool'"):
        issues.record_new_calls("chat", ["c3"], [SessionCall("no.such_tool", call_id="c3")])
    with pytest.raises(UnknownToolError, match="'create_issue'"):  # a name several tools answer to
        issues.record_calls("fresh", [SessionCall("forecast", call_id="f0"), SessionCall("create_issue")])
    assert len(issues.session_log("chat")) == 3 and [r["session_id"] for r in issues.sessions()] == ["chat"]
    assert issues.record_calls("fresh", ["forecast", SessionCall("slack.send_message")]) == 2  # a name, an id
    assert [c.tool_id for c in issues.session_log("fresh")] == ["weather.forecast", "slack.send_message"]


def test_a_step_checks_the_route_options_and_reads_the_messages_once(
    dsn: str, issues: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """route_messages checks route()'s arguments before it records the messages' calls (a bad one records nothing:
    test_a_bad_route_option_records_no_call) and routes with what it checked: the messages are read once and the
    request validated once per step, by both stores; a route retried on a catalog changed since (TS001) is not
    checked again either."""
    import toolstore._agents
    import toolstore._route
    import toolstore._steps
    from toolstore.integrations.openai import aroute_messages, route_messages

    work: Counter[str] = Counter()

    def counting(module: Any, name: str) -> None:
        original = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            work[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    counting(toolstore._route, "read_messages")
    counting(toolstore._agents, "read_messages")
    counting(toolstore._route, "route_request")
    messages = [{"role": "user", "content": "file a bug about login"}, *_call("c0", "create_issue")]
    messages += [*_call("c1", "send_message"), {"role": "user", "content": "and tell the team"}]
    route_messages(issues, messages, session="chat", k=2)
    assert work == {"read_messages": 1, "route_request": 1}, work

    async def astep() -> None:
        async with AsyncToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            await aroute_messages(store, messages, session="chat", k=2)

    work.clear()
    asyncio.run(astep())
    assert work == {"read_messages": 1, "route_request": 1}, work
    with ToolStore(dsn, embedder=issues.embedder, catalog=issues.catalog) as other:
        other.set_fusion(weights={"name": 2.0})  # the row issues routes with is stale now
    statements: list[str] = []
    raw_query = toolstore._steps.raw_query
    monkeypatch.setattr(toolstore._steps, "raw_query", lambda name: statements.append(name) or raw_query(name))
    work.clear()
    assert issues.route(messages=messages, session="chat", k=2).tools
    assert statements.count("route") == 2 and work == {"read_messages": 1, "route_request": 1}, (statements, work)
    assert [c.call_id for c in issues.session_log("chat")] == ["c1"]  # c0 is ambiguous: not logged


def test_a_store_subclass_sees_every_route_in_route_checked(dsn: str, issues: ToolStore) -> None:
    """route_messages routes with ``store.route_checked`` (the arguments checked once, before calls are recorded), as
    route() does: a subclass that wraps routing overrides that one method, typed with the exported RouteCall, and sees
    the routes of both, on either store."""
    seen: list[str | None] = []

    class Traced(ToolStore):
        def route_checked(self, call: RouteCall) -> Any:
            seen.append(call.request.query)
            return super().route_checked(call)

    class AsyncTraced(AsyncToolStore):
        async def route_checked(self, call: RouteCall) -> Any:
            seen.append(call.request.query)
            return await super().route_checked(call)

    messages = [{"role": "user", "content": "file a bug about login"}, *_call("c0", "create_issue")]
    with Traced(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
        store.route("close the issue", k=2)
        ts_openai.route_messages(store, [*messages, {"role": "user", "content": "and tell the team"}], session="s")
    assert seen == ["close the issue", "and tell the team"]

    async def routes() -> None:
        async with AsyncTraced(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
            await store.route("reopen the issue", k=2)
            await ts_openai.aroute_messages(store, [*messages, {"role": "user", "content": "and ping me"}], session="a")

    seen.clear()
    asyncio.run(routes())
    assert seen == ["reopen the issue", "and ping me"]


def test_a_route_calls_overrides_are_only_the_fusion_options_given(dsn: str, issues: ToolStore) -> None:
    """RouteCall.overrides holds the fusion options route() was given and no others, as its docstring says: a subclass
    that sets a default for one (here k_rrf) when the caller gave none can tell which were given (it held every option,
    None for those not given, so a check for the key always found it)."""
    seen: list[dict[str, Any]] = []

    class Defaulted(ToolStore):
        def route_checked(self, call: RouteCall) -> Any:
            seen.append(dict(call.overrides))
            return super().route_checked(call)

    with Defaulted(dsn, embedder=issues.embedder, catalog=issues.catalog) as store:
        store.route("close the issue", k=2)
        store.route("close the issue", k=2, k_rrf=10, weights={"dense": 0})
    assert seen == [{}, {"k_rrf": 10, "weights": {"dense": 0}}]


def test_a_legacy_function_call_is_logged_once_under_an_id_stable_for_its_turn(issues: ToolStore) -> None:
    """An older loop's Chat Completions ``function_call`` (no call id) was never logged by a session: route_messages
    logged only calls with an id, so such a loop's session log stayed empty. It is logged under an id made from its
    turn (the request, its name and arguments, its place among the turn's like calls): once, however many steps pass
    the list again, whole or cut to its last turns; the same call made twice in a turn is logged twice."""
    from toolstore.integrations.openai import route_messages

    def legacy(name: str, arguments: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": None, "function_call": {"name": name, "arguments": arguments}},
            {"role": "function", "name": name, "content": "ok"},
        ]

    messages: list[Any] = [{"role": "user", "content": "what is the weather in Paris"}]
    messages += legacy("forecast", '{"city": "Paris"}')
    route_messages(issues, messages, session="old-loop", k=2)
    route_messages(issues, messages, session="old-loop", k=2)  # the same list again: nothing new
    assert [c.tool_id for c in issues.session_log("old-loop")] == ["weather.forecast"]
    messages += legacy("forecast", '{"city": "Paris"}')  # the same call again in the turn: a call of its own
    messages += [{"role": "user", "content": "tell the team"}, *legacy("send_message", "{}")]
    route_messages(issues, messages, session="old-loop", k=2)
    route_messages(issues, messages[-3:], session="old-loop", k=2)  # a stateless server passes the last turn only
    route_messages(issues, messages, session="old-loop", k=2, turns=1)
    logged = ["weather.forecast", "weather.forecast", "slack.send_message"]
    assert [c.tool_id for c in issues.session_log("old-loop")] == logged
