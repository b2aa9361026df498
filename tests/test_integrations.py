"""The SDK adapters as an application uses them, without a database: replies in every form the SDKs and raw HTTP
give them, and definitions the SDKs' own request types accept."""

from __future__ import annotations

import re
from typing import Any

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import ToolParam
from mcp.types import ListToolsResult
from mcp.types import Tool as McpTool
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam, Response
from openai.types.responses import ToolParam as ResponsesToolParam
from pydantic import TypeAdapter

from toolstore import InvalidInputError, ResolvedCall, Tool, UnknownCall, UnknownToolError
from toolstore._formats import export_catalog, parse_tools, render
from toolstore._result import RoutedTool, RouteResult, Signals
from toolstore.integrations import anthropic as ts_anthropic
from toolstore.integrations import openai as ts_openai

TOOLS = [
    Tool(id="github.create_issue", name="create_issue", provider="github", description="Create an issue"),
    Tool(id="jira.create_issue", name="create_issue", provider="jira", description="Create an issue"),
    Tool(id="slack.send_message", name="send_message", provider="slack", description="Post to Slack"),
]
RESULT = RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in TOOLS])


def _chat_reply() -> dict[str, Any]:
    tool_calls = [
        {"id": "a", "type": "function", "function": {"name": "jira__create_issue", "arguments": '{"title": "x"}'}},
        {"id": "b", "type": "function", "function": {"name": "send_message", "arguments": ""}},
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


def _responses_reply() -> dict[str, Any]:
    call = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "github__create_issue", "arguments": "{}"}
    return {
        "id": "r",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [{"type": "reasoning", "id": "rs", "summary": []}, {**call, "status": "completed"}],
    }


def test_openai_calls_reads_replies_as_objects_or_dicts() -> None:
    """A reply read back from JSON (raw HTTP, a cache, ``model_dump()``) is the same reply as the SDK's object."""
    chat = _chat_reply()
    expected = [("jira.create_issue", {"title": "x"}, "a"), ("slack.send_message", {}, "b")]
    for reply in (ChatCompletion.model_validate(chat), chat, chat["choices"][0]["message"]):
        assert [(c.tool.id, c.arguments, c.id) for c in ts_openai.calls(RESULT, reply)] == expected, reply
    responses = _responses_reply()
    for reply in (Response.model_validate(responses), responses, responses["output"]):
        assert [(c.tool.id, c.id) for c in ts_openai.calls(RESULT, reply)] == [("github.create_issue", "c1")], reply


def test_calls_read_the_parts_of_a_reply_that_hold_its_calls() -> None:
    """calls() of a Chat message's tool_calls (the SDK's list, or its dicts) found no call, without a word: the list was
    read as Responses output items, none of them a call, so a loop saw a reply with calls as one without. It reads
    them as the message's calls; so one call alone, a Choice, one Responses call item, and an Anthropic reply's content
    list or one tool_use block, each of which was an error saying a role was missing."""
    completion = ChatCompletion.model_validate(_chat_reply())
    expected = [("jira.create_issue", {"title": "x"}, "a"), ("slack.send_message", {}, "b")]
    tool_calls = completion.choices[0].message.tool_calls
    assert tool_calls is not None
    for part in (tool_calls, [c.model_dump() for c in tool_calls], completion.choices[0]):
        assert [(c.tool.id, c.arguments, c.id) for c in ts_openai.calls(RESULT, part)] == expected, part
    assert [(c.tool.id, c.id) for c in ts_openai.calls(RESULT, tool_calls[1])] == [("slack.send_message", "b")]
    item = Response.model_validate(_responses_reply()).output[1]
    assert [(c.tool.id, c.id) for c in ts_openai.calls(RESULT, item)] == [("github.create_issue", "c1")]
    message = AnthropicMessage.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": [
                {"type": "text", "text": "Posting."},
                {"type": "tool_use", "id": "t1", "name": "send_message", "input": {"text": "hi"}},
            ],
        }
    )
    for part in (message.content, message.content[1]):
        [call] = ts_anthropic.calls(RESULT, part)
        assert (call.tool.id, call.arguments, call.id) == ("slack.send_message", {"text": "hi"}, "t1")


