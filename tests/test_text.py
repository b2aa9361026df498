"""The texts toolstore indexes and embeds for a tool."""

from __future__ import annotations

from toolstore import Tool
from toolstore._text import dense_text


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
