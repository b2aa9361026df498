"""The texts toolstore indexes and embeds for a tool."""

from __future__ import annotations

import json

from toolstore import Tool
from toolstore._rows import DOC_GROWTH, own_text_chars
from toolstore._text import dense_text, description_doc, expansion_doc, name_doc


def test_dense_text_puts_what_the_tool_does_first_then_category_and_parameters() -> None:
    tool = Tool(
        id="weather.get_forecast",
        name="get_forecast",
        description="Daily forecast for a place.",
        categories=("Weather",),
        parameters={
            "type": "object",
            "properties": {
                "cityName": {"type": "string", "description": " The city to look up "},
                "units": {"type": "string"},
            },
        },
        expansion="what's the weather tomorrow",
    )
    assert dense_text(tool) == (
        "get forecast: Daily forecast for a place.\n"
        "Category: Weather\n"
        "Parameters: city Name (The city to look up); units\n"
        "what's the weather tomorrow"
    )


def test_dense_text_of_a_bare_tool_is_its_split_name_and_description() -> None:
    bare = Tool(id="ping", name="sendPing", description="Ping a host.", parameters={"type": "object"})
    assert dense_text(bare) == "send Ping: Ping a host."
    titled = Tool(id="x", name="x_y", title="Send a ping", description="", parameters=None)
    assert dense_text(titled) == "Send a ping:"


def test_no_indexed_field_outgrows_the_bound_that_spares_building_it() -> None:
    """check_tools builds a tool's indexed fields only when DOC_GROWTH x its own text could pass the cap: worst
    cases for identifier splitting and schema text stay under the bound."""
    camel = "aBcDeFgHiJ " * 50
    schema = {
        "type": "object",
        "properties": {f"aB_{i}": {"description": camel, "enum": ["xY.z", 1e16]} for i in range(9)},
    }
    tools = [
        Tool(id="a.b", name="aBcD", title="T", provider="p_q", keywords=("kW",), description=camel, expansion=camel),
        Tool(id="x", name="y", parameters=schema, examples=(camel,), categories=("c_d",), tags=("a-b",)),
        Tool(id="x", name="y", parameters={"properties": {"a": {"items": {"properties": {"bC": {}}}}}}),
    ]
    for tool in tools:
        for doc in (name_doc, description_doc, expansion_doc):
            assert len(doc(tool)) <= DOC_GROWTH * own_text_chars(tool)
    assert own_text_chars(tools[2]) == len("x") + len("y") + 6 + len(json.dumps(tools[2].parameters))
