"""FakeOpenAI's chat completions answering with scripted tool calls, through the real ``openai`` SDK: an app that routes
tools, sends them to the model and runs the model's call, tested end to end against it."""

from __future__ import annotations

import datetime
import json
import re
import socket
from typing import Any

import openai
import pytest

from toolstore import HashingEmbedder, InvalidInputError, Tool, ToolStore, UnknownCall, UnknownToolError, parse_tools
from toolstore.integrations.openai import calls, route_messages
from toolstore.testing.fake_openai import FakeOpenAI, ToolCall

TOOLS = [
    Tool(
        id="weather.forecast",
        name="forecast",
        provider="weather",
        description="Get the weather forecast for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    Tool(id="mail.send_email", name="send_email", provider="mail", description="Send an email to a recipient"),
    Tool(id="cal.create_event", name="create_event", provider="cal", description="Create a calendar event"),
]
WEATHER = {"type": "function", "function": {"name": "forecast", "parameters": {"type": "object"}}}
MAIL = {"type": "function", "function": {"name": "send_email", "parameters": {"type": "object"}}}


def _client(fake: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)


def _ask(client: openai.OpenAI, **options: Any) -> Any:
    return client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}], **options)


def test_an_app_that_routes_tools_runs_the_tool_call_the_model_makes(dsn: str) -> None:
    """The app routes its tools, sends them to the model (the fake), runs the call the model makes with its arguments
    and sends the result back; the SDK reads the fake's tool call as the API's (finish_reason, message.tool_calls) and
    the second request carries the tool message answering that call's id."""
    ran: list[tuple[str, object]] = []

    def answer(client: openai.OpenAI, store: ToolStore, question: str) -> str | None:
        messages: list[Any] = [{"role": "user", "content": question}]
        result = None
        while True:
            result = route_messages(store, messages, offered=result, k=2)
            reply = client.chat.completions.create(
                model="gpt-4.1", messages=messages, tools=result.definitions("openai")
            )
            messages.append(reply.choices[0].message)
            if not reply.choices[0].message.tool_calls:
                return reply.choices[0].message.content
            for call in calls(result, reply):
                ran.append((call.tool.id, call.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"sky": "sunny"})})

    replies = [ToolCall("forecast", {"city": "Paris"}), "Sunny in Paris."]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="app") as store, FakeOpenAI(replies=replies) as fake:
        store.upsert(TOOLS)
        assert answer(_client(fake), store, "what is the weather forecast for Paris") == "Sunny in Paris."
        first, second = (r.body for r in fake.requests_to("/chat/completions"))
        assert fake.replies_left == 0
    assert ran == [("weather.forecast", {"city": "Paris"})]
    assert "forecast" in [t["function"]["name"] for t in first["tools"]]
    [sent] = second["messages"][1]["tool_calls"]
    assert sent["function"] == {"name": "forecast", "arguments": '{"city": "Paris"}'}
    assert second["messages"][2] == {"role": "tool", "tool_call_id": sent["id"], "content": '{"sky": "sunny"}'}