def test_parse_tools_takes_the_sdks_tool_objects() -> None:
    """An MCP client's ``session.list_tools()`` (the mcp SDK's ListToolsResult, its Tools) was refused ("expected a JSON
    object, got ListToolsResult"), though it is the tools/list result parse_tools reads as JSON; so were a Responses
    reply's ``tools``. The SDKs' objects read as the JSON they stand for, by their wire names (inputSchema, _meta)."""
    schema = {"type": "object", "properties": {"title": {"type": "string", "default": None}}}
    tool = McpTool(name="create_issue", description="Create an issue", inputSchema=schema, _meta={"team": "core"})
    listed = ListToolsResult(tools=[tool])
    wire = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["tools"][0]["_meta"] == {"team": "core"}
    expected = parse_tools(wire, provider="gh")
    assert expected[0].parameters == schema and expected[0].id == "gh.create_issue"
    for given in (listed, [tool], tool, (tool,)):
        assert parse_tools(given, provider="gh") == expected, given
    responses = _responses_reply()
    responses["tools"] = [{"type": "function", "name": "send_message", "parameters": schema, "strict": False}]
    [function] = parse_tools(Response.model_validate(responses).tools)
    assert (function.name, function.parameters) == ("send_message", schema)


def test_openai_calls_refuses_a_stream_chunk_or_no_choice_clearly() -> None:
    call = {"index": 0, "id": "a", "type": "function", "function": {"name": "send_message", "arguments": ""}}
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"tool_calls": [call]}}],
    }
    for reply in (ChatCompletionChunk.model_validate(chunk), chunk):
        with pytest.raises(InvalidInputError, match="streamed Chat Completions chunk"):
            ts_openai.calls(RESULT, reply)
    with pytest.raises(InvalidInputError, match="no choices"):
        ts_openai.calls(RESULT, {**_chat_reply(), "choices": []})


def test_strict_stays_across_the_two_openai_shapes() -> None:
    """A schema written for strict mode and imported in one OpenAI shape stays strict in the other (the Responses
    API would otherwise get ``"strict": false`` and validate nothing); a tool that set no ``strict`` is unchanged."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    chat = {"type": "function", "function": {"name": "weather", "parameters": schema, "strict": True}}
    responses = {"type": "function", "name": "weather", "parameters": schema, "strict": True}
    [from_chat] = render(parse_tools([chat]), "openai-responses")
    assert from_chat["strict"] is True
    [from_responses] = render(parse_tools([responses]), "openai")
    assert from_responses["function"]["strict"] is True
    TypeAdapter(FunctionToolParam).validate_python(from_chat)
    TypeAdapter(ChatCompletionToolParam).validate_python(from_responses)
    plain = {"type": "function", "function": {"name": "weather", "parameters": schema}}
    assert render(parse_tools([plain]), "openai-responses")[0]["strict"] is False
    off = {**responses, "strict": False}
    assert "strict" not in render(parse_tools([{**off, "strict": None}]), "openai")[0]["function"]
    assert render(parse_tools([off]), "openai")[0]["function"]["strict"] is False


def _routed(tools: list[Tool], ids: list[str]) -> RouteResult:
    by_id = {t.id: t for t in tools}
    return RouteResult(query="q", tools=[RoutedTool(by_id[i], 1.0, Signals()) for i in ids])


def _function_call(call_id: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    call = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": "{}"}
    return {**call, "status": "completed", **({"namespace": namespace} if namespace else {})}


def test_responses_definitions_come_inside_their_namespaces_and_their_calls_resolve() -> None:
    """Routed tools imported from Responses namespaces are offered inside them again, as a Responses export gives
    them: where the namespace's first routed tool is, its description kept, holding only its routed tools, each named
    among them (its own name, though another namespace and a flat tool have it too). The SDK's request type accepts
    them, and the model's calls, made by namespace and name, resolve to the tools meant."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    crm = {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records.",
        "tools": [
            {"type": "function", "name": "create_lead", "description": "Create a lead.", "parameters": schema},
            {"type": "function", "name": "search", "description": "Search customers.", "parameters": schema},
            {"type": "custom", "name": "run_query", "description": "Query the CRM."},
        ],
    }
    tickets = {"type": "namespace", "name": "tickets", "description": "Support tickets.", "tools": [crm["tools"][1]]}
    flat = {
        "type": "function",
        "name": "search",
        "description": "Search the web.",
        "parameters": schema,
        "strict": False,
    }
    tools = parse_tools([crm, tickets, flat])
    result = _routed(tools, ["tickets.search", "crm.run_query", "search", "crm.search"])  # crm.create_lead: not routed
    definitions = result.definitions("openai-responses")
    assert definitions == [
        {**tickets, "tools": [crm["tools"][1]]},
        {**crm, "tools": [crm["tools"][2], crm["tools"][1]]},  # crm where its first routed tool is, in routed order
        flat,
    ]
    assert definitions == export_catalog([r.tool for r in result], "openai-responses")["tools"]  # one rendering
    for definition in definitions:
        TypeAdapter(ResponsesToolParam).validate_python(definition)
    output = [
        _function_call("a", "search", "crm"),
        _function_call("b", "search", "tickets"),
        _function_call("c", "search"),
    ]
    reply = Response.model_validate({**_responses_reply(), "output": output})
    assert [c.tool.id for c in ts_openai.calls(result, reply)] == ["crm.search", "tickets.search", "search"]
    custom = {"type": "custom_tool_call", "call_id": "d", "namespace": "crm", "name": "run_query", "input": "x"}
    assert [(c.tool.id, c.arguments) for c in ts_openai.calls(result, [custom])] == [("crm.run_query", "x")]
    # two routed tools of one namespace with one name (one names its own provider) are told apart inside it
    sales = {**crm["tools"][1], "x-toolstore": {"provider": "sales"}}
    both = _routed(parse_tools([{**crm, "tools": [crm["tools"][1], sales]}]), ["crm.search", "sales.search"])
    [namespace] = both.definitions("openai-responses")
    assert [t["name"] for t in namespace["tools"]] == ["crm__search", "sales__search"]
    called = [_function_call(str(i), t["name"], "crm") for i, t in enumerate(namespace["tools"])]
    assert [c.tool.id for c in ts_openai.calls(both, called)] == ["crm.search", "sales.search"]


