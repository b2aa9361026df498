"""Tool formats in and out: parsing every supported shape, validation errors, rendering, round trips."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from toolstore import InvalidInputError, InvalidToolError, Tool
from toolstore._formats import (
    FORMATS,
    custom_input,
    export_catalog,
    load_tools_file,
    parse_tools,
    render,
    to_anthropic,
    to_mcp,
    to_openai,
)
from toolstore._formats.names import offered_names

from benchdata import BENCH
from conftest import INT_LIMIT

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
}


def without_spec(tool: Tool) -> Tool:
    """The tool with ``spec`` cleared: round trips keep every field except the original spec."""
    return dataclasses.replace(tool, spec=None)


def same_tools(a: list[Tool], b: list[Tool]) -> bool:
    return [without_spec(t) for t in a] == [without_spec(t) for t in b]


def one(data: object, **kwargs: Any) -> Tool:
    tools = parse_tools(data, **kwargs)
    assert len(tools) == 1, tools
    return tools[0]


# --- every input format -------------------------------------------------------------------------


def test_benchmark_row() -> None:
    row = {
        "id": "th0001",
        "name": "YOLOP",
        "description": "Detect lanes.",
        "provider": "PyTorch",
        "parameters": None,
        "category": "Object Detection",
    }
    tool = one(row)
    assert tool == Tool(
        id="th0001",
        name="YOLOP",
        description="Detect lanes.",
        provider="PyTorch",
        categories=("Object Detection",),
        spec=row,
    )
    assert one({**row, "category": None, "provider": None}).categories == ()
    assert one({**row, "provider": None}, provider="hub").id == "th0001"  # explicit id kept


def test_openai_chat_and_responses_and_bare() -> None:
    chat = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now.",
            "parameters": WEATHER_SCHEMA,
            "strict": True,
        },
    }
    responses = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather now.",
        "parameters": WEATHER_SCHEMA,
        "strict": None,
    }
    bare = {"name": "get_weather", "description": "Weather now.", "parameters": WEATHER_SCHEMA}
    expected = Tool(id="get_weather", name="get_weather", description="Weather now.", parameters=WEATHER_SCHEMA)
    for data in (chat, responses, bare):
        tool = one(data)
        assert without_spec(tool) == expected
        assert tool.spec == data


def test_anthropic() -> None:
    data = {
        "name": "get_weather",
        "description": "Weather now.",
        "input_schema": WEATHER_SCHEMA,
        "cache_control": {"type": "ephemeral"},
    }
    tool = one(data)
    assert (tool.name, tool.description, tool.parameters) == ("get_weather", "Weather now.", WEATHER_SCHEMA)
    assert one({**data, "type": "custom"}).parameters == WEATHER_SCHEMA


def test_mcp_tool_list_result_and_jsonrpc() -> None:
    mcp_tool = {
        "name": "read_file",
        "title": "Read file",
        "description": "Read a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    }
    tool = one(mcp_tool, provider="fs")
    assert (tool.id, tool.title, tool.provider) == ("fs.read_file", "Read file", "fs")
    result = {"tools": [mcp_tool, {"name": "ls", "inputSchema": {"type": "object"}}], "nextCursor": "abc"}
    assert [t.id for t in parse_tools(result)] == ["read_file", "ls"]
    rpc = {"jsonrpc": "2.0", "id": 7, "result": result}
    assert same_tools(parse_tools(rpc, provider="fs"), parse_tools(result, provider="fs"))
    assert one({"name": "x", "inputSchema": {"type": "object"}, "annotations": {"title": "X!"}}).title == "X!"


def test_named_wrapper_of_tools_is_parsed_as_its_tools() -> None:
    """An MCP server manifest or an OpenAI Assistant (a name and a tools list, no tool of its own) is a wrapper; a
    named object with tools and a tool's keys is ambiguous, an error naming it."""
    tools = [
        {"name": "create_issue", "description": "Create an issue", "inputSchema": {"type": "object"}},
        {"type": "function", "function": {"name": "list_prs", "description": "List pull requests"}},
    ]
    manifest = {"name": "github", "version": "1.0.0", "tools": tools}
    assistant = {"id": "asst_1", "object": "assistant", "name": "Helper", "tools": tools}
    for wrapper in (manifest, assistant):
        assert [t.name for t in parse_tools(wrapper)] == ["create_issue", "list_prs"]
    ambiguous = {"type": "function", "name": "x", "parameters": {"type": "object"}, "tools": tools}
    with pytest.raises(InvalidToolError, match="^tool 'x': has both 'tools' and a tool's 'type', 'parameters'"):
        parse_tools(ambiguous)
    with pytest.raises(InvalidToolError, match="^tool 'x': has both 'tools' and a tool's 'inputSchema'"):
        parse_tools({"name": "x", "inputSchema": {"type": "object"}, "tools": []})


def test_builtin_tools_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """An OpenAI Assistant, a Responses or an Anthropic tools list holding the provider's built-in tools (code
    interpreter, file search, web search, computer use, remote MCP...) imports its function tools; the built-in ones,
    no functions to route to, are skipped with a warning naming them."""
    function = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}
    assistant = {
        "id": "asst_1",
        "object": "assistant",
        "name": "Helper",
        "tools": [{"type": "code_interpreter"}, function, {"type": "file_search", "file_search": {}}],
    }
    with caplog.at_level("WARNING", logger="toolstore"):
        assert [t.name for t in parse_tools(assistant)] == ["get_weather"]
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            "skipped 2 built-in tools: tool tools[0] (type 'code_interpreter'), tool tools[2] (type 'file_search'); "
            "built-in tools run inside the model provider"
        )
    )
    responses = [
        {"type": "web_search_preview"},
        {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA},
        {"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "browser"},
        {"type": "image_generation"},
        {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp"},
        {"type": "web_search_preview_2025_03_11"},
        {"type": "custom", "name": "run_sql", "description": "Run SQL."},
    ]
    anthropic = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}, {"name": "get_weather"}]
    caplog.clear()
    with caplog.at_level("WARNING", logger="toolstore"):
        assert [t.name for t in parse_tools(responses)] == ["get_weather", "run_sql"]
        assert [t.name for t in parse_tools(anthropic)] == ["get_weather"]
    assert "skipped 5 built-in tools: tool [0] (type 'web_search_preview')" in caplog.records[0].getMessage()
    assert "tool [0] 'web_search' (type 'web_search_20250305')" in caplog.records[1].getMessage()


def test_a_responses_namespace_is_its_tools_provider() -> None:
    """A Responses API namespace groups function and custom tools under the name the model calls them by ("crm"):
    they are imported with it as their provider (ids "crm.create_lead"), as a synced MCP server's tools are, so two
    namespaces may hold the same name; the caller's provider fills only the gaps, a tool's own x-toolstore provider
    wins. Each tool renders back as it was; the namespace itself is not rebuilt."""
    crm = {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records.",
        "tools": [
            {"type": "function", "name": "create_lead", "description": "Create a lead.", "parameters": WEATHER_SCHEMA},
            {"type": "custom", "name": "search", "description": "Search the CRM in its query language."},
        ],
    }
    tickets = {
        "type": "namespace",
        "name": "tickets",
        "description": "Support tickets.",
        "tools": [{"type": "function", "name": "search", "description": "Search tickets."}],
    }
    weather = {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}
    tools = parse_tools({"tools": [crm, {"type": "web_search"}, tickets, weather]})
    assert [(t.id, t.name, t.provider) for t in tools] == [
        ("crm.create_lead", "create_lead", "crm"),
        ("crm.search", "search", "crm"),
        ("tickets.search", "search", "tickets"),
        ("get_weather", "get_weather", None),
    ]
    assert render(tools[:2], "openai-responses") == crm["tools"]
    assert [t.id for t in parse_tools([crm, weather], provider="acme")] == [
        "crm.create_lead",
        "crm.search",
        "acme.get_weather",
    ]
    own = {**crm, "tools": [{**crm["tools"][0], "x-toolstore": {"provider": "sales"}}]}
    assert one(own).id == "sales.create_lead"
    with pytest.raises(InvalidToolError, match=r"^tool \[0\]: a namespace's name must be a non-empty string, got None"):
        parse_tools([{"type": "namespace", "description": "x", "tools": [weather]}])
    with pytest.raises(InvalidToolError, match=r"^tool \[0\]\.tools\[0\] 'create_lead': NUL byte in spec\.x-toolstore"):
        parse_tools([{**crm, "name": "c\x00rm"}])
    with pytest.raises(InvalidToolError, match="^tools: must be a list of tools, got object"):
        parse_tools({**crm, "tools": {"a": weather}})


def test_a_responses_namespace_comes_back_whole_in_the_responses_format() -> None:
    """A namespace's description (shown to the model, required by the API) has no field in a Tool: each of its tools
    keeps the namespace in its spec, and a Responses export puts them inside it again, as imported (its keys and their
    order, where its first tool is), with or without metadata; a render per tool and the other formats stay flat."""
    crm = {
        "name": "crm",
        "type": "namespace",
        "description": "Customer records.",
        "tools": [
            {"type": "function", "name": "create_lead", "description": "Create a lead.", "parameters": WEATHER_SCHEMA},
            {"type": "custom", "name": "search", "description": "Search the CRM in its query language."},
        ],
    }
    tickets = {
        "type": "namespace",
        "name": "tickets",
        "description": "Support tickets.",
        "tools": [{"type": "function", "name": "search", "parameters": {"type": "object", "properties": {}}}],
        "defer_loading": True,
    }
    weather = {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}
    document = {"tools": [crm, weather, tickets]}
    tools = parse_tools(document)
    assert json.dumps(export_catalog(tools, "openai-responses")) == json.dumps(document)
    assert render(tools, "openai-responses") == [*crm["tools"], weather, *tickets["tools"]]
    exported = export_catalog(tools, "openai-responses", with_metadata=True)
    back = parse_tools(json.loads(json.dumps(exported)))
    assert same_tools(back, tools) and export_catalog(back, "openai-responses", with_metadata=True) == exported
    assert len(export_catalog(tools, "anthropic")["tools"]) == 4
    with pytest.raises(InvalidToolError, match=r"NUL byte in spec.x-toolstore-namespace.description"):
        parse_tools({**crm, "description": "a\x00b"})