def test_scripted_tool_calls_come_in_the_api_wire_format() -> None:
    """Parallel calls keep their order and given ids (the others get unique ones), arguments given as text are sent
    as written (a model's malformed JSON), the replies are taken in order, reply_next's after replies=, and an
    unscripted request gets the default text again."""
    with FakeOpenAI(replies=["first"]) as fake:
        fake.reply_next([ToolCall("forecast", {"city": "Oslo"}, id="call_a"), ToolCall("send_email")])
        fake.reply_next(ToolCall("forecast", '{"city": "Oslo"'), ToolCall("forecast"))
        client = _client(fake)
        assert _ask(client, tools=[WEATHER, MAIL]).choices[0].message.content == "first"
        parallel = _ask(client, tools=[WEATHER, MAIL])
        malformed = _ask(client, tools=[WEATHER], tool_choice="required").choices[0].message
        again = _ask(client, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "forecast"}})
        assert fake.replies_left == 0
        assert _ask(client, tools=[WEATHER]).choices[0].message.content == "fake reply to: hi"
    choice = parallel.choices[0]
    assert (choice.finish_reason, choice.message.content) == ("tool_calls", None)
    assert [(c.id, c.type, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        ("call_a", "function", "forecast", '{"city": "Oslo"}'),
        (choice.message.tool_calls[1].id, "function", "send_email", "{}"),
    ]
    assert malformed.tool_calls[0].function.arguments == '{"city": "Oslo"'
    made = [choice.message.tool_calls[1].id, malformed.tool_calls[0].id, again.choices[0].message.tool_calls[0].id]
    assert len(set(made)) == 3 and "call_a" not in made


def test_a_reply_the_request_does_not_allow_is_an_error_the_sdk_raises() -> None:
    """A scripted call of a tool the request did not offer (or offered none), a call where tool_choice is 'none' or
    names another tool, and text where tool_choice asks for a call are the fake's 400, naming the call and what was
    offered: openai.BadRequestError. Each takes its reply, so the next request gets the next one."""
    refused = [
        (ToolCall("delete_repo"), {"tools": [WEATHER, MAIL]}, "calls 'delete_repo', a tool the request did not offer "),
        (ToolCall("delete_repo"), {"tools": [WEATHER, MAIL]}, "(it offered 'forecast', 'send_email')"),
        (ToolCall("forecast"), {}, "calls 'forecast', a tool the request did not offer (it offered no tools)"),
        (ToolCall("forecast"), {"tools": [WEATHER], "tool_choice": "none"}, "but the request's tool_choice is 'none'"),
        (
            [ToolCall("forecast"), ToolCall("send_email")],
            {"tools": [WEATHER, MAIL], "tool_choice": {"type": "function", "function": {"name": "forecast"}}},
            "calls tool 'send_email', but the request's tool_choice is {'type': 'function'",
        ),
        ("sure", {"tools": [WEATHER], "tool_choice": "required"}, "is text, but the request's tool_choice is 'requ"),
    ]
    with FakeOpenAI(replies=[reply for reply, _, _ in refused] + ["done"]) as fake:
        client = _client(fake)
        for _, options, said in refused:
            with pytest.raises(openai.BadRequestError, match=f"FakeOpenAI: .*{re.escape(said)}"):
                _ask(client, **options)
        assert _ask(client, tools=[WEATHER]).choices[0].message.content == "done"


def test_parallel_calls_are_refused_where_the_request_turns_them_off() -> None:
    """A reply of two scripted calls answered a request with parallel_tool_calls false, which the real API never does;
    it is the fake's 400 saying so. One call answers such a request, and two answer one that leaves them on."""
    two = [ToolCall("forecast"), ToolCall("send_email")]
    with FakeOpenAI(replies=[two, ToolCall("forecast"), two]) as fake:
        client = _client(fake)
        said = "FakeOpenAI: the scripted reply makes 2 tool calls, but the request's parallel_tool_calls is false"
        with pytest.raises(openai.BadRequestError, match=re.escape(said)):
            _ask(client, tools=[WEATHER, MAIL], parallel_tool_calls=False)
        one = _ask(client, tools=[WEATHER, MAIL], parallel_tool_calls=False).choices[0].message.tool_calls
        assert [call.function.name for call in one] == ["forecast"]
        both = _ask(client, tools=[WEATHER, MAIL], parallel_tool_calls=True).choices[0].message.tool_calls
        assert [call.function.name for call in both] == ["forecast", "send_email"]


def test_a_call_of_a_tool_an_allowed_tools_choice_leaves_out_is_refused() -> None:
    """tool_choice {"type": "allowed_tools", ...} (the API's way to keep the tools offered and let the model call a
    few) let a scripted call of any offered tool through, and text where its mode is required; each is the fake's
    400 naming what it allows. A call of an allowed tool answers."""

    def only(mode: str) -> dict[str, Any]:
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": [WEATHER]}}

    with FakeOpenAI(replies=[ToolCall("send_email"), "sure", ToolCall("forecast")]) as fake:
        client = _client(fake)
        said = "the scripted reply calls tool 'send_email', but the request's tool_choice allows only 'forecast'"
        with pytest.raises(openai.BadRequestError, match=re.escape(said)):
            _ask(client, tools=[WEATHER, MAIL], tool_choice=only("auto"))
        with pytest.raises(openai.BadRequestError, match="the scripted reply is text, but .* it must call a tool"):
            _ask(client, tools=[WEATHER, MAIL], tool_choice=only("required"))
        called = _ask(client, tools=[WEATHER, MAIL], tool_choice=only("auto")).choices[0].message.tool_calls
        assert [call.function.name for call in called] == ["forecast"]


def test_a_call_of_a_custom_tool_is_sent_as_the_api_sends_it_and_resolved_by_calls(dsn: str) -> None:
    """A scripted call of an offered custom tool (free-form input) was refused as a call of a tool the request did not
    offer ("it offered 'forecast'"); it is sent as the API sends one, {"type": "custom", "custom": {"name", "input"}},
    which the SDK reads and toolstore's calls() resolves to the tool with its text. JSON arguments for it are the
    fake's 400 saying to script its text; a forced custom tool_choice holds as a function's does."""
    sql = {"type": "custom", "custom": {"name": "run_sql", "description": "Run a read-only SQL query on the warehouse"}}
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="custom-fake") as store:
        store.upsert([*parse_tools([sql]), TOOLS[0]])
        result = store.route("query the warehouse with sql", k=2)
    forced = {"type": "custom", "custom": {"name": "run_sql"}}
    replies = [ToolCall("run_sql", "select 1"), ToolCall("run_sql", {"query": "select 1"}), ToolCall("forecast", {})]
    with FakeOpenAI(replies=replies) as fake:
        client = _client(fake)
        reply = _ask(client, tools=result.definitions("openai"))
        [call] = reply.choices[0].message.tool_calls
        assert call.type == "custom" and (call.custom.name, call.custom.input) == ("run_sql", "select 1")
        [resolved] = calls(result, reply)
        assert (resolved.tool.id, resolved.arguments) == ("run_sql", "select 1")
        said = "calls custom tool 'run_sql' with JSON arguments: a custom tool's input is text, script ToolCall("
        with pytest.raises(openai.BadRequestError, match=re.escape(said)):
            _ask(client, tools=result.definitions("openai"))
        with pytest.raises(openai.BadRequestError, match="calls tool 'forecast', but the request's tool_choice is"):
            _ask(client, tools=result.definitions("openai"), tool_choice=forced)