def _offered(definitions: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    """The (namespace, name) pair each tool of a Responses request's ``tools`` is called by, in their order."""
    pairs: list[tuple[str | None, str]] = []
    for d in definitions:
        pairs += [(d["name"], t["name"]) for t in d["tools"]] if d["type"] == "namespace" else [(None, d["name"])]
    return pairs


def test_names_are_those_the_definitions_give_in_the_format_routed_for() -> None:
    """``result.names`` (with ``result.namespaces``) are what a model given ``result.definitions()`` calls each tool
    by: in the Responses format a namespaced tool's own name inside its namespace (a function call's ``namespace`` and
    ``name``), not the catalog-wide ``crm__search``; in the other formats, as before, the top-level names."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    search = {"type": "function", "name": "search", "description": "Search.", "parameters": schema}
    crm = {"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [search]}
    tickets = {"type": "namespace", "name": "tickets", "description": "Support tickets.", "tools": [search]}
    tools = parse_tools([crm, tickets, {**search, "name": "lookup"}])
    routed = [RoutedTool(t, 1.0, Signals()) for t in tools]
    result = RouteResult(query="q", tools=routed, fmt="openai-responses")
    assert result.names == ["search", "search", "lookup"]
    assert list(zip(result.namespaces, result.names)) == _offered(result.definitions())
    assert [result.resolve(n, namespace=s).id for s, n in zip(result.namespaces, result.names)] == result.ids
    chat = RouteResult(query="q", tools=routed)  # fmt "openai": top-level names, unique on their own
    assert (
        chat.names
        == ["crm__search", "tickets__search", "lookup"]
        == [d["function"]["name"] for d in chat.definitions()]
    )
    assert chat.namespaces == [None, None, None]
    assert [chat.resolve(n).id for n in chat.names] == chat.ids


def test_anthropic_calls_never_guess_between_a_searchs_names_and_the_results() -> None:
    """In this catalog github's create_issue is github__create_issue (two other create_issue tools), and x's tool
    named github__create_issue is x__github__create_issue (y has one too). A search that routes only those two gave
    the model github__create_issue for github's tool (deferred names), while result.definitions would give that name
    to x's: without the deferred tools calls() cannot tell which, so it refuses; with them it resolves exactly."""
    catalog = [
        Tool(id="x.github__create_issue", name="github__create_issue", provider="x"),
        Tool(id="y.github__create_issue", name="github__create_issue", provider="y"),
        Tool(id="github.create_issue", name="create_issue", provider="github"),
        Tool(id="linear.create_issue", name="create_issue", provider="linear"),
    ]
    result = RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in (catalog[0], catalog[2])])
    assert result.names == ["github__create_issue", "create_issue"]
    block = ts_anthropic.tool_search_result(result, "s", deferred=catalog)
    assert [r["tool_name"] for r in block["content"]] == ["x__github__create_issue", "github__create_issue"]

    def use(name: str) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": name, "input": {}}]}

    with pytest.raises(UnknownToolError, match="may mean any of x.github__create_issue, github.create_issue"):
        ts_anthropic.calls(result, use("github__create_issue"))
    assert ts_anthropic.calls(result, use("github__create_issue"), deferred=catalog)[0].tool.id == "github.create_issue"
    assert ts_anthropic.calls(result, use("x__github__create_issue"), deferred=catalog)[0].tool.id == catalog[0].id
    assert ts_anthropic.calls(result, use("x__github__create_issue"))[0].tool.id == catalog[0].id
    assert ts_anthropic.calls(result, use("create_issue"))[0].tool.id == "github.create_issue"
    for name in ("create_issue", "linear__create_issue"):  # not what the search referred to / not routed
        with pytest.raises(UnknownToolError):
            ts_anthropic.calls(result, use(name), deferred=catalog)