@pytest.mark.parametrize("fmt", ["anthropic", "mcp", "openai"])
def test_a_namespace_survives_an_export_in_a_format_without_namespaces(fmt: str) -> None:
    """Anthropic, MCP and Chat Completions have no namespaces: exported with metadata, a tool imported from a
    Responses namespace carries it in ``x-toolstore.namespace`` (the namespace object without its tools, its keys
    and their order), so the definitions import back into it and a Responses export gives the namespace as it was
    imported, a tool naming its own provider and a custom tool included."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    lead = {"type": "function", "name": "create_lead", "description": "Create a lead.", "parameters": schema}
    grammar = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}
    crm = {
        "name": "crm",
        "type": "namespace",
        "description": "Customer records.",
        "tools": [
            {**lead, "strict": False, "x-toolstore": {"provider": "sales"}},
            {"type": "custom", "name": "search", "description": "Search the CRM.", "format": grammar},
        ],
        "defer_loading": True,
    }
    weather = {"type": "function", "name": "get_weather", "parameters": schema, "strict": False}
    tools = parse_tools({"tools": [crm, weather]})
    responses = export_catalog(tools, "openai-responses")
    exported = json.loads(json.dumps(export_catalog(tools, fmt, with_metadata=True)))
    back = parse_tools(exported)
    assert json.dumps(export_catalog(back, "openai-responses")) == json.dumps(responses)
    assert same_tools(back, tools) and [t.id for t in back] == ["sales.create_lead", "crm.search", "get_weather"]
    assert export_catalog(back, fmt, with_metadata=True) == exported
    holder = exported["tools"][0].get("function", exported["tools"][0])
    assert holder["x-toolstore"]["namespace"] == {**crm, "tools": []}
    assert "namespace" not in json.dumps(export_catalog(tools, fmt))  # only with metadata, as every other field
    assert "namespace" not in json.dumps(exported["tools"][2])  # a tool of no namespace


def test_a_namespace_in_metadata_is_checked_naming_the_tool() -> None:
    """``x-toolstore.namespace`` written by hand: ``{"name", "description"}`` is enough; anything that is not a
    namespace without tools, or one another than the namespace the definition is inside, is an error naming the
    tool, and nothing is imported. The namespace's name is the tool's provider unless it names its own."""
    mcp = {"name": "search", "inputSchema": {"type": "object", "properties": {}}}
    short = one({**mcp, "x-toolstore": {"namespace": {"name": "crm", "description": "CRM."}}})
    assert short.id == "crm.search"  # its provider, as for a tool found inside the namespace
    assert export_catalog([short], "openai-responses")["tools"] == [
        {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [to_openai(short, shape="responses")]}
    ]
    for namespace, message in [
        ("crm", "x-toolstore.namespace must be a JSON object"),
        ({"description": "CRM."}, "x-toolstore.namespace.name must be a non-empty string, got None"),
        ({"name": " "}, "x-toolstore.namespace.name must be a non-empty string, got ' '"),
        ({"name": "crm", "type": "function"}, "x-toolstore.namespace.type must be 'namespace', got 'function'"),
        ({"name": "crm", "description": 3}, "x-toolstore.namespace.description must be a string, got number"),
        ({"name": "crm", "tools": [mcp]}, "x-toolstore.namespace.tools must be empty"),
    ]:
        with pytest.raises(InvalidToolError, match=rf"^tool \[1\] 'search': {re.escape(message)}"):
            parse_tools([{**mcp, "name": "ok"}, {**mcp, "x-toolstore": {"namespace": namespace}}])
    inside = {"type": "function", "name": "search", "x-toolstore": {"namespace": {"name": "crm"}}}
    assert one({"type": "namespace", "name": "crm", "description": "CRM.", "tools": [inside]}).provider == "crm"
    with pytest.raises(
        InvalidToolError,
        match=r"^tool tools\[0\] 'search': x-toolstore\.namespace names 'crm', but the definition is inside "
        r"namespace 'tickets'$",
    ):
        parse_tools({"type": "namespace", "name": "tickets", "description": "Tickets.", "tools": [inside]})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"name": "Helper", "tools": [{"type": "code_interpreter"}, {"type": "file_search"}]},
            "no function tools to import, only built-in ones: tool tools[0] (unsupported tool type "
            "'code_interpreter'), tool tools[1] (unsupported tool type 'file_search'); built-in tools run inside the "
            "model provider and are not functions toolstore can route to",
        ),
        ([{"type": "mcp", "server_label": "x"}], "only built-in ones: tool [0] (unsupported tool type 'mcp')"),
        # a type that is no tool anyone runs is an error, not a skip
        ([{"type": "code_interpreter"}, {"type": "fucntion", "name": "x"}], "unsupported tool type 'fucntion'"),
    ],
)
def test_only_builtin_tools_is_an_error(data: object, message: str) -> None:
    with pytest.raises(InvalidToolError) as info:
        parse_tools(data)
    assert message in str(info.value), str(info.value)


def test_builtin_tools_in_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file's built-in tools are skipped across the whole file (a JSONL line of them is no error), with a warning
    naming the file and line; a file of nothing else is an error naming it."""
    rows: list[object] = [
        {"type": "code_interpreter"},
        {"name": "a"},
        {"tools": [{"type": "file_search"}, {"name": "b"}]},
    ]
    path = write_lines(tmp_path / "tools.jsonl", rows)
    with caplog.at_level("WARNING", logger="toolstore"):
        assert [t.name for t in load_tools_file(path)] == ["a", "b"]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            f"{path}: skipped 2 built-in tools: line 1 (tool) (type 'code_interpreter'), line 3 (tool tools[0]) "
            "(type 'file_search')"
        )
    )
    path = tmp_path / "assistant.json"
    path.write_text(json.dumps({"name": "Helper", "tools": [{"type": "file_search"}]}), encoding="utf-8")
    with pytest.raises(
        InvalidToolError, match=f"^{re.escape(str(path))}: no function tools to import, only built-in ones: tool"
    ):
        load_tools_file(path)


def test_jsonrpc_error_is_reported() -> None:
    with pytest.raises(InvalidToolError, match="JSON-RPC error"):
        parse_tools({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}})


def test_mixed_list_and_wrappers() -> None:
    data = [
        {"type": "function", "function": {"name": "a"}},
        {"name": "b", "input_schema": {"type": "object", "properties": {}}},
        {"tools": [{"name": "c", "inputSchema": {"type": "object"}}]},
        [{"name": "d"}],
    ]
    tools = parse_tools(data)
    assert [t.name for t in tools] == ["a", "b", "c", "d"]
    assert all(t.parameters is None for t in tools)  # empty object schemas mean "no arguments"
    assert parse_tools([]) == []


PETSTORE: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "petstore", "version": "1"},
    "paths": {
        "/pets/{petId}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {
                "summary": "Get a pet.",
                "description": "Returns one pet by id.",
                "tags": ["pets"],
                "parameters": [
                    {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"}},
                ],
            },
            "put": {
                "operationId": "updatePet",
                "requestBody": {"$ref": "#/components/requestBodies/PetBody"},
                "x-toolstore": {"keywords": ["edit"], "always_on": True},
            },
        },
        "/pets": {
            "post": {
                "operationId": "addPets",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}
                    },
                },
            }
        },
    },
    "components": {
        "parameters": {
            "PetId": {"name": "petId", "in": "path", "description": "The pet's id", "schema": {"type": "integer"}}
        },
        "requestBodies": {
            "PetBody": {
                "content": {"application/json; charset=utf-8": {"schema": {"$ref": "#/components/schemas/Pet"}}}
            }
        },
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "parent": {"$ref": "#/components/schemas/Pet"},
                    "owner": {"$ref": "#/components/schemas/Owner", "description": "who owns it"},
                },
            },
            "Owner": {"type": "object", "properties": {"email": {"type": "string"}}},
        },
    },
}


def test_an_openapi_operation_of_a_long_path_gets_a_shortened_name() -> None:
    """An operation without operationId is named after its method and path; one whose path passed about 124
    characters was refused (the name over 128 characters). Its name keeps a readable head and ends in a short hash of
    method and path: at most 128 characters, the same at every import, another for each operation, even two whose
    paths differ only past the head; a name that fits is left as it was."""
    head = "/" + "segment/" * 40
    fits = "/" + "p" * 123
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Big API", "version": "1"},
        "paths": {head + "{id}": {"get": {}, "post": {}}, head + "{other}": {"get": {}}, fits: {"get": {}}},
    }
    tools = parse_tools(doc)
    names = [t.name for t in tools]
    assert names[3] == "get_" + "p" * 123
    assert len(set(names)) == 4 and all(len(n) <= 128 for n in names), names
    for name, method in zip(names[:3], ["get", "post", "get"]):
        assert re.fullmatch(rf"{method}_segment_segment_[a-z_]+_[0-9a-f]{{12}}", name), name
    assert [t.name for t in parse_tools(copy.deepcopy(doc))] == names
    assert [t.id for t in parse_tools(export_catalog(tools, "openai", with_metadata=True))] == [t.id for t in tools]


