"""Definitions models accept: faithful round trips (key order, extra fields), OpenAPI ids and endpoints, YAML,
and unique valid model-facing names with resolve() for every format, checked against the SDKs' own types."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from toolstore import (
    InvalidInputError,
    InvalidToolError,
    Tool,
    ToolStore,
    UnknownToolError,
    export_catalog,
    load_tools_file,
    parse_tools,
)
from toolstore._formats.names import model_names, name_forms
from toolstore._names import call_namespace, resolve_call, resolve_calls

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "book_flight",
        "description": "Book a flight",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "from": {"type": "string"}, "date": {"type": "string"}},
            "required": ["to", "from"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
MCP_TOOL = {
    "name": "delete_file",
    "title": "Delete a file",
    "description": "Delete a file from the workspace",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "force": {"type": "boolean"}, "after": {"type": "integer"}},
        "required": ["path"],
    },
    "outputSchema": {"type": "object", "properties": {"deleted": {"type": "boolean"}}},
    "annotations": {"title": "Delete a file", "destructiveHint": True, "idempotentHint": False},
    "_meta": {"vendor/x": 1},
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"unit": {"type": "string"}, "city": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"},
}
NO_ARGS_MCP = {"name": "ping_server", "description": "Ping the server", "inputSchema": {"type": "object"}}
CUSTOM_TOOL = {  # an OpenAI custom tool, Chat Completions shape: free-form text held to a grammar
    "type": "custom",
    "custom": {
        "name": "run_query",
        "description": "Run a read-only SQL query on the sales database",
        "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": "^SELECT .+$"}},
    },
}


def _only(definitions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in definitions if d.get("name", d.get("function", {}).get("name")) == name)


def test_definitions_round_trip_exactly_through_the_database(store: ToolStore) -> None:
    tools = parse_tools([OPENAI_TOOL, MCP_TOOL, ANTHROPIC_TOOL, NO_ARGS_MCP])
    store.upsert(tools)
    flight = store.get("book_flight")
    assert list(flight.parameters["properties"]) == ["to", "from", "date"]  # not jsonb's sorted order
    assert store.tools() == sorted(tools, key=lambda t: t.id)
    mcp = store.route("delete a file from the workspace", k=4)
    assert _only(mcp.definitions("mcp"), "delete_file") == MCP_TOOL  # annotations, outputSchema, _meta kept
    assert json.dumps(_only(mcp.definitions("mcp"), "delete_file")) == json.dumps(MCP_TOOL)  # key order too
    assert _only(mcp.definitions("mcp"), "ping_server") == NO_ARGS_MCP  # its own empty schema, not a placeholder
    flights = store.route("book a flight", k=4)
    assert json.dumps(_only(flights.definitions("openai"), "book_flight")) == json.dumps(OPENAI_TOOL)
    weather = store.route("weather for a city", k=4)
    assert json.dumps(_only(weather.definitions("anthropic"), "get_weather")) == json.dumps(ANTHROPIC_TOOL)
    # into another format, only what that API accepts
    anthropic_mcp = _only(mcp.definitions("anthropic"), "delete_file")
    assert set(anthropic_mcp) == {"name", "description", "input_schema"}
    assert list(anthropic_mcp["input_schema"]["properties"]) == ["path", "force", "after"]
    # export and import back: the same tools (metadata included)
    for fmt in ("openai", "openai-responses", "anthropic", "mcp"):
        again = parse_tools(export_catalog(store.tools(), fmt, with_metadata=True))
        assert [(t.id, t.parameters) for t in again] == [(t.id, t.parameters) for t in store.tools()]


def test_custom_tools_round_trip_exactly_through_the_database(store: ToolStore) -> None:
    """An OpenAI custom tool comes back from a route as it was imported, and as the Responses API writes it."""
    store.upsert(parse_tools([OPENAI_TOOL, CUSTOM_TOOL]))
    result = store.route("run a SQL query on the sales database", k=2)
    assert json.dumps(next(d for d in result.definitions("openai") if d["type"] == "custom")) == json.dumps(CUSTOM_TOOL)
    assert next(d for d in result.definitions("openai-responses") if d["type"] == "custom") == {
        "type": "custom",
        "name": "run_query",
        "description": "Run a read-only SQL query on the sales database",
        "format": {"type": "grammar", "syntax": "regex", "definition": "^SELECT .+$"},
    }


def test_a_responses_namespace_comes_back_whole_from_the_database(store: ToolStore) -> None:
    """The namespaces a Responses tools list was imported with (their descriptions included) come back from a
    catalog's Responses export as they were, key order kept."""
    crm = {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records: leads and accounts.",
        "tools": [
            {"type": "function", "name": "create_lead", "parameters": OPENAI_TOOL["function"]["parameters"]},
            {"type": "custom", "name": "search", "description": "Search the CRM."},
        ],
    }
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    document = {"tools": [crm, weather]}
    store.upsert(parse_tools(document))
    assert json.dumps(export_catalog(store.tools(), "openai-responses")) == json.dumps(document)