def test_a_call_of_a_name_not_offered_lists_the_names_the_model_was_given() -> None:
    """A name no routed tool was given (a model's invention) is refused naming the names ``result.definitions`` gave,
    the error text an app may answer the call with so the model calls again: the Anthropic adapter's as the OpenAI
    one's, not every form it accepts a call under (``slack__send_message``, hashed ones), which no model was shown."""
    offered = re.escape(
        "no offered tool is named 'create_ticket' (offered: github__create_issue, jira__create_issue, send_message)"
    )
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "create_ticket", "input": {}}]}
    with pytest.raises(UnknownToolError, match=f"^{offered}$"):
        ts_anthropic.calls(RESULT, use)
    call = {"id": "a", "type": "function", "function": {"name": "create_ticket", "arguments": "{}"}}
    with pytest.raises(UnknownToolError, match=f"^{offered}$"):
        ts_openai.calls(RESULT, {"role": "assistant", "content": None, "tool_calls": [call]})


def test_calls_can_report_an_invented_name_among_parallel_calls_and_keep_the_good_ones() -> None:
    """One invented name among parallel calls made calls() raise, the good calls lost with it: the loop could only
    answer every call with the error. With unknown="report" every call comes back in the reply's order, the invented
    one an UnknownCall (its id, arguments and the error's text to answer it with); the default still raises, so a
    loop written for it is unchanged. Read from the SDKs' own types (ChatCompletion, Response, anthropic Message)."""
    offered = (
        "no offered tool is named 'create_ticket' (offered: github__create_issue, jira__create_issue, send_message)"
    )
    chat = _chat_reply()
    invented = {"id": "x", "type": "function", "function": {"name": "create_ticket", "arguments": '{"title": "y"}'}}
    chat["choices"][0]["message"]["tool_calls"].insert(1, invented)
    responses = _responses_reply()
    responses["output"].insert(1, {"type": "function_call", "call_id": "c0", "name": "create_ticket", "arguments": ""})
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [
            {"type": "tool_use", "id": "t1", "name": "create_ticket", "input": {"title": "y"}},
            {"type": "tool_use", "id": "t2", "name": "send_message", "input": {}},
        ],
    }
    replies: list[tuple[Any, Any]] = [
        (ts_openai.calls, ChatCompletion.model_validate(chat)),
        (ts_openai.calls, Response.model_validate(responses)),
        (ts_anthropic.calls, AnthropicMessage.model_validate(message)),
    ]
    for calls, reply in replies:
        with pytest.raises(UnknownToolError, match=f"^{re.escape(offered)}$"):
            calls(RESULT, reply)
    assert [(type(c).__name__, c.id) for c in ts_openai.calls(RESULT, replies[0][1], unknown="report")] == [
        ("ResolvedCall", "a"),
        ("UnknownCall", "x"),
        ("ResolvedCall", "b"),
    ]
    [first, second] = ts_openai.calls(RESULT, replies[1][1], unknown="report")
    assert isinstance(first, UnknownCall) and isinstance(second, ResolvedCall)
    assert (first.name, first.arguments, first.id, first.error) == ("create_ticket", {}, "c0", offered)
    found = ts_anthropic.calls(RESULT, replies[2][1], unknown="report")
    assert found == [UnknownCall("create_ticket", {"title": "y"}, "t1", offered), found[1]]
    assert isinstance(found[1], ResolvedCall) and found[1].tool.id == "slack.send_message"
    ambiguous = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "create_issue", "input": {}}]}
    [call] = ts_anthropic.calls(RESULT, ambiguous, unknown="report")
    assert isinstance(call, UnknownCall) and "may mean any of github.create_issue, jira.create_issue" in call.error
    for calls, reply in replies:
        with pytest.raises(InvalidInputError, match="unknown= takes 'raise' or 'report', got 'skip'"):
            calls(RESULT, reply, unknown="skip")