def test_openapi_operations() -> None:
    get, put, post = parse_tools(PETSTORE)
    assert (get.id, get.name, get.provider) == ("petstore.get_pets_petId", "get_pets_petId", "petstore")
    assert get.description == "Get a pet.\n\nReturns one pet by id."
    assert get.categories == ("pets",)
    assert get.parameters == {
        "type": "object",
        "properties": {
            "petId": {"type": "integer", "description": "The pet's id"},
            "verbose": {"type": "boolean"},
            "X-Trace": {"type": "string"},
        },
        "required": ["petId", "X-Trace"],
    }
    assert get.spec is not None and get.spec["method"] == "get" and get.spec["path"] == "/pets/{petId}"

    assert put.name == "updatePet" and put.keywords == ("edit",) and put.always_on
    props = put.parameters["properties"]  # type: ignore[index]
    assert set(props) == {"petId", "name", "parent", "owner"}
    assert put.parameters["required"] == ["petId", "name"]  # type: ignore[index]
    assert props["owner"] == {
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "description": "who owns it",
    }
    assert props["parent"] == {"description": "recursive reference to #/components/schemas/Pet"}
    assert "$ref" not in json.dumps(put.parameters)

    assert post.parameters["properties"]["body"]["type"] == "array"  # type: ignore[index]
    assert post.parameters["required"] == ["body"]  # type: ignore[index]
    assert post.parameters["properties"]["body"]["items"]["properties"]["name"] == {"type": "string"}  # type: ignore[index]

    assert parse_tools(PETSTORE, provider="zoo")[0].id == "zoo.get_pets_petId"


def test_openapi_errors() -> None:
    with pytest.raises(InvalidToolError, match="Swagger 2.0"):
        parse_tools({"swagger": "2.0", "paths": {}})
    broken = copy.deepcopy(PETSTORE)
    broken["paths"]["/pets"]["post"]["requestBody"] = {"$ref": "#/components/requestBodies/Nope"}
    with pytest.raises(InvalidToolError, match=r"tool \(POST /pets\) 'addPets': .*Nope.* does not resolve"):
        parse_tools(broken)
    broken["paths"]["/pets"]["post"]["requestBody"] = {"$ref": "other.yaml#/Pet"}
    with pytest.raises(InvalidToolError, match="only local"):
        parse_tools(broken)


def _openapi_body(schema: dict[str, Any], schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-operation OpenAPI document whose JSON request body is ``schema``."""
    body = {"content": {"application/json": {"schema": schema}}}
    doc: dict[str, Any] = {"openapi": "3.0.3", "info": {"title": "t"}, "paths": {"/p": {"post": {"requestBody": body}}}}
    if schemas is not None:
        doc["components"] = {"schemas": schemas}
    return doc


def _chain(n: int) -> dict[str, Any]:
    """S0 -> S1 -> ... -> Sn, each one property deeper."""
    schemas: dict[str, Any] = {
        f"S{i}": {"type": "object", "properties": {"next": {"$ref": f"#/components/schemas/S{i + 1}"}}}
        for i in range(n)
    }
    return {**schemas, f"S{n}": {"type": "string"}}


def _diamond(n: int) -> dict[str, Any]:
    """Each of S0..Sn-1 has two properties referring to the next: 2**n copies of Sn once expanded."""
    ref = "#/components/schemas/S{}"
    schemas = {
        f"S{i}": {"properties": {"a": {"$ref": ref.format(i + 1)}, "b": {"$ref": ref.format(i + 1)}}} for i in range(n)
    }
    return {**schemas, f"S{n}": {"type": "string"}}


S0 = {"$ref": "#/components/schemas/S0"}
PURE_CHAIN = {f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"} for i in range(400)}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_openapi_body({"type": "object", "properties": {"a": {}}, "required": 5}), "required must be a list"),
        (_openapi_body(S0, {"S0": "not a schema"}), "$ref '#/components/schemas/S0' must point to a schema"),
        (
            _openapi_body({"properties": {"a": S0}}, {"S0": [1]}),
            "must point to a schema (an object or a boolean), got list",
        ),
        (_openapi_body(S0, _chain(400)), "nested deeper than 64 levels once its $refs are expanded"),
        (_openapi_body(S0, {**PURE_CHAIN, "S400": {}}), "goes through more than 64 $refs"),
        (_openapi_body(S0, _diamond(15)), "expands to more than 100,000 values"),  # 196,605
    ],
)
def test_openapi_malformed_schemas_are_invalid_tool_errors(doc: dict[str, Any], message: str) -> None:
    """A malformed or runaway schema names the operation, never a TypeError, AttributeError or RecursionError."""
    with pytest.raises(InvalidToolError) as info:
        parse_tools(doc)
    assert "tool (POST /p): " in str(info.value) and message in str(info.value), str(info.value)


def _operations(n: int, schemas: dict[str, Any], ballast: int = 0) -> dict[str, Any]:
    """An OpenAPI document of ``n`` operations whose JSON request body is S0, with ``ballast`` unreferenced values."""
    body = {"content": {"application/json": {"schema": S0}}}
    paths = {f"/p{i}": {"post": {"operationId": f"op{i}", "requestBody": body}} for i in range(n)}
    components = {"schemas": schemas, "examples": {"ballast": {"value": list(range(ballast))}}}
    return {"openapi": "3.0.3", "info": {"title": "t"}, "paths": paths, "components": components}


def test_openapi_refs_repeated_across_operations_are_bounded_for_the_whole_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each schema was held to 100,000 values once expanded, but not the document: 21 operations whose body refers
    to a schema of 49,149 values (diamond(13), 2 KB of JSON) expanded to over a million, and 200 such operations, a
    file of 30 KB, to 3 GB of memory and minutes of work. Every expansion of a document counts towards one budget:
    1,000,000 values, or 10 times the document's own values when that is more."""
    from toolstore._formats import openapi

    with pytest.raises(InvalidToolError, match=r"the document's schemas expand to more than 1,000,000 values in all"):
        parse_tools(_operations(21, _diamond(13)))
    monkeypatch.setattr(openapi, "MAX_DOCUMENT_EXPANDED_VALUES", 100_000)  # the rest at a tenth of the scale
    resolver = openapi._Resolver(_operations(21, _diamond(10)))  # 6,141 values each
    with pytest.raises(ValueError, match="more than 100,000 values in all"):
        for _ in range(21):
            resolver.expand(S0)
    assert resolver.total == 100_001  # stopped at the budget, not after the schema it was in
    resolver = openapi._Resolver(_operations(21, _diamond(10), ballast=15_000))  # a document of its own size
    for _ in range(21):
        resolver.expand(S0)
    assert resolver.budget > resolver.total > 100_000


def test_openapi_refs_to_boolean_schemas_import() -> None:
    """OpenAPI 3.1 allows a boolean as a schema: a $ref to one is kept, in a property, a parameter and a body."""
    anything = {"$ref": "#/components/schemas/Anything"}
    doc = _openapi_body({"type": "object", "properties": {"name": {"type": "string"}, "extra": anything}}, {})
    doc["components"]["schemas"]["Anything"] = True
    (tool,) = parse_tools(doc)
    assert tool.parameters is not None and tool.parameters["properties"]["extra"] is True
    doc["paths"]["/p"]["post"]["requestBody"]["content"]["application/json"]["schema"] = anything
    doc["paths"]["/p"]["post"]["parameters"] = [{"name": "q", "in": "query", "schema": anything}]
    (tool,) = parse_tools(doc)  # a body of any shape names no property
    assert tool.parameters == {"type": "object", "properties": {"q": {}}}


def test_openapi_a_ref_to_a_ref_to_a_boolean_schema_imports() -> None:
    """A $ref to a schema that is itself a $ref to a boolean schema (``Any`` -> ``Anything`` -> true, in OpenAPI 3.1)
    crashed the import with TypeError ('bool' object is not a mapping); it is that boolean, as a $ref straight to it
    is, a true one with sibling keywords those keywords, a false one false."""
    doc = _openapi_body({"type": "object", "properties": {"extra": {"$ref": "#/components/schemas/Any"}}}, {})
    doc["components"]["schemas"].update({"Any": {"$ref": "#/components/schemas/Anything"}, "Anything": True})
    (tool,) = parse_tools(doc)
    assert tool.parameters is not None and tool.parameters["properties"]["extra"] is True
    extra = {"$ref": "#/components/schemas/Any", "description": "Anything."}
    doc["paths"]["/p"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["extra"] = extra
    (tool,) = parse_tools(doc)
    assert tool.parameters is not None and tool.parameters["properties"]["extra"] == {"description": "Anything."}
    doc["components"]["schemas"]["Anything"] = False
    (tool,) = parse_tools(doc)
    assert tool.parameters is not None and tool.parameters["properties"]["extra"] is False


def test_openapi_bounds_keep_deep_and_shared_schemas() -> None:
    """Within the bounds: a chain of 25 $refs, and a diamond of 10 levels (1,024 copies), expand in full."""
    (deep,) = parse_tools(_openapi_body(S0, _chain(25)))
    assert "$ref" not in json.dumps(deep.parameters) and json.dumps(deep.parameters).count('"next"') == 25
    (wide,) = parse_tools(_openapi_body(S0, _diamond(10)))
    assert json.dumps(wide.parameters).count('"type": "string"') == 2**10


# --- metadata and namespacing -------------------------------------------------------------------

META = {
    "title": "Weather",
    "keywords": ["forecast"],
    "examples": ["is it raining in Oslo?"],
    "avoid_when": "historical data",
    "categories": ["weather"],
    "tags": ["beta"],
    "always_on": True,
    "provider": "met",
    "expansion": "rain sun temperature",
}


def test_x_toolstore_metadata_in_every_format() -> None:
    shapes = [
        {"type": "function", "function": {"name": "now", "x-toolstore": META}},
        {"type": "function", "function": {"name": "now"}, "x-toolstore": META},
        {"type": "function", "name": "now", "x-toolstore": META},
        {"name": "now", "input_schema": {"type": "object"}, "x-toolstore": META},
        {"name": "now", "inputSchema": {"type": "object"}, "x-toolstore": META},
        {"name": "now", "x-toolstore": META},
    ]
    expected = Tool(
        id="met.now",
        name="now",
        title="Weather",
        provider="met",
        categories=("weather",),
        tags=("beta",),
        keywords=("forecast",),
        examples=("is it raining in Oslo?",),
        expansion="rain sun temperature",
        avoid_when="historical data",
        always_on=True,
    )
    for data in shapes:
        assert without_spec(one(data, provider="ignored")) == expected
    assert one({"name": "now", "x-toolstore": {"id": "custom"}}, provider="p").id == "custom"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"exmaples": []}, "unknown key.*'exmaples'"),
        ({"keywords": "rain"}, "keywords must be a list of strings, got string"),
        ({"always_on": "yes"}, "always_on must be true or false"),
        ({"id": ""}, "id must not be empty"),
        ("meta", "x-toolstore must be a JSON object"),
        (
            {"custom": True},
            r"x-toolstore.custom must be a JSON object \(\{\"format\": \{...\}\} or \{\}\), got boolean",
        ),
        ({"custom": {"format": "lark"}}, "x-toolstore.custom.format must be a JSON object, got string"),
        ({"custom": {"grammar": {}}}, r"x-toolstore.custom: unknown key\(s\) 'grammar' \(known: format\)"),
    ],
)
def test_bad_metadata(meta: object, message: str) -> None:
    with pytest.raises(InvalidToolError, match=rf"tool 'now': .*{message}"):
        parse_tools({"name": "now", "x-toolstore": meta})