def test_an_invented_call_is_sent_so_an_app_can_be_tested_answering_it(dsn: str) -> None:
    """A test could not script a call of a tool the request did not offer (a model's invented name): it was the fake's
    400. ToolCall(..., invented=True) is sent as a function call beside the offered tool's call, the real SDK reads it,
    and toolstore's calls() refuses it by name as it would a real model's; one that the request offers after all, or a
    call where tool_choice is 'none', is the fake's 400 saying so."""
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="invented") as store:
        store.upsert(TOOLS)
        result = store.route("what is the weather forecast for Paris", k=1)
    good, made_up = ToolCall("forecast", {"city": "Paris"}), ToolCall("get_weather", {"city": "Paris"}, invented=True)
    with FakeOpenAI(replies=[[good, made_up], ToolCall("forecast", invented=True), made_up]) as fake:
        client = _client(fake)
        reply = _ask(client, tools=result.definitions("openai"))
        assert [(c.type, c.function.name, c.function.arguments) for c in reply.choices[0].message.tool_calls] == [
            ("function", "forecast", '{"city": "Paris"}'),
            ("function", "get_weather", '{"city": "Paris"}'),
        ]
        with pytest.raises(UnknownToolError, match=r"no offered tool is named 'get_weather' \(offered: forecast\)"):
            calls(result, reply)
        said = "calls 'forecast' as invented, but the request offers a tool of that name: script it without invented"
        with pytest.raises(openai.BadRequestError, match=re.escape(said)):
            _ask(client, tools=[WEATHER])
        with pytest.raises(openai.BadRequestError, match="calls 'get_weather', but the request's tool_choice is 'no"):
            _ask(client, tools=[WEATHER], tool_choice="none")
    with pytest.raises(InvalidInputError, match="ToolCall 'forecast': invented must be True or False, got 1"):
        ToolCall("forecast", invented=1)  # type: ignore[arg-type]