def test_a_custom_tool_takes_its_text_in_every_format() -> None:
    """An OpenAI custom tool (free-form text input) has one string property, ``input``, in the Anthropic and MCP
    formats (they have no custom tools), described by its grammar; calls() gives the text back from there as the
    OpenAI paths give it from the custom call, and leaves other arguments and other tools' arguments alone."""
    grammar = {"type": "grammar", "definition": "start: INT", "syntax": "lark"}
    [tool, plain] = parse_tools(
        [{"type": "custom", "name": "do_math", "format": grammar}, {"name": "now", "parameters": None}]
    )
    result = RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in (tool, plain)])
    [anthropic_def, _] = result.definitions("anthropic")
    [mcp_def, _] = result.definitions("mcp")
    expected = {
        "type": "object",
        "properties": {
            "input": {"type": "string", "description": "The input, as text in this lark grammar:\nstart: INT"}
        },
        "required": ["input"],
    }
    assert anthropic_def["input_schema"] == expected and mcp_def["inputSchema"] == expected
    TypeAdapter(ToolParam).validate_python(anthropic_def)
    McpTool.model_validate(mcp_def)

    def use(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": name, "input": arguments}]}

    custom_call = {"type": "custom_tool_call", "call_id": "c", "name": "do_math", "input": "1 + 2"}
    assert [c.arguments for c in ts_openai.calls(result, [custom_call])] == ["1 + 2"]
    assert [c.arguments for c in ts_anthropic.calls(result, use("do_math", {"input": "1 + 2"}))] == ["1 + 2"]
    assert ts_anthropic.calls(result, use("do_math", {"input": 3}))[0].arguments == {"input": 3}
    assert ts_anthropic.calls(result, use("now", {"input": "x"}))[0].arguments == {"input": "x"}


def test_a_misspelt_route_option_names_the_function_called() -> None:
    """route_messages(store, messages, token_buget=3000) (and aroute_messages, the langgraph retrievers) raised
    "check_route() got an unexpected keyword argument", naming a private function the user never called; the error is
    Python's own for the function called, with the option meant when one is close. Nothing reaches the store."""
    import asyncio

    from toolstore.integrations import langgraph as ts_langgraph

    store: Any = object()  # never used: the option is refused first
    messages = [{"role": "user", "content": "file a bug"}]
    calls = {
        "route_messages": lambda: ts_openai.route_messages(store, messages, token_buget=3000),
        "aroute_messages": lambda: asyncio.run(ts_anthropic.aroute_messages(store, messages, token_buget=3000)),
        "bigtool_retriever": lambda: ts_langgraph.bigtool_retriever(store, token_buget=3000),
        "bigtool_coroutine": lambda: ts_langgraph.bigtool_coroutine(store, token_buget=3000),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError) as caught:
            call()
        assert str(caught.value) == (
            f"{name}() got an unexpected keyword argument 'token_buget' (did you mean 'token_budget'?)"
        )


def test_calls_of_a_replys_choices_reads_its_one_choice_and_refuses_several_saying_what_to_pass() -> None:
    """``calls(result, reply.choices)``, the list rather than one choice, was an error about a message role
    (``messages[0].role: expected one of assistant, ..., got nothing``) naming neither the argument nor the fix. A list
    of one choice is read as that choice; one of several (n>1) says to pass the choice the loop goes on with."""
    completion = ChatCompletion.model_validate(_chat_reply())
    expected = [("jira.create_issue", {"title": "x"}, "a"), ("slack.send_message", {}, "b")]
    for choices in (completion.choices, _chat_reply()["choices"]):
        assert [(c.tool.id, c.arguments, c.id) for c in ts_openai.calls(RESULT, choices)] == expected, choices
    two = ChatCompletion.model_validate({**_chat_reply(), "choices": _chat_reply()["choices"] * 2})
    for choices in (two.choices, two.model_dump()["choices"]):
        with pytest.raises(InvalidInputError, match=re.escape("response is a list of 2 choices")) as caught:
            ts_openai.calls(RESULT, choices)
        assert "calls(result, reply.choices[i])" in str(caught.value)