def test_metadata_given_twice_is_an_error() -> None:
    data = {"type": "function", "function": {"name": "a", "x-toolstore": {}}, "x-toolstore": {}}
    with pytest.raises(InvalidToolError, match="given both"):
        parse_tools(data)


def test_same_name_from_two_providers() -> None:
    tool = {"name": "search", "inputSchema": {"type": "object"}}
    tools = parse_tools({"tools": [tool]}, provider="github") + parse_tools({"tools": [tool]}, provider="jira")
    assert [t.id for t in tools] == ["github.search", "jira.search"]
    both = [{**tool, "x-toolstore": {"provider": "github"}}, {**tool, "x-toolstore": {"provider": "jira"}}]
    assert [t.id for t in parse_tools(both)] == ["github.search", "jira.search"]
    with pytest.raises(
        InvalidToolError, match=r"duplicate tool id 'search': tool \[0\] 'search' and tool \[1\] 'search'"
    ):
        parse_tools([tool, tool])


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "send_email", "parameters": []}, "tool 'send_email': parameters must be a JSON object, got list"),
        (
            {"name": "send_email", "input_schema": {"type": "string"}},
            "tool 'send_email': input_schema must be a JSON schema with \"type\": \"object\", got 'string'",
        ),
        ({"name": "x", "inputSchema": {"type": "object", "properties": [1]}}, "inputSchema.properties must be"),
        ({"description": "no name", "parameters": None, "id": "x"}, "tool: name is missing"),
        ({"name": "", "inputSchema": {"type": "object"}}, "name must not be empty"),
        ({"name": 5, "inputSchema": {"type": "object"}}, "name must be a string, got number"),
        ({"name": "n" * 129}, "name is 129 characters long, the limit is 128"),
        ({"name": "x", "description": ["a"]}, "tool 'x': description must be a string, got list"),
        ({"name": "x", "description": "bad\x00byte"}, "tool 'x': NUL byte in description"),
        ({"name": "x\x00y"}, "tool: NUL byte in name"),
        (
            {"name": "x", "parameters": {"type": "object", "properties": {"a": {"description": "\x00"}}}},
            "NUL byte in parameters.properties.a.description",
        ),
        ({"name": "x", "input_schema": None, "cache_control": {"x": "\x00"}}, "NUL byte in spec.cache_control.x"),
        (
            {"openapi": "3.0.3", "info": {"title": "a"}, "paths": {"/a": {"get": {"summary": "b\x00"}}}},
            "tool (GET /a) 'get_a': NUL byte in description",
        ),
        ({"server": "x", "version": 2}, "unrecognised tool shape (keys seen: 'server', 'version')"),
        ({"type": "web_search_20250305", "name": "web_search"}, "unsupported tool type 'web_search_20250305'"),
        ([{"name": "ok"}, "oops"], "tool [1]: expected a JSON object, got string"),
        # A file's text passed undecoded was 'tool: expected a JSON object, got string', as a tool's problem.
        (
            '[{"name": "a"}]',
            "parse_tools takes a decoded JSON value (json.loads of the text), got str; load_tools_file",
        ),
        (b'{"name": "a"}', "parse_tools takes a decoded JSON value (json.loads of the text), got bytes;"),
        ({"tools": {"name": "a"}}, "tools: must be a list of tools, got object"),
    ],
)
def test_invalid_tools(data: object, message: str) -> None:
    with pytest.raises(InvalidToolError) as info:
        parse_tools(data)
    assert message in str(info.value), str(info.value)


def test_index_and_name_in_lists() -> None:
    with pytest.raises(InvalidToolError, match=r"^tool tools\[2\] 'c': parameters must be a JSON object"):
        parse_tools({"tools": [{"name": "a"}, {"name": "b"}, {"name": "c", "parameters": "x"}]})


def test_provider_argument() -> None:
    with pytest.raises(InvalidInputError):
        parse_tools({"name": "a"}, provider="")
    with pytest.raises(InvalidToolError, match="tool 'a': NUL byte in provider"):
        parse_tools({"name": "a"}, provider="p\x00")


# --- files --------------------------------------------------------------------------------------


def write_lines(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_error_names_line_and_tool(tmp_path: Path) -> None:
    rows: list[object] = [{"name": f"t{i}"} for i in range(16)] + [{"name": "send_email", "parameters": []}]
    path = write_lines(tmp_path / "tools.jsonl", rows)
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value) == f"{path} line 17: tool 'send_email': parameters must be a JSON object, got list"


def test_jsonl_malformed_line_returns_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tools.jsonl"
    path.write_text('{"name": "a"}\n\n{"name": "b"\n{"name": "c"}\n', encoding="utf-8")
    with pytest.raises(InvalidToolError, match=r"tools.jsonl line 3, column 13: invalid JSON"):
        load_tools_file(path)
    path.write_text('{"name": "a"}\n\n{"name": "c"}\n', encoding="utf-8")
    assert [t.name for t in load_tools_file(path)] == ["a", "c"]


def test_jsonl_any_format_per_line_and_provider(tmp_path: Path) -> None:
    rows: list[object] = [
        {"type": "function", "function": {"name": "a"}},
        {"tools": [{"name": "b", "inputSchema": {"type": "object"}}, {"name": "c", "input_schema": {}}]},
        PETSTORE,
    ]
    tools = load_tools_file(write_lines(tmp_path / "mixed.jsonl", rows), provider="srv")
    assert [t.id for t in tools] == ["srv.a", "srv.b", "srv.c", "srv.get_pets_petId", "srv.updatePet", "srv.addPets"]


def test_jsonl_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", [{"name": "a"}, {"name": "b"}, {"tools": [{"name": "z"}, {"name": "a"}]}])
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value) == f"{path}: duplicate tool id 'a': line 1 (tool 'a') and line 3 (tool tools[1] 'a')"


def test_json_file(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"tools": [{"name": "a"}, {"name": "b"}]}, indent=2), encoding="utf-8")
    assert [t.id for t in load_tools_file(path, provider="p")] == ["p.a", "p.b"]
    path.write_text('{\n  "tools": [\n    {"name": "a"},\n  ]\n}', encoding="utf-8")
    said = r"catalog.json line 3, column 18: invalid JSON: Illegal trailing comma before end of array$"  # every Python
    with pytest.raises(InvalidToolError, match=said):
        load_tools_file(path)
    path.write_text(json.dumps([{"name": "a", "parameters": 3}]), encoding="utf-8")
    with pytest.raises(InvalidToolError, match=r"catalog.json: tool \[0\] 'a': parameters must be a JSON object"):
        load_tools_file(path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "", "file is empty"),
        ("blank.jsonl", "\n  \n", "file is empty"),
        ("empty.json", "", "file is empty"),
        ("nothing.json", "[]", "no tools found"),
        ("tools.toml", "name = 'a'", "unsupported file type '.toml'"),
        ("tools.yaml", "name: a", "not an OpenAPI document"),
        ("tools.yml", "- name: a", "not an OpenAPI document"),
        ("bad.yaml", "openapi: [3.0", "line 1, column 14: invalid YAML"),
    ],
)
def test_empty_and_unsupported_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidToolError, match=message):
        load_tools_file(path)


def test_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"name": "a"}\n{"name": "\xff"}\n')
    with pytest.raises(InvalidToolError, match="line 2, column 11: not valid UTF-8"):
        load_tools_file(path)


@pytest.mark.skipif(not BENCH.exists(), reason="shared benchmarks not present")
@pytest.mark.parametrize(("name", "count"), [("metatool", 199), ("seal_tools", 4076), ("gorilla_torch", 94)])
def test_real_benchmark_files(name: str, count: int) -> None:
    path = BENCH / name / "tools.jsonl"
    tools = load_tools_file(path)
    assert len(tools) == count
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [t.id for t in tools] == [r["id"] for r in rows]
    assert [t.spec for t in tools] == rows
    for fmt in FORMATS:
        assert same_tools(parse_tools(export_catalog(tools, fmt, with_metadata=True)), tools), fmt


# --- rendering ----------------------------------------------------------------------------------