def test_a_loop_runs_the_good_calls_and_answers_an_invented_one_with_its_error(dsn: str) -> None:
    """The model calls an offered tool and an invented one in parallel: calls(..., unknown="report") gives the loop both
    in order, so it runs the good one and answers the invented one with the error naming what was offered; the next
    request carries an answer to every call id (the API refuses a request that leaves one unanswered)."""
    ran: list[str] = []
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="invented-loop") as store:
        store.upsert(TOOLS)
        result = store.route("what is the weather forecast for Paris", k=1)
    made_up = ToolCall("get_weather", {"city": "Paris"}, id="call_x", invented=True)
    with FakeOpenAI(replies=[[ToolCall("forecast", {"city": "Paris"}, id="call_f"), made_up], "Sunny."]) as fake:
        client = _client(fake)
        messages: list[Any] = [{"role": "user", "content": "weather in Paris?"}]
        while True:
            reply = client.chat.completions.create(
                model="gpt-4.1", messages=messages, tools=result.definitions("openai")
            )
            messages.append(reply.choices[0].message)
            if not reply.choices[0].message.tool_calls:
                break
            for call in calls(result, reply, unknown="report"):
                if isinstance(call, UnknownCall):
                    content = call.error
                else:
                    ran.append(call.tool.id)
                    content = json.dumps({"sky": "sunny"})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        last = fake.requests_to("/chat/completions")[-1].body["messages"]
    assert ran == ["weather.forecast"] and reply.choices[0].message.content == "Sunny."
    assert last[2:] == [
        {"role": "tool", "tool_call_id": "call_f", "content": '{"sky": "sunny"}'},
        {
            "role": "tool",
            "tool_call_id": "call_x",
            "content": "no offered tool is named 'get_weather' (offered: forecast)",
        },
    ]


def test_a_chat_handler_may_answer_with_tool_calls_and_a_reply_is_checked_when_scripted() -> None:
    """chat_handler answers with a ToolCall as with text; a reply that is none (a number, an empty list, a list with
    text in it) and a ToolCall with a bad field are refused when scripted, naming what is wrong."""

    def handler(messages: list[dict[str, Any]], model: str) -> Any:
        return ToolCall("forecast", {"city": messages[-1]["content"]})

    with FakeOpenAI(chat_handler=handler) as fake:
        reply = _ask(_client(fake), tools=[WEATHER])
        assert reply.choices[0].message.tool_calls[0].function.arguments == '{"city": "hi"}'
        for bad, said in [
            (5, "got 5"),
            ([], r"got \[\]"),
            ([ToolCall("forecast"), "text"], "non-empty list of ToolCalls"),
        ]:
            with pytest.raises(InvalidInputError, match=f"a FakeOpenAI reply must be text .*{said}"):
                fake.reply_next(bad)
        assert fake.replies_left == 0
    with pytest.raises(InvalidInputError, match="ToolCall's name must be a non-empty string, got ''"):
        ToolCall("")
    with pytest.raises(InvalidInputError, match=r"ToolCall 'forecast': arguments must be a JSON object .* got \[1\]"):
        ToolCall("forecast", [1])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="ToolCall 'forecast': id must be a non-empty string or None, got ''"):
        ToolCall("forecast", id="")


