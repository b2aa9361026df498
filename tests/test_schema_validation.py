"""A tool's parameter schema is held to the JSON Schema meta-schema when it is written: `{"type": "strnig"}` or a
`properties` that is a list was stored, and exported to a model API that refuses the whole request over it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from toolstore import InvalidToolError, Tool, ToolStore, load_tools_file
from toolstore._rows import check_tools
from toolstore._schemas import _draft7_takes

from benchdata import BENCH

DEMO = Path(__file__).resolve().parents[1] / "toolstore" / "demo" / "tools.jsonl"


def tool(properties: dict[str, Any], **schema: Any) -> Tool:
    return Tool(id="a.send", name="send", parameters={"type": "object", "properties": properties, **schema})


@pytest.mark.parametrize(
    "bad, said",
    [
        (tool({"to": {"type": "strnig"}}), "at properties.to.type: 'strnig' is not a JSON Schema type (array, "),
        (tool({"to": {"type": "object", "properties": []}}), "at properties.to.properties: [] is not of type 'object'"),
        (tool({"to": "string"}), "at properties.to: 'string' is not of type 'object', 'boolean'"),
        (tool({"to": {"type": "string"}}, required="to"), "at required: 'to' is not of type 'array'"),
        (tool({"to": {"type": "string", "minLength": -1}}), "at properties.to.minLength: -1 is less than the minimum"),
        (tool({"to": {"type": "array", "items": 3}}), "at properties.to.items: 3 is not valid under any"),
    ],
)
def test_a_schema_no_json_schema_reader_takes_is_refused_naming_the_path(bad: Tool, said: str) -> None:
    with pytest.raises(InvalidToolError) as raised:
        check_tools([bad])
    assert str(raised.value).startswith(f"tool #1 ('a.send'): parameters is not a valid JSON Schema {said}"), (
        raised.value
    )


def test_a_refused_schema_leaves_the_catalog_as_it_was(store: ToolStore) -> None:
    store.upsert([Tool(id="kept", name="kept", description="stays")])
    good = Tool(id="b.new", name="new", parameters={"type": "object", "properties": {"x": {"type": "string"}}})
    with pytest.raises(InvalidToolError, match=r"tool #2 \('a.send'\): .* 'strnig' is not a JSON Schema type"):
        store.upsert([good, tool({"to": {"type": "strnig"}})], prune=True)
    assert [t.id for t in store.tools()] == ["kept"]


def test_bfcls_python_type_names_are_stored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """BFCL writes `"type": "float"` and `"dict"`, which its harness maps to JSON Schema's: stored as written (a third
    of bfcl_sessions' tools), with one warning per write naming them; any other unknown type name is refused."""
    floats = tool({"x": {"type": "float"}, "y": {"type": "array", "items": {"type": "dict"}}})
    with caplog.at_level(logging.WARNING, logger="toolstore"):
        check_tools([floats])
    assert [r.getMessage() for r in caplog.records] == [
        "1 tool(s) write types in their parameter schemas as Python names ('float', 'dict': BFCL's), stored as "
        "written; OpenAI and Anthropic refuse such a definition: 'a.send'"
    ]
    with pytest.raises(InvalidToolError, match="at properties.y.type: 'flaot' is not a JSON Schema type"):
        check_tools([tool({"x": {"type": "float"}, "y": {"type": "flaot"}})])


def test_a_schema_of_another_draft_is_read_as_its_draft() -> None:
    """`$schema` names the draft: 2020-12's `prefixItems` must be a list, which draft 7 does not know of."""
    draft = "https://json-schema.org/draft/2020-12/schema"
    check_tools([tool({"p": {"type": "array", "prefixItems": [{"type": "string"}]}}, **{"$schema": draft})])
    with pytest.raises(InvalidToolError, match="at properties.p.prefixItems: 3 is not of type 'array'"):
        check_tools([tool({"p": {"type": "array", "prefixItems": 3}}, **{"$schema": draft})])


@pytest.mark.parametrize(
    "path",
    [DEMO, *sorted(BENCH.glob("*/tools*.jsonl"))] if BENCH.is_dir() else [DEMO],
    ids=lambda p: p.parent.name,
)
def test_the_demo_and_shared_catalogs_still_import(path: Path) -> None:
    check_tools(load_tools_file(path))


_KEYWORDS = ["type", "properties", "items", "required", "enum", "minimum", "minLength", "pattern", "format"]
_KEYWORDS += ["additionalProperties", "anyOf", "const", "maxItems", "uniqueItems", "dependencies", "$ref", "default"]
_LEAVES = st.none() | st.booleans() | st.integers(-2, 3) | st.floats(-2, 2) | st.sampled_from(["string", "strnig", "["])
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from([*_KEYWORDS, "a"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(_KEYWORDS), _VALUES, max_size=4))
def test_the_fast_check_takes_no_schema_jsonschema_refuses(schema: dict[str, Any]) -> None:
    """`_schemas` asks fastjsonschema first and jsonschema only about what it refuses: the fast yes must be right."""
    if _draft7_takes(schema):
        assert Draft7Validator(Draft7Validator.META_SCHEMA).is_valid(schema), schema