RICH = Tool(
    id="met.now",
    name="now",
    description="Weather now.",
    title="Weather",
    provider="met",
    parameters=WEATHER_SCHEMA,
    categories=("weather",),
    tags=("beta",),
    keywords=("forecast", "rain"),
    examples=("is it raining in Oslo?",),
    expansion="rain sun",
    avoid_when="history",
    always_on=True,
)
CATALOG = [
    RICH,
    Tool(id="plain", name="plain"),
    Tool(id="th0001", name="YOLOP", description="Detect.", provider="PyTorch", categories=("Detection",)),
    Tool(id="gh.search", name="search", description="Search code.", provider="gh", title=""),
    Tool(
        id="jira.search",
        name="search",
        description="Search issues.",
        provider="jira",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    ),
]


def test_render_shapes() -> None:
    assert to_openai(RICH) == {
        "type": "function",
        "function": {"name": "now", "description": "Weather now.", "parameters": WEATHER_SCHEMA},
    }
    assert to_openai(RICH, shape="responses") == {
        "type": "function",
        "name": "now",
        "description": "Weather now.",
        "parameters": WEATHER_SCHEMA,
        "strict": False,
    }
    assert to_anthropic(RICH) == {"name": "now", "description": "Weather now.", "input_schema": WEATHER_SCHEMA}
    assert to_mcp(RICH) == {
        "name": "now",
        "title": "Weather",
        "description": "Weather now.",
        "inputSchema": WEATHER_SCHEMA,
    }
    empty = {"type": "object", "properties": {}}
    plain = CATALOG[1]
    assert to_openai(plain) == {"type": "function", "function": {"name": "plain", "parameters": empty}}
    assert to_anthropic(plain)["input_schema"] == empty
    assert to_mcp(plain) == {"name": "plain", "inputSchema": empty}
    offered = ["now", "plain", "YOLOP", "gh__search", "jira__search"]  # two tools share "search"
    assert export_catalog(CATALOG, "mcp") == {"tools": [to_mcp(t, name=n) for t, n in zip(CATALOG, offered)]}
    assert render(CATALOG, "openai-responses") == [to_openai(t, shape="responses") for t in CATALOG]


def test_metadata_only_when_asked() -> None:
    for fmt in FORMATS:
        assert "x-toolstore" not in json.dumps(render(CATALOG, fmt)), fmt
        assert "x-toolstore" in json.dumps(render(CATALOG, fmt, with_metadata=True)), fmt
    assert to_openai(RICH, with_metadata=True)["function"]["x-toolstore"] == {
        "provider": "met",
        "title": "Weather",
        "categories": ["weather"],
        "tags": ["beta"],
        "keywords": ["forecast", "rain"],
        "examples": ["is it raining in Oslo?"],
        "expansion": "rain sun",
        "avoid_when": "history",
        "always_on": True,
    }
    assert "title" not in to_mcp(RICH, with_metadata=True)["x-toolstore"]  # MCP carries title natively
    assert "x-toolstore" not in to_mcp(CATALOG[1], with_metadata=True)  # nothing to add
    assert to_anthropic(CATALOG[2], with_metadata=True)["x-toolstore"]["id"] == "th0001"


def test_render_errors() -> None:
    with pytest.raises(InvalidInputError, match="unknown format 'gemini'"):
        render(CATALOG, "gemini")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        to_openai(RICH, shape="legacy")  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_every_format(fmt: str) -> None:
    exported = export_catalog(CATALOG, fmt, with_metadata=True)  # type: ignore[arg-type]
    parsed = parse_tools(json.loads(json.dumps(exported)))
    assert same_tools(parsed, CATALOG)
    again = export_catalog(parsed, fmt, with_metadata=True)  # type: ignore[arg-type]
    assert again == exported
    # a default provider does not override the one carried in the metadata; it only fills gaps
    expected = [t.id if t.provider else f"other.{t.name}" for t in CATALOG]
    assert [t.id for t in parse_tools(exported, provider="other")] == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_from_every_input_format(fmt: str) -> None:
    inputs: list[object] = [
        {"type": "function", "function": {"name": "a", "description": "A.", "parameters": WEATHER_SCHEMA}},
        {"type": "function", "name": "b", "parameters": None, "strict": None},
        {"name": "c", "description": "C.", "input_schema": WEATHER_SCHEMA},
        {"name": "d", "title": "D", "inputSchema": {"type": "object"}, "x-toolstore": {"examples": ["do d"]}},
        {"id": "e1", "name": "e", "description": "", "provider": "bench", "parameters": None, "category": "x"},
        PETSTORE,
    ]
    for provider in (None, "srv"):
        original = parse_tools(inputs, provider=provider)
        exported = export_catalog(original, fmt, with_metadata=True)  # type: ignore[arg-type]
        assert same_tools(parse_tools(exported), original)


def test_responses_tool_round_trips_with_its_own_keys() -> None:
    """A Responses-shape tool comes back as it was: no ``strict`` added when it had none, its own kept; a tool from
    another format gets ``"strict": false``."""
    source = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    assert render(parse_tools([source]), "openai-responses") == [source]
    strict = {**source, "strict": True}
    assert render(parse_tools([strict]), "openai-responses") == [strict]
    chat = {"type": "function", "function": {k: v for k, v in source.items() if k != "type"}}
    assert render(parse_tools([chat]), "openai-responses") == [{**source, "strict": False}]


# An OpenAI custom tool's grammar (free-form text input held to it), as OpenAI's function calling guide writes one.
MATH_GRAMMAR = 'start: expr\nexpr: term (SP ADD SP term)*\nterm: INT\nSP: " "\nADD: "+"\n%import common.INT'


def test_openai_custom_tools_in_both_shapes_round_trip() -> None:
    """OpenAI custom tools take free-form text, optionally held to a grammar (Lark or a regex): Chat Completions nests
    the tool under "custom" and the grammar under "grammar", the Responses API writes both flat. Each imports (no
    parameters schema) and renders back as it was in its own shape, and as a custom tool of the other shape in the
    other (the grammar moved where that shape keeps it)."""
    chat = {
        "type": "custom",
        "custom": {
            "name": "do_math",
            "description": "Do arithmetic.",
            "format": {"type": "grammar", "grammar": {"definition": MATH_GRAMMAR, "syntax": "lark"}},
        },
    }
    responses = {
        "type": "custom",
        "name": "do_math",
        "description": "Do arithmetic.",
        "format": {"type": "grammar", "definition": MATH_GRAMMAR, "syntax": "lark"},
    }
    expected = Tool(id="calc.do_math", name="do_math", description="Do arithmetic.", provider="calc")
    for data in (chat, responses):
        tool = one(data, provider="calc")
        assert without_spec(tool) == expected and tool.spec == data
        assert to_openai(tool) == chat
        assert to_openai(tool, shape="responses") == responses
        assert to_openai(tool, name="calc_do_math")["custom"]["name"] == "calc_do_math"
        for fmt in ("openai", "openai-responses"):
            exported = export_catalog([tool], fmt, with_metadata=True)  # type: ignore[arg-type]
            back = parse_tools(json.loads(json.dumps(exported)))
            assert same_tools(back, [tool])
            assert export_catalog(back, fmt, with_metadata=True) == exported  # type: ignore[arg-type]
    # a source's other keys and their order are kept in its own shape
    text = {
        "type": "custom",
        "name": "run_sql",
        "defer_loading": True,
        "format": {"type": "text"},
        "description": "SQL",
    }
    assert render(parse_tools([text]), "openai-responses") == [text]
    assert render(parse_tools([text]), "openai") == [
        {"type": "custom", "custom": {"name": "run_sql", "description": "SQL", "format": {"type": "text"}}}
    ]
    bare = {"type": "custom", "custom": {"name": "shell"}}
    assert render(parse_tools([bare]), "openai") == [bare]
    assert render(parse_tools([bare]), "openai-responses") == [{"type": "custom", "name": "shell"}]
    # Anthropic's client tools may say "type": "custom" too: they have an input_schema
    anthropic = {"type": "custom", "name": "get_weather", "input_schema": WEATHER_SCHEMA}
    assert one(anthropic).parameters == WEATHER_SCHEMA
    assert to_openai(one(anthropic))["type"] == "function"


INPUT_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}}


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (
            {"type": "custom", "name": "x", "format": {"type": "grammar", "syntax": "regex", "definition": "(a"}},
            "tool [1] 'x': format.definition is a regex that does not compile: missing ) at position 2 (checked with "
            "Python's regex package",
        ),
        (
            {"type": "custom", "custom": {"name": "x", "format": {"type": "grammar", "grammar": {"syntax": "regex"}}}},
            "tool [1] 'x': format.grammar.definition must be a non-empty string, got None",
        ),
        (
            {"type": "custom", "name": "x", "format": {"type": "grammar", "syntax": "peg", "definition": "a"}},
            "tool [1] 'x': format.syntax must be 'lark' or 'regex', got 'peg'",
        ),
        (
            {"type": "custom", "name": "x", "format": {"type": "grammar", "syntax": "lark", "definition": " "}},
            "tool [1] 'x': format.definition must be a non-empty string, got ' '",
        ),
        (
            {
                "name": "x",
                "input_schema": INPUT_SCHEMA,
                "x-toolstore": {"custom": {"format": {"type": "grammar", "syntax": "regex", "definition": "[a-"}}},
            },
            "tool [1] 'x': x-toolstore.custom.format.definition is a regex that does not compile: unterminated",
        ),
    ],
)
def test_a_custom_tools_grammar_is_checked(tool: dict[str, Any], message: str) -> None:
    """A custom tool's grammar was stored as given, so a regex that does not compile, a syntax the APIs do not take or
    an empty definition reached the API (which refuses the request) at every route that offered it. A regex grammar
    must compile (with Python's regex package, which also takes the Rust syntax OpenAI reads it with: Unicode and
    POSIX classes), a Lark one be a non-empty string (no Lark parser at hand), in either OpenAI shape and in the
    x-toolstore.custom marker; nothing is imported otherwise."""
    with pytest.raises(InvalidToolError) as info:
        parse_tools([{"name": "ok"}, tool])
    assert str(info.value).startswith(message), str(info.value)
    for definition in (r"\p{L}+ [[:alpha:]]+", "^SELECT .+$"):
        regex = {"type": "grammar", "syntax": "regex", "definition": definition}
        assert one({"type": "custom", "name": "x", "format": regex}).spec["format"] == regex