def test_tool_call_arguments_json_cannot_hold_are_refused_when_scripted() -> None:
    """A ToolCall whose arguments held a date was the fake's 500 at the request ("handler failed: TypeError"), NaN went
    out as the invalid JSON ``NaN`` and a key 1 as "1"; each is refused when the ToolCall is made, naming the part of
    the arguments JSON cannot hold. JSON's values pass, nested, and so does a string sent as it is."""
    for bad, said in [
        ({"when": datetime.date(2026, 1, 2)}, "arguments['when'] is date datetime.date(2026, 1, 2)"),
        ({"days": [1, float("nan")]}, "arguments['days'][1] is nan"),
        ({"where": {1: "Paris"}}, "arguments['where'] has the key 1, not a string"),
        ({"tags": {"a", "b"}}, "arguments['tags'] is set"),
    ]:
        with pytest.raises(InvalidInputError, match=re.escape(f"ToolCall 'forecast': {said}")):
            ToolCall("forecast", bad)
    good = {"city": "Paris", "days": (1, 2.5), "opts": {"metric": True, "note": None}}
    with FakeOpenAI(replies=[ToolCall("forecast", good), ToolCall("forecast", "NaN")]) as fake:
        client = _client(fake)
        sent = _ask(client, tools=[WEATHER]).choices[0].message.tool_calls[0].function.arguments
        assert json.loads(sent) == {"city": "Paris", "days": [1, 2.5], "opts": {"metric": True, "note": None}}
        assert _ask(client, tools=[WEATHER]).choices[0].message.tool_calls[0].function.arguments == "NaN"


def test_a_second_start_is_refused_and_leaks_no_server() -> None:
    """start() while serving made a second server over the first, whose thread and socket nothing stopped; it is an
    InvalidInputError (as a call on a closed store is) naming where it serves, the first server serving on. A stop
    ends the thread and closes the socket, a second stop does nothing, and a start after a stop serves again."""
    fake = FakeOpenAI().start()
    url, thread = fake.base_url, fake._thread
    assert thread is not None
    with pytest.raises(InvalidInputError, match=f"FakeOpenAI is already serving at {re.escape(url)}: stop"):
        fake.start()
    assert (fake.base_url, fake._thread) == (url, thread)
    assert _ask(_client(fake)).choices[0].message.content == "fake reply to: hi"
    fake.stop()
    assert not thread.is_alive()
    port = int(url.split(":")[-1].split("/")[0])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    fake.stop()
    with pytest.raises(InvalidInputError, match="FakeOpenAI is not serving"):
        fake.base_url  # noqa: B018 - the property raises
    with fake:
        assert _ask(_client(fake)).choices[0].message.content == "fake reply to: hi"
    assert fake._thread is None


def test_misusing_the_fake_is_a_toolstore_error_saying_what_to_do() -> None:
    """Before: base_url unstarted was a bare RuntimeError, an unknown malformed kind a ValueError, ``replies="hi"``
    two replies ("h", "i"), ``times=-1`` and ``fail_next(200)`` nothing scripted, a negative stall a 500 later."""
    fake = FakeOpenAI()
    fake.stop()  # before a start: nothing to stop, as a second stop (a teardown after a failed start)
    with pytest.raises(InvalidInputError, match=r"not serving: call start\(\) first, or use it as a context manager"):
        fake.base_url  # noqa: B018 - the property raises
    misuses: list[tuple[Any, str]] = [
        (lambda: FakeOpenAI(replies="hi"), "replies must be a list of replies, got 'hi'"),
        (lambda: FakeOpenAI(replies=ToolCall("f")), "replies must be a list of replies"),
        (lambda: fake.fail_next(503, times=-1), r"fail_next: times must be a whole number"),
        (lambda: fake.pass_next(1.5), r"pass_next: times must be a whole number"),
        (lambda: fake.fail_next(200), r"fail_next: status must be an HTTP error status \(400-599\), got 200"),
        (lambda: fake.stall_next(-1), r"stall_next: seconds must be a finite number, 0 or more, got -1"),
        (lambda: fake.respond_malformed_next("garbled"), r"respond_malformed_next: unknown malformed kind 'garbled'"),
    ]
    for misuse, message in misuses:
        with pytest.raises(InvalidInputError, match=message):
            misuse()
    with fake:
        fake.fail_next(503, times=0)  # nothing scripted: answered
        assert _ask(_client(fake)).choices[0].message.content == "fake reply to: hi"