def responses_fn(name: str) -> dict[str, Any]:
    """A Responses function definition that takes no arguments (it renders back as it is)."""
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}


def test_a_write_into_a_namespace_the_catalog_holds_with_another_description_is_refused(store: ToolStore) -> None:
    """A tool imported into a Responses namespace the catalog already holds, with another description, was written,
    and a Responses export took one description, the other lost. The write is refused naming the namespace and a tool
    of each (which one this write brings), nothing written; one with the same description joins it, and a prune that
    replaces every tool of the namespace may change its description."""
    crm = {"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [responses_fn("a")]}
    store.upsert(parse_tools(crm))
    other = {**crm, "description": "CRM.", "tools": [responses_fn("b")]}
    with pytest.raises(
        InvalidToolError,
        match=r"^namespace 'crm' is given twice, described 'CRM\.' and 'Customer records\.': tool 'crm\.b' \(this "
        r"write\) and tool 'crm\.a' \(in the catalog\)",
    ):
        store.upsert(parse_tools(other))
    assert [t.id for t in store.tools()] == ["crm.a"]
    store.upsert(parse_tools({**crm, "tools": [responses_fn("c")]}))
    assert export_catalog(store.tools(), "openai-responses") == {
        "tools": [{**crm, "tools": [responses_fn("a"), responses_fn("c")]}]
    }
    store.upsert(parse_tools(other), prune=True)
    assert export_catalog(store.tools(), "openai-responses") == {"tools": [other]}


def test_tools_held_in_two_namespaces_of_one_name_are_listed_in_the_first_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tools a catalog held before writes refused differing namespaces of one name (each parsed alone) were an error
    from their definitions, so a route of such a catalog failed when the agent asked for them; they are listed in the
    first one's namespace, with a warning naming both."""
    crm = {"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [responses_fn("a")]}
    tools = parse_tools(crm) + parse_tools({**crm, "description": "CRM.", "tools": [responses_fn("b")]})
    with caplog.at_level("WARNING", logger="toolstore"):
        listed = export_catalog(tools, "openai-responses")
    assert listed == {"tools": [{**crm, "tools": [responses_fn("a"), responses_fn("b")]}]}
    assert [r.getMessage() for r in caplog.records] == [
        "namespace 'crm' is given twice, described 'Customer records.' and 'CRM.': tool 'crm.a' and tool 'crm.b'; a "
        "namespace's tools share its one definition (a Responses export gives it once): give it the same description "
        "and keys everywhere; both are given in the first one's"
    ]


def test_an_export_of_the_catalog_names_its_tools_as_a_route_does(store: ToolStore) -> None:
    """Two tools of one name (two providers' "search") were exported both as "search", where a route offering them
    both named them "gh__search" and "jira__search": an export is named as a route's definitions of the same tools
    are, and imports back into another catalog as two tools."""
    store.upsert(
        parse_tools(
            [{"name": "search", "description": f"Search {p}.", "x-toolstore": {"provider": p}} for p in ("gh", "jira")]
        )
    )
    result = store.route("search", k=5)
    assert sorted(result.ids) == ["gh.search", "jira.search"]
    for fmt in ("openai", "openai-responses", "anthropic", "mcp"):
        exported = export_catalog([r.tool for r in result.tools], fmt)  # type: ignore[arg-type]
        assert exported["tools"] == result.definitions(fmt)  # type: ignore[arg-type]
        catalog = {d.get("function", d)["name"] for d in export_catalog(store.tools(), fmt)["tools"]}  # type: ignore[arg-type]
        assert catalog == {"gh__search", "jira__search"}, fmt
        assert len(parse_tools(exported)) == 2


def test_reordered_parameters_are_a_change(store: ToolStore) -> None:
    store.upsert(parse_tools([OPENAI_TOOL]))
    reordered = copy.deepcopy(OPENAI_TOOL)
    props = reordered["function"]["parameters"]["properties"]
    reordered["function"]["parameters"]["properties"] = dict(reversed(list(props.items())))
    report = store.upsert(parse_tools([reordered]))
    assert report.updated == ["book_flight"]
    assert list(store.get("book_flight").parameters["properties"]) == ["date", "from", "to"]


PETCLINIC = {
    "openapi": "3.0.3",
    "info": {"title": "Petclinic API", "version": "1"},
    "paths": {
        "/pets/{petId}": {
            "post": {
                "operationId": "addPet",
                "summary": "Add a pet",
                "parameters": [{"name": "petId", "in": "path", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "ok"}},
            },
            "delete": {"operationId": "remove pet", "summary": "Remove a pet", "responses": {}},
        }
    },
}
PETCLINIC_YAML = """\
openapi: 3.0.3
info: {title: Petclinic API, version: "1"}
paths:
  /pets/{petId}:
    post:
      operationId: addPet
      summary: Add a pet
      parameters:
        - {name: petId, in: path, schema: {type: integer}}
      responses:
        200: {description: ok}
    delete:
      operationId: remove pet
      summary: Remove a pet
      responses: {}
"""


def test_openapi_ids_are_slugs_with_method_and_path(tmp_path: Path) -> None:
    tools = parse_tools(PETCLINIC)
    assert [t.id for t in tools] == ["petclinic_api.addPet", "petclinic_api.remove_pet"]
    assert all(" " not in t.id for t in tools)
    exported = export_catalog(tools, "openai", with_metadata=True)["tools"]
    assert exported[0]["function"]["x-toolstore"]["http"] == {"method": "POST", "path": "/pets/{petId}"}
    assert exported[1]["function"]["x-toolstore"]["http"] == {"method": "DELETE", "path": "/pets/{petId}"}
    again = parse_tools({"tools": exported})
    assert [t.id for t in again] == [t.id for t in tools]
    assert export_catalog(again, "mcp", with_metadata=True)["tools"][0]["x-toolstore"]["http"]["method"] == "POST"
    yaml_file = tmp_path / "petclinic.yaml"
    yaml_file.write_text(PETCLINIC_YAML, encoding="utf-8")
    assert load_tools_file(yaml_file) == tools  # integer response codes become the strings JSON has
    not_openapi = tmp_path / "compose.yml"
    not_openapi.write_text("services:\n  db: {image: postgres}\n", encoding="utf-8")
    with pytest.raises(InvalidToolError, match="compose.yml: not an OpenAPI document"):
        load_tools_file(not_openapi)


# -- model-facing names -----------------------------------------------------------------------------------


def _issue_tools() -> list[Tool]:
    params = {"type": "object", "properties": {"title": {"type": "string"}}}
    return [
        Tool(
            id=f"{p}.create_issue",
            name="create_issue",
            provider=p,
            description=f"Create a {p} issue",
            parameters=params,
        )
        for p in ("github", "jira", "linear")
    ] + [
        Tool(id="slack.send_message", name="send_message", provider="slack", description="Send a message"),
        Tool(id="weird.name", name="get weather.now!", description="Weather now"),
        Tool(id="long.one", name="x" * 100, description="A tool with a very long name"),
        Tool(id="long.two", name="x" * 100 + "y", description="Another tool with a very long name"),
        Tool(id="a.dup", name="dup", provider="a"),
        Tool(id="a.dup2", name="dup", provider="a"),
    ]


def test_names_are_unique_valid_deterministic_and_only_namespaced_when_needed() -> None:
    tools = _issue_tools()
    names = model_names(tools)
    assert names[:4] == ["github__create_issue", "jira__create_issue", "linear__create_issue", "send_message"]
    assert names[4] == "get_weather_now"
    assert len(set(names)) == len(names) and all(VALID.match(n) for n in names)
    assert names == model_names(list(tools))  # the same every time
    assert model_names(tools[2:4]) == ["create_issue", "send_message"]  # no collision, no namespace
    assert names[7] != names[8] and all(n.startswith("a__dup_") for n in names[7:9])


def test_ids_of_no_valid_character_get_valid_names() -> None:
    """An id made of dots, underscores and spaces alone, without a provider, left nothing for ``provider__name``: its
    qualified name was empty, and a model API refuses an empty function name."""
    tools = [Tool(id=i, name=i, description="d") for i in ("__.", "_ .", "...")]
    names = model_names(tools)
    assert len(set(names)) == len(names) and all(VALID.match(n) for n in names), names
    assert all(VALID.match(form) for t in tools for form in name_forms(t))


SDK_TYPES = {
    "openai": "openai.types.chat.ChatCompletionFunctionToolParam",
    "openai-responses": "openai.types.responses.FunctionToolParam",
    "anthropic": "anthropic.types.ToolParam",
    "mcp": "mcp.types.Tool",
}


def _sdk_type(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize("fmt", sorted(SDK_TYPES))
def test_definitions_names_and_resolve_in_every_format(store: ToolStore, fmt: str) -> None:
    store.upsert(_issue_tools())
    result = store.route("create an issue for the login bug", k=20)
    assert {"github.create_issue", "jira.create_issue", "linear.create_issue"} <= set(result.ids)
    definitions = result.definitions(fmt)  # type: ignore[arg-type]
    names = [d["function"]["name"] if fmt == "openai" else d["name"] for d in definitions]
    assert len(set(names)) == len(names) and all(VALID.match(n) for n in names)
    assert "linear__create_issue" in names
    sdk_type = _sdk_type(SDK_TYPES[fmt])
    for definition in definitions:  # each one is what the SDK's type accepts
        if hasattr(sdk_type, "model_validate"):
            sdk_type.model_validate(definition)
        else:
            TypeAdapter(sdk_type).validate_python(definition)
    assert [result.resolve(n).id for n in names] == result.ids
    assert store.resolve("linear__create_issue").id == "linear.create_issue"  # a later turn, no result at hand
    with pytest.raises(UnknownToolError):
        result.resolve("create_issue")


def test_store_resolve_in_a_later_turn(store: ToolStore) -> None:
    store.upsert(_issue_tools())
    assert store.resolve("send_message").id == "slack.send_message"  # plain and unique in the catalog
    assert store.resolve("jira.create_issue").id == "jira.create_issue"  # the id
    assert store.resolve("get_weather_now").id == "weird.name"  # a sanitised name
    offered = store.route("create an issue", k=3, allow=["linear.create_issue", "slack.send_message"])
    assert store.resolve("create_issue", among=offered.ids).id == "linear.create_issue"
    with pytest.raises(UnknownToolError, match="ambiguous"):
        store.resolve("create_issue")  # three tools in the catalog: the offered set decides
    with pytest.raises(UnknownToolError, match="no tool named"):
        store.resolve("nope")


NAMING = [  # tools whose names are not valid as they stand, and names that equal another tool's name form
    Tool(id="x.one", name="do it", provider="a", description="do the thing"),
    Tool(id="z.three", name="do it", provider="c", description="do the other thing"),
    Tool(id="y.two", name="a__do_it", provider="zz", description="something unrelated"),
    Tool(id="a.send", name="send.msg", provider="a", description="send a message"),
    Tool(id="b.send", name="send_msg", provider="b", description="send a message"),
    Tool(id="gh.ci", name="createIssue", description="no provider: offered as gh__ci when qualified"),
    Tool(id="gh__ci", name="ci", provider="other", description="an id that is another tool's qualified name"),
    Tool(id="u.tool", name="Café menu", provider="my__prov", description="non-ASCII and a provider with __"),
    Tool(id="long.one", name="x" * 100, description="a name over 64 characters"),
    Tool(id="zh.search", name="搜索", provider="zh", description="no letter or digit a name can keep: 'tool'"),
    Tool(id="misc.tool", name="tool", provider="misc", description="a tool named tool"),
    Tool(id="x.搜索", name="查找", description="no provider, an id part that keeps nothing either: 'x__tool'"),
]


def test_resolving_calls_through_the_index_equals_resolving_across_the_catalog(store: ToolStore) -> None:
    """route() resolves the names a model called among the tools `call_candidates` finds (by index); every name
    form of every tool, and every raw name, resolves there as it does among all the catalog's tools."""
    store.upsert(NAMING)
    names = sorted({form for t in NAMING for form in (*name_forms(t), t.name, t.id)})
    expected = resolve_calls(names, NAMING)
    assert [store.resolve_calls([n])[0] for n in names] == expected  # one by one: a name that found no tool
    assert store.resolve_calls(names) == expected  # sends the whole list to the catalog-wide path
    assert store.resolve_calls(["a__do_it"]) == ["x.one"]  # x's qualified name, not y's raw name
    assert store.resolve_calls(["send_msg"]) == [None]  # a.send's valid name and b.send's own: ambiguous
    assert store.resolve_calls(["tool"]) == [None]  # zh.search's valid name, misc.tool's own and x.搜索's


def _in(namespace: object) -> dict[str, Any]:
    return {"x-toolstore-namespace": {"type": "namespace", "name": namespace, "description": "d", "tools": []}}


NAMESPACED = [  # tools imported from a Responses namespace: one naming its own provider, a long one, a bad record
    Tool(id="sales.search", name="search", provider="sales", spec=_in("crm")),
    Tool(id="crm.create_lead", name="create_lead", provider="crm", spec=_in("crm")),
    Tool(id="sf.long", name="create_" + "x" * 49, provider="salesforce_crm", spec=_in("salesforce_crm")),
    Tool(id="t.search", name="search", provider="tickets", spec=_in(7)),  # no string name: its provider's
]


def test_resolving_many_calls_at_once_is_resolving_each_call() -> None:
    """``resolve_calls`` (every call at once, from one index of each namespace's name forms) answers each call as
    ``resolve_call`` does alone (resolve_name's tiers: the id, the model-facing forms, the plain and raw names; one tool
    resolves, more are ambiguous), in and out of namespaces, for every name form and a few that match nothing."""
    tools = [*NAMING, *NAMESPACED]
    names = sorted({form for t in tools for form in (*name_forms(t), t.name, t.id)}) + ["", "nothing", "tool_0000"]
    spaces = [None, *sorted({s for t in tools for s in (call_namespace(t), t.provider) if s is not None}), "nowhere"]
    calls = [(n, s) for n in names for s in spaces]

    def alone(name: str, namespace: str | None) -> str | None:
        try:
            return resolve_call(name, namespace, tools, offered=False).id
        except UnknownToolError:
            return None

    assert resolve_calls([n for n, _ in calls], tools, [s for _, s in calls]) == [alone(n, s) for n, s in calls]
    assert any(alone(n, s) is None for n, s in calls) and any(alone(n, s) for n, s in calls)


def test_calls_in_a_namespace_resolve_through_the_index_as_across_the_catalog(store: ToolStore) -> None:
    """A call made inside a Responses namespace is resolved among the tools `call_candidates` finds by its name, kept
    to those in that namespace (the one a tool was imported from, else its provider): every name form of every tool,
    in every namespace, resolves there (and through the catalog-wide path) as among all the catalog's tools."""
    tools = [*NAMING, *NAMESPACED]
    store.upsert(tools)
    names = sorted({form for t in tools for form in (*name_forms(t), t.name, t.id)})
    spaces = sorted({s for t in tools for s in (call_namespace(t), t.provider) if s is not None}) + ["nowhere"]
    calls = [(n, s) for n in names for s in spaces]
    expected = resolve_calls([n for n, _ in calls], tools, [s for _, s in calls])
    assert [store.resolve_calls([n], namespaces=[s])[0] for n, s in calls] == expected
    assert store.resolve_calls([n for n, _ in calls], namespaces=[s for _, s in calls]) == expected
    assert store.resolve_calls(["search", "search", "search"], namespaces=["crm", "tickets", "sales"]) == [
        "sales.search",  # the namespace it was imported from, not its provider
        "t.search",
        None,
    ]
    with pytest.raises(InvalidInputError, match="a list of call namespaces"):
        store.resolve_calls(["search"], namespaces="crm")
    with pytest.raises(InvalidInputError, match=r"one call namespace \(or None\) per call name: 1 for 2"):
        store.resolve_calls(["search", "search"], namespaces=["crm"])


def test_demo_catalog_issue_request_gets_unique_anthropic_names(store: ToolStore) -> None:
    from toolstore.cli.demo import DEMO_DIR

    store.upsert(load_tools_file(DEMO_DIR / "tools.jsonl"))
    result = store.route("create an issue for the login bug", k=8)
    creators = [r.tool.id for r in result if r.tool.name == "create_issue"]
    assert len(creators) == 3, result.ids
    names = [d["name"] for d in result.definitions("anthropic")]
    assert len(set(names)) == len(names)
    assert {result.resolve(n).id for n in names if n.endswith("__create_issue")} == set(creators)


def test_a_call_of_a_huge_name_is_refused_quoting_its_head() -> None:
    """A model's call of a name of 100,000 characters (or made in a namespace that long) was refused with an error
    quoting all of it, 100 KB for a log; it quotes 80 characters, and still what was offered."""
    from toolstore import RoutedTool, RouteResult, Signals

    tools = parse_tools([{"type": "namespace", "name": "crm", "tools": [{"type": "function", "name": "search"}]}])
    result = RouteResult(query="q", tools=[RoutedTool(t, 1.0, Signals()) for t in tools], fmt="openai-responses")
    huge = "x" * 100_000
    for name, namespace, message in [
        (huge, None, "no offered tool is named 'xxx"),
        ("search", huge, "no offered tool is in namespace 'xxx"),
        ("search", "crm", None),
    ]:
        if message is None:
            assert result.resolve(name, namespace=namespace).id == "crm.search"
            continue
        with pytest.raises(UnknownToolError) as info:
            result.resolve(name, namespace=namespace)
        assert str(info.value).startswith(message) and len(str(info.value)) < 300, str(info.value)[:200]
    with pytest.raises(UnknownToolError) as info:
        resolve_call(huge, None, tools, offered=False)
    assert str(info.value).startswith("no tool named 'xxx") and len(str(info.value)) < 300