def test_a_custom_tool_exported_to_anthropic_or_mcp_with_metadata_imports_back_as_one() -> None:
    """Anthropic and MCP have no custom tools: a custom tool takes its text there as one property, ``input``. Exported
    with metadata, its definition is marked (``x-toolstore.custom``, holding its format), so it imports back as the
    custom tool, grammar and all, not as a tool of an ``input`` parameter; without metadata it is what it says. A
    marker on any other definition is an error naming it."""
    grammar = {"type": "grammar", "definition": MATH_GRAMMAR, "syntax": "lark"}
    math = {
        "type": "custom",
        "name": "do_math",
        "description": "Math.",
        "format": grammar,
        "x-toolstore": {"tags": ["m"]},
    }
    tools = parse_tools([math, {"type": "custom", "custom": {"name": "shell"}}], provider="calc")
    for fmt in ("anthropic", "mcp"):
        exported = export_catalog(tools, fmt, with_metadata=True)  # type: ignore[arg-type]
        marks = [d["x-toolstore"]["custom"] for d in exported["tools"]]
        assert marks == [{"format": grammar}, {}], fmt
        back = parse_tools(json.loads(json.dumps(exported)))
        assert same_tools(back, tools) and [t.parameters for t in back] == [None, None], fmt
        assert export_catalog(back, fmt, with_metadata=True) == exported  # type: ignore[arg-type]
        for shape in ("openai", "openai-responses"):  # a custom tool again, its grammar where each shape keeps it
            assert render(back, shape) == render(tools, shape), (fmt, shape)  # type: ignore[arg-type]
        assert custom_input(back[0], {"input": "1 + 2"}) == "1 + 2"
        plain = parse_tools(export_catalog(tools, fmt)["tools"])  # type: ignore[arg-type]
        assert list(plain[0].parameters["properties"]) == ["input"] and render(plain, "openai")[0]["type"] == "function"
    [anthropic, _] = export_catalog(tools, "anthropic", with_metadata=True)["tools"]
    [inside] = parse_tools({"type": "namespace", "name": "crm", "description": "CRM.", "tools": [anthropic]})
    assert inside.spec["x-toolstore-namespace"]["name"] == "crm"  # kept in the namespace it was found in
    assert render([inside], "openai") == render(tools[:1], "openai")
    marked = {"x-toolstore": {"custom": {}}}
    with pytest.raises(
        InvalidToolError,
        match=r"^tool 'now': x-toolstore.custom marks a custom tool, whose input_schema "
        r"has one property, 'input'; got 'city'$",
    ):
        parse_tools({"name": "now", "input_schema": WEATHER_SCHEMA, **marked})
    with pytest.raises(InvalidToolError, match=r"^tool 'now': x-toolstore.custom marks an OpenAI custom tool's "):
        parse_tools({"type": "function", "name": "now", **marked})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "custom", "custom": "do_math"}, "tool: custom must be a JSON object, got string"),
        ({"type": "custom", "custom": {"description": "Do arithmetic."}}, "tool: name is missing"),
        ({"type": "custom", "name": "do_math", "format": "lark"}, "tool 'do_math': format must be a JSON object"),
        (
            {"type": "custom", "custom": {"name": "do_math", "format": ["lark"]}},
            "tool 'do_math': format must be a JSON object, got list",
        ),
        (
            {"type": "custom", "custom": {"name": "m", "x-toolstore": {}}, "x-toolstore": {}},
            "tool 'm': x-toolstore given both outside and in custom",
        ),
    ],
)
def test_invalid_openai_custom_tools(data: object, message: str) -> None:
    with pytest.raises(InvalidToolError) as info:
        parse_tools(data)
    assert message in str(info.value), str(info.value)


def test_spec_is_not_compared_but_kept() -> None:
    data = {"type": "function", "function": {"name": "a", "strict": True}}
    tool = one(data)
    assert tool.spec == data and tool.spec is not data
    back = one(to_openai(tool, with_metadata=True))
    assert back != tool and without_spec(back) == without_spec(tool)


def test_parsed_tool_does_not_share_input_dicts() -> None:
    data = {"name": "a", "parameters": copy.deepcopy(WEATHER_SCHEMA)}
    tool = one(data)
    data["parameters"]["properties"]["city"]["type"] = "integer"
    assert tool.parameters == WEATHER_SCHEMA


# --- rendered definitions validate against the SDKs' own types ----------------------------------


def test_openai_sdk_types() -> None:
    pydantic = pytest.importorskip("pydantic")
    chat_types = pytest.importorskip("openai.types.chat")
    responses_types = pytest.importorskip("openai.types.responses")
    chat = pydantic.TypeAdapter(chat_types.ChatCompletionToolParam)
    responses = pydantic.TypeAdapter(responses_types.FunctionToolParam)
    for with_metadata in (False, True):
        for tool in CATALOG:
            chat.validate_python(to_openai(tool, with_metadata=with_metadata))
            responses.validate_python(to_openai(tool, shape="responses", with_metadata=with_metadata))
    # custom tools, as either shape renders them
    custom_chat = pydantic.TypeAdapter(chat_types.ChatCompletionCustomToolParam)
    custom_responses = pydantic.TypeAdapter(responses_types.CustomToolParam)
    grammar = {"type": "grammar", "definition": "start: /[0-9]+/", "syntax": "lark"}
    for source in (
        {"type": "custom", "name": "n", "description": "N.", "format": grammar},
        {"type": "custom", "name": "t"},
    ):
        for with_metadata in (False, True):
            tool = one(source)
            custom_chat.validate_python(to_openai(tool, with_metadata=with_metadata))
            custom_responses.validate_python(to_openai(tool, shape="responses", with_metadata=with_metadata))
    # the validators are strict enough to catch a wrong shape
    with pytest.raises(pydantic.ValidationError):
        custom_chat.validate_python(to_openai(one({"type": "custom", "name": "t"}), shape="responses"))
    with pytest.raises(pydantic.ValidationError):
        chat.validate_python(to_openai(RICH, shape="responses"))
    with pytest.raises(pydantic.ValidationError):
        responses.validate_python(to_openai(RICH))


def test_anthropic_sdk_types() -> None:
    pydantic = pytest.importorskip("pydantic")
    anthropic_types = pytest.importorskip("anthropic.types")
    adapter = pydantic.TypeAdapter(anthropic_types.ToolParam)
    for with_metadata in (False, True):
        for tool in CATALOG:
            definition = to_anthropic(tool, with_metadata=with_metadata)
            adapter.validate_python(definition)
            assert definition["input_schema"]["type"] == "object"
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python(to_mcp(RICH))


def test_mcp_sdk_types() -> None:
    pydantic = pytest.importorskip("pydantic")
    mcp_types = pytest.importorskip("mcp.types")
    for with_metadata in (False, True):
        for tool in CATALOG:
            definition = to_mcp(tool, with_metadata=with_metadata)
            model = mcp_types.Tool.model_validate(definition)
            assert model.name == tool.name and model.input_schema["type"] == "object"
            assert model.title == tool.title
        listing = mcp_types.ListToolsResult.model_validate(export_catalog(CATALOG, "mcp", with_metadata=with_metadata))
        offered = ["now", "plain", "YOLOP", "gh__search", "jira__search"]  # two tools share "search"
        assert [t.name for t in listing.tools] == offered
        # and what the SDK serialises parses back (its model keeps no x-toolstore)
        dumped = listing.model_dump(by_alias=True, exclude_none=True)
        assert [one(t).name for t in dumped["tools"]] == offered
    with pytest.raises(pydantic.ValidationError):
        mcp_types.Tool.model_validate({"name": "now", "inputSchema": "not a schema"})
    with pytest.raises(pydantic.ValidationError):
        mcp_types.ListToolsResult.model_validate({"tools": [{"name": "now", "description": "no schema"}]})


def test_a_python_object_nested_past_the_recursion_limit_is_refused() -> None:
    deep: Any = "leaf"
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(InvalidToolError, match="tool definitions nested deeper than 100 levels"):
        parse_tools({"name": "t", "description": "d", "parameters": {"type": "object", "default": deep}})


@pytest.mark.parametrize("fmt", ["anthropic", "mcp"])
def test_strict_survives_an_export_in_a_format_without_it(fmt: str) -> None:
    """Anthropic and MCP definitions have no ``strict``: exported with metadata, an OpenAI tool's own ``strict``
    (either shape, true or false) rides in ``x-toolstore.strict``, so both OpenAI shapes give it back after a re-import;
    a tool whose source set none carries none, and an OpenAI definition without its own takes the block's. An
    ``x-toolstore.strict`` that is no boolean, or that contradicts the OpenAI definition's own, is an error naming the
    tool."""
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    strict = {"type": "function", "name": "find", "parameters": schema, "strict": True}
    chat = {"type": "function", "function": {"name": "lax", "parameters": schema, "strict": False}}
    unset = {"type": "function", "function": {"name": "plain", "parameters": schema}}
    tools = parse_tools({"tools": [strict, chat, unset]})
    exported = json.loads(json.dumps(export_catalog(tools, fmt, with_metadata=True)))
    assert [d.get("x-toolstore", {}).get("strict") for d in exported["tools"]] == [True, False, None]
    back = parse_tools(exported)
    assert [to_openai(t, shape="responses")["strict"] for t in back] == [True, False, False]
    assert [to_openai(t)["function"].get("strict") for t in back] == [True, False, None]
    assert export_catalog(back, fmt, with_metadata=True) == exported
    assert "strict" not in json.dumps(export_catalog(tools, fmt))  # only with metadata, as every other field
    unmarked = {k: v for k, v in strict.items() if k != "strict"}
    inside = {**unset, "function": {**unset["function"], "x-toolstore": {"strict": True}}}
    marked = parse_tools({"tools": [{**unmarked, "x-toolstore": {"strict": True}}, inside]})
    assert [to_openai(t, shape="responses")["strict"] for t in marked] == [True, True]  # an OpenAI one without its own
    assert [to_openai(t)["function"]["strict"] for t in marked] == [True, True]
    with pytest.raises(InvalidToolError, match=r"find.*x-toolstore\.strict must be true or false"):
        parse_tools({"tools": [{**exported["tools"][0], "x-toolstore": {"strict": "yes"}}]})
    with pytest.raises(InvalidToolError, match=r"find.*x-toolstore\.strict is False, but the definition's own"):
        parse_tools({"tools": [{**strict, "x-toolstore": {"strict": False}}]})


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_a_responses_tool_that_left_strict_to_the_api_round_trips_without_it(fmt: str) -> None:
    """A Responses tool without ``strict`` (the API applies its default) exported with metadata in a format without
    Responses' default (Chat Completions, Anthropic, MCP) carries ``"x-toolstore": {"strict": null}``, so after a
    re-import the Responses export leaves ``strict`` out again, and so does every export after it; a tool from another
    format still gets ``"strict": false``. A null that contradicts the definition's own ``strict`` is an error naming
    the tool."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    source = {"type": "function", "name": "find", "description": "Find.", "parameters": schema}
    other = {"name": "plain", "description": "Plain.", "input_schema": schema}
    tools = parse_tools([source, other])
    exported = json.loads(json.dumps(export_catalog(tools, fmt, with_metadata=True)))  # type: ignore[arg-type]
    back = parse_tools(exported)
    lax = {"type": "function", "name": "plain", "description": "Plain.", "parameters": schema, "strict": False}
    assert render(back, "openai-responses") == [source, lax]
    again = parse_tools(json.loads(json.dumps(export_catalog(back, "mcp", with_metadata=True))))
    assert render(again, "openai-responses")[0] == source
    assert render(tools, fmt) == render(back, fmt)  # type: ignore[arg-type]  # without metadata: as before
    assert "strict" not in json.dumps(export_catalog(tools, fmt))  # type: ignore[arg-type]
    with pytest.raises(InvalidToolError, match=r"'find'.*x-toolstore\.strict is null .* own strict is True"):
        parse_tools({**source, "strict": True, "x-toolstore": {"strict": None}})
    with pytest.raises(InvalidToolError, match=r"'find'.*x-toolstore\.strict must be true or false, or null"):
        parse_tools({**source, "x-toolstore": {"strict": "default"}})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"name": "x", "parameters": {"type": "object", "properties": {"n": {"maximum": 1e400}}}}',
            "tool 'x': parameters.properties.n.maximum is Infinity, which is not JSON (a number such as 1e400 is)",
        ),
        ('{"name": "x", "description": "caf\\udce9"}', "tool 'x': description is not valid Unicode (a lone surrogate"),
        (
            '{"name": "x", "input_schema": null, "cache_control": {"\\ud800": 1}}',
            "tool 'x': spec.cache_control has a key that is not valid Unicode (a lone surrogate, e.g. from undecodable "
            "bytes): '\\ud800'",
        ),
        ('{"name": "x", "inputSchema": {"type": "object"}, "_meta": {"n": 1' + "0" * 400 + "}}", "spec._meta.n is an"),
    ],
)
def test_a_definition_json_cannot_hold_is_an_error_naming_the_tool_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    """A file's number past a double's range (read as Infinity), an escaped lone surrogate or an integer past the
    catalog's limit parsed into a tool whose export was no JSON (``Infinity``) or whose names crashed
    (UnicodeEncodeError); each is an InvalidToolError naming the file, the tool and the field, as a NUL byte is. So are
    Python values JSON has not (NaN, a set, a non-string key)."""
    path = tmp_path / "tools.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value).startswith(f"{path}: tool 'x': "), str(info.value)
    assert message in str(info.value), str(info.value)
    schema = {"type": "object", "properties": {"a": {"default": math.nan}, "b": {"enum": {1}}}}
    with pytest.raises(InvalidToolError, match=r"^tool 'x': parameters\.properties\.a\.default is NaN, which is not"):
        parse_tools({"name": "x", "parameters": schema})
    with pytest.raises(InvalidToolError, match=r"^tool 'x': parameters\.properties\.b\.enum is a set, which is not"):
        parse_tools({"name": "x", "parameters": {**schema, "properties": {"b": schema["properties"]["b"]}}})
    with pytest.raises(InvalidToolError, match=r"^tool 'x': input_schema has a key that is not a string: 1"):
        parse_tools({"name": "x", "input_schema": {"type": "object", 1: "a"}})


HUGE = "n" * 1_000_000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": HUGE}, f"tool {HUGE[:128]!r}...: name is 1000000 characters long, the limit is 128"),
        ({"type": HUGE, "name": "x"}, "tool 'x': unsupported tool type 'nnn"),
        ({"name": "x", "inputSchema": {}, "type": HUGE}, "tool 'x': unsupported tool type 'nnn"),
        ({"name": "x", "parameters": {"type": HUGE}}, "tool 'x': parameters must be a JSON schema"),
        ({"name": "x", "x-toolstore": {HUGE: 1}}, "tool 'x': x-toolstore: unknown key(s) 'nnn"),
        ({"openapi": HUGE}, "unsupported OpenAPI version 'nnn"),
        ({HUGE: 1, **{str(i): i for i in range(100_000)}}, "unrecognised tool shape (keys seen: 'nnn"),
        ({"openapi": "3.0.0", "paths": {HUGE: 1}}, "OpenAPI path 'nnn"),
        ({"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"$ref": "#/" + HUGE}]}}}}, "$ref '#/nnn"),
        ({"openapi": "3.0.0", "paths": {"/" + HUGE: {"get": {"x-toolstore": 1}}}}, "tool (GET /nnn"),
    ],
)
def test_an_error_about_a_huge_value_quotes_only_its_head(data: object, message: str) -> None:
    """An error about a megabyte value (a name past the limit, a tool type, a schema's type, an unknown x-toolstore
    key, the keys of an unrecognised object, an OpenAPI version, path or $ref) quoted all of it, a message of a
    megabyte for a terminal or a log; it quotes its head, still naming the tool."""
    with pytest.raises(InvalidToolError) as info:
        parse_tools(data)
    assert message in str(info.value) and len(str(info.value)) < 700, str(info.value)[:300]


HUGE_INT = 10**5000  # past what Python prints (4,300 digits)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": HUGE_INT, "name": "x"}, "tool 'x': type must be a string, got an integer over 1000 bits"),
        ({"name": "x", "inputSchema": {}, "type": HUGE_INT}, "tool 'x': type must be a string, got an integer over"),
        ([{"type": "namespace", "name": "a", "tools": [{"type": HUGE_INT}]}], "tool [0].tools[0]: type must be a"),
        ({"type": "namespace", "name": HUGE_INT, "tools": []}, "name must be a non-empty string, got an integer over"),
        ({"jsonrpc": "2.0", "error": {"code": HUGE_INT}}, "error response: an object holding an integer over 1000"),
        ({"openapi": HUGE_INT}, "unsupported OpenAPI version an integer over 1000 bits"),
        (
            {"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"in": "query", "name": HUGE_INT}]}}}},
            "tool (GET /a): OpenAPI parameter must be an object with a name, got an object holding an integer over",
        ),
        ({HUGE_INT: 1}, "unrecognised tool shape (keys seen: an integer over 1000 bits)"),
    ],
)
def test_a_huge_integer_given_from_python_is_an_error_naming_the_field(data: object, message: str) -> None:
    """Tool definitions given from Python (parse_tools, and so upsert and route of what it parses) may hold an integer
    that JSON text never brings (parse_json refuses one): a tool's type, a namespace's name, an OpenAPI version of
    thousands of digits was Python's ValueError from printing it in the error; it is an InvalidToolError naming the
    field and saying what the value is."""
    with pytest.raises(InvalidToolError) as info:
        parse_tools(data)
    assert message in str(info.value), str(info.value)[:300]


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_names_tools_that_share_a_name_as_definitions_do(fmt: str) -> None:
    """export_catalog gave two tools of one name (two providers' "search", two "find" in one namespace) under that
    name, which the APIs refuse and a re-import took for one id, where RouteResult.definitions renames them. Both name
    a request's tools by one rule (offered_names, in tool_list): each name is unique (in its namespace, in the Responses
    format), the export imports back without metadata, and with metadata as the same tools under their own names."""
    crm = {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [fn("find"), fn("find")]}
    crm["tools"][1]["x-toolstore"] = {"id": "crm.find_all"}
    tools = parse_tools([{"name": "search", "x-toolstore": {"provider": p}} for p in ("gh", "jira")] + [crm])
    exported = json.loads(json.dumps(export_catalog(tools, fmt)))  # type: ignore[arg-type]
    names = [d.get("function", d.get("custom", d))["name"] for d in _flat(exported["tools"])]
    assert names == offered_names(tools, fmt) and len(set(names)) == len(names), names
    assert len(parse_tools(exported)) == len(tools)
    with_metadata = json.loads(json.dumps(export_catalog(tools, fmt, with_metadata=True)))  # type: ignore[arg-type]
    back = parse_tools(with_metadata)
    assert same_tools(back, tools) and export_catalog(back, fmt, with_metadata=True) == with_metadata  # type: ignore[arg-type]


def _flat(definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's tool definitions with a Responses namespace's in its place."""
    return [t for d in definitions for t in (d["tools"] if d.get("type") == "namespace" else [d])]


def fn(name: str) -> dict[str, Any]:
    """A Responses function definition that takes no arguments (it renders back as it is)."""
    return {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}


def test_a_namespace_given_twice_with_another_description_is_an_error_naming_both(tmp_path: Path) -> None:
    """Two Responses namespaces of one name merged silently, and a Responses export took the first one's description,
    the other lost. One given twice differently (a description, another key) is an error naming the namespace, the
    difference and a tool of each, in parse_tools and in a file (the lines of a JSONL file too), nothing imported; the
    same namespace given twice is one. export_catalog lists such tools given to it (a catalog written before) in the
    first one's namespace, with a warning (test_definitions)."""
    crm = {"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [fn("a")]}
    other = {**crm, "description": "CRM.", "tools": [fn("b")]}
    with pytest.raises(
        InvalidToolError,
        match=r"^namespace 'crm' is given twice, described 'Customer records\.' and 'CRM\.': tool \[0\]\.tools\[0\] "
        r"'a' and tool \[2\]\.tools\[0\] 'b'; a namespace's tools share its one definition",
    ):
        parse_tools([crm, fn("c"), other])
    with pytest.raises(InvalidToolError, match=r"^namespace 'crm' is given twice, differing in 'defer_loading': "):
        parse_tools([crm, {**crm, "defer_loading": True, "tools": [fn("b")]}])
    path = tmp_path / "tools.jsonl"
    path.write_text(f"{json.dumps(crm)}\n{json.dumps(other)}\n", encoding="utf-8")
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value).startswith(
        f"{path}: namespace 'crm' is given twice, described 'Customer records.' and 'CRM.': line 1 (tool tools[0] 'a') "
        "and line 2 (tool tools[0] 'b')"
    ), str(info.value)
    same = parse_tools([crm, {**crm, "tools": [fn("b")]}])
    assert export_catalog(same, "openai-responses") == {"tools": [{**crm, "tools": [fn("a"), fn("b")]}]}
    merged = [*parse_tools(crm), *parse_tools(other)]
    assert export_catalog(merged, "openai-responses") == {"tools": [{**crm, "tools": [fn("a"), fn("b")]}]}


def test_a_namespace_inside_a_namespace_is_an_error_naming_both() -> None:
    """A Responses namespace holds function and custom tools; one inside another was read as if the outer one were not
    there (its tools imported as 'inner.search', the outer namespace and its description dropped). It is an error
    naming where and both namespaces, and nothing is imported; a wrapper's namespaces side by side still parse."""
    inner = {"type": "namespace", "name": "inner", "tools": [{"type": "function", "name": "search"}]}
    outer = {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [inner]}
    with pytest.raises(
        InvalidToolError,
        match=r"^tool \[1\]\.tools\[0\]: namespace 'inner' is inside namespace 'crm'; a Responses namespace holds",
    ):
        parse_tools([{"name": "ok"}, outer])
    assert [t.id for t in parse_tools({"tools": [outer["tools"][0], {**outer, "tools": []}]})] == ["inner.search"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("2025-13-45", "month must be in 1..12"),
        ("1" + "0" * 5000, f"{INT_LIMIT} for integer string conversion"),
        ("!!bool maybe", "'maybe'"),
    ],
)
def test_a_yaml_value_python_cannot_build_is_an_error_naming_the_file(tmp_path: Path, value: str, problem: str) -> None:
    """A YAML scalar that resolves to a date, an integer or a boolean Python cannot build (a typo'd date as an OpenAPI
    ``info.version``, an integer of 5,000 digits, ``!!bool maybe``) escaped load_tools_file as a ValueError or
    KeyError traceback; it is an InvalidToolError naming the file and the problem. One built that JSON cannot write
    (a hexadecimal integer of 5,000 digits) says so without Python's advice to call sys.set_int_max_str_digits."""
    path = tmp_path / "api.yaml"
    path.write_text(f"openapi: 3.0.0\ninfo:\n  title: t\n  version: {value}\npaths: {{}}\n", encoding="utf-8")
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value).startswith(f"{path}: invalid YAML: a value that cannot be read ({problem}"), str(info.value)
    assert "sys.set_int_max_str_digits" not in str(info.value)
    path.write_text(f"openapi: 3.0.0\ninfo:\n  version: 0x{'f' * 5000}\npaths: {{}}\n", encoding="utf-8")
    with pytest.raises(InvalidToolError, match=f"YAML that has no JSON equivalent: {re.escape(INT_LIMIT)}"):
        load_tools_file(path)
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert "sys.set_int_max_str_digits" not in str(info.value)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("!!binary aGVsbG8=", "a YAML binary (!!binary), which JSON has no equivalent of: give it as a base64 string"),
        ("!!set {a, b}", "a YAML set (!!set), which JSON has no equivalent of: give it as a list"),
    ],
)
def test_a_yaml_binary_or_set_is_an_error_naming_file_tool_and_field(tmp_path: Path, value: str, said: str) -> None:
    """YAML's !!binary and !!set (bytes and a set in Python, no JSON type) became strings, Python's spelling of them
    ("b'hello'", "{'a', 'b'}"), without a word: a schema's default or enum the API never meant. They are an error naming
    the file, the tool (the operation) and the field, or the field's path outside any operation, nothing imported."""
    path = tmp_path / "api.yaml"
    operation = f"parameters: [{{name: a, in: query, schema: {{type: string, default: {value}}}}}]"
    path.write_text(
        f"openapi: 3.0.0\ninfo: {{title: t, version: '1'}}\npaths:\n  /pets:\n    get:\n      operationId: listPets\n"
        f"      {operation}\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value) == f"{path}: tool (GET /pets) 'listPets': parameters[0].schema.default is {said}"
    path.write_text(
        f"openapi: 3.0.0\ninfo: {{title: t, version: '1'}}\npaths: {{}}\n"
        f"components: {{schemas: {{A: {{default: {value}}}}}}}\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value) == f"{path}: components.schemas.A.default is {said}"


@pytest.mark.parametrize(("name", "where"), [("tools.json", ""), ("tools.jsonl", " line 1")])
def test_a_json_integer_past_pythons_limit_is_said_without_pythons_advice(
    tmp_path: Path, name: str, where: str
) -> None:
    """A JSON file with an integer of 5,000 digits was refused with Python's advice to the programmer, '...; use
    sys.set_int_max_str_digits() to increase the limit', which a user of import cannot follow; the error says what is
    wrong only."""
    path = tmp_path / name
    path.write_text('{"name": "x", "n": 1' + "0" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(InvalidToolError) as info:
        load_tools_file(path)
    assert str(info.value) == (
        f"{path}{where}: invalid JSON: {INT_LIMIT} for integer string conversion: value has 5001 digits"
    )


@pytest.mark.parametrize("value", ["object", 1, {}, []])
def test_an_openai_tools_strict_that_is_no_boolean_is_an_error_naming_the_tool(value: object) -> None:
    """An OpenAI function tool's ``strict`` (either shape) is true, false or null, which the APIs take; another value
    was imported and sent back as it was (the API refuses the request), and an export with metadata took it for no
    strict at all. It is an error naming the tool; null and the booleans import as before."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    responses = {"type": "function", "name": "find", "parameters": schema}
    chat = {"type": "function", "function": {"name": "find", "parameters": schema}}
    with pytest.raises(InvalidToolError, match=r"^tool 'find': strict must be true, false or null, got "):
        parse_tools({**responses, "strict": value})
    with pytest.raises(InvalidToolError, match=r"^tool 'find': strict must be true, false or null, got "):
        parse_tools({**chat, "function": {**chat["function"], "strict": value}})
    for strict in (None, True, False):
        given = {**responses, "strict": strict}
        assert render(parse_tools(given), "openai-responses") == [given]


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_a_namespace_whose_description_is_no_string_is_an_error_naming_it(fmt: str) -> None:
    """A Responses namespace's description is a string (the API shows it to the model); one that was an object was
    imported, and its tools' export with metadata, ``x-toolstore.namespace``, did not import again ('description must
    be a string'). It is an error at the first import, naming the namespace; a string still round-trips."""
    crm = {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [{"type": "function", "name": "s"}]}
    with pytest.raises(InvalidToolError, match=r"^tool \[0\]: namespace 'crm''s description must be a string, got"):
        parse_tools([{**crm, "description": {"text": "CRM."}}])
    tools = parse_tools([crm])
    back = parse_tools(json.loads(json.dumps(export_catalog(tools, fmt, with_metadata=True))))  # type: ignore[arg-type]
    assert export_catalog(back, "openai-responses") == export_catalog(tools, "openai-responses")


def test_a_custom_tool_with_parameters_is_an_error_naming_it() -> None:
    """An OpenAI custom tool takes free-form text; one given a ``parameters`` schema (either shape) was imported with
    them, indexed for search on them, and rendered without them in every format, so an export and re-import lost
    them. It is an error naming the tool; ``"parameters": null``, an empty schema and none still import."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    responses = {"type": "custom", "name": "sql", "description": "Run SQL."}
    chat = {"type": "custom", "custom": {"name": "sql", "description": "Run SQL."}}
    for data in ({**responses, "parameters": schema}, {**chat, "custom": {**chat["custom"], "parameters": schema}}):
        with pytest.raises(InvalidToolError, match=r"^tool 'sql': a custom tool takes free-form text \(held to its"):
            parse_tools(data)
    assert one({**responses, "parameters": None}).parameters is None
    assert one({**responses, "parameters": {"type": "object", "properties": {}}}).parameters is None
    assert render(parse_tools([responses]), "openai-responses") == [responses]
