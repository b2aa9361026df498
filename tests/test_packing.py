"""Greedy first-fit packing and token counting (no database)."""

from __future__ import annotations

import math

import pytest
from namespaced import CRM, SCHEMA

from toolstore import RoutedTool, Signals, Tool
from toolstore._packing import count_tokens, pack, tool_tokens


def routed(tool_id: str, tokens: int, *, always_on: bool = False) -> RoutedTool:
    return RoutedTool(
        tool=Tool(id=tool_id, name=tool_id), score=1.0, signals=Signals(), always_on=always_on, tokens=tokens
    )


def test_oversize_tool_is_skipped_and_packing_continues() -> None:
    candidates = [routed("a", 40), routed("huge", 500), routed("b", 30), routed("c", 50), routed("d", 10)]
    packed, skipped, used = pack(candidates, k=8, token_budget=100)
    assert [r.tool.id for r in packed] == ["a", "b", "d"]
    assert [r.tool.id for r in skipped] == ["huge", "c"]
    assert used == 80


def test_always_on_first_and_not_counted_in_k() -> None:
    candidates = [routed("a", 10), routed("b", 10), routed("core", 5, always_on=True), routed("c", 10)]
    packed, _, used = pack(candidates, k=2, token_budget=None)
    assert [r.tool.id for r in packed] == ["core", "a", "b"]
    assert used == 25


def test_zero_budget_packs_nothing() -> None:
    packed, skipped, used = pack([routed("a", 1)], k=3, token_budget=0)
    assert packed == [] and used == 0 and len(skipped) == 1


def test_token_count_never_crashes_offline() -> None:
    text = '{"type":"function","function":{"name":"send_email"}}'
    n = count_tokens(text)
    assert 0 < n <= math.ceil(len(text) / 4) * 2
    assert tool_tokens(Tool(id="x", name="send_email", description="Send an email.")) > 5


def test_packed_definitions_fit_the_budget_under_the_names_they_are_offered() -> None:
    """Two tools of one name are offered as provider__name: the budget counts that longer definition."""
    import json

    from toolstore import RouteResult

    params = {"type": "object", "properties": {"title": {"type": "string"}}}
    tools = [
        Tool(id=f"{p}.create_issue", name="create_issue", provider=p, description="Create an issue", parameters=params)
        for p in ("github", "linear")
    ]
    candidates = [RoutedTool(t, 1.0, Signals(), tokens=tool_tokens(t)) for t in tools]
    budget = sum(c.tokens for c in candidates)
    packed, skipped, used = pack(candidates, k=2, token_budget=budget)
    assert len(packed) == 2 and skipped == [] and used == budget
    definitions = RouteResult(query="q", tools=packed).definitions()
    assert [d["function"]["name"] for d in definitions] == ["github__create_issue", "linear__create_issue"]
    sent = sum(count_tokens(json.dumps(d, ensure_ascii=False, separators=(",", ":"))) for d in definitions)
    assert sent <= budget, (sent, budget)


def sent_tokens(definitions: list[dict[str, object]]) -> int:
    """What the model receives, counted as ``tokens_used`` counts it: each of the request's ``tools``."""
    import json

    return sum(count_tokens(json.dumps(d, ensure_ascii=False, separators=(",", ":"))) for d in definitions)


def test_a_responses_namespace_is_counted_in_the_budget_once() -> None:
    """Packing for the Responses format counts a namespace's own tokens (its name and description) the first time
    one of its tools is packed: a budget both its tools fit as flat definitions holds one of them inside the
    namespace, and what definitions() sends fits it. The exploration slot pays for its tool's namespace too."""
    from toolstore import RouteResult, parse_tools
    from toolstore._explore import explore_pack
    from toolstore._packing import namespace_tokens

    fmt = "openai-responses"
    tools = [*parse_tools(CRM), Tool(id="notes", name="notes", description="Take notes.", parameters=SCHEMA)]
    search, lead, notes = [RoutedTool(t, 1.0, Signals(), tokens=tool_tokens(t, fmt)) for t in tools]
    flat = tool_tokens(tools[0]) + tool_tokens(tools[1])  # both as flat (Chat Completions) definitions
    packed, skipped, used = pack([search, lead], k=2, token_budget=flat, fmt=fmt)
    assert (packed, skipped) == ([search], [lead])
    result = RouteResult(query="q", tools=packed, token_budget=flat, tokens_used=used, fmt=fmt)
    assert result.definitions() == [{**CRM, "tools": CRM["tools"][:1]}]  # the format packed for, by default
    assert sent_tokens(result.definitions()) <= used <= flat
    # one namespace is counted once, however many of its tools are packed; a flat tool pays for none
    _, wrapper = namespace_tokens(search.tool, fmt) or ("", 0)
    assert namespace_tokens(notes.tool, fmt) is None and namespace_tokens(search.tool, "openai") is None
    everything = pack([search, lead, notes], k=3, token_budget=None, fmt=fmt)
    assert everything[2] == search.tokens + lead.tokens + notes.tokens + wrapper
    assert sent_tokens(RouteResult(query="q", tools=everything[0], fmt=fmt).definitions()) <= everything[2]
    big = RoutedTool(Tool(id="big", name="big"), 1.0, Signals(), tokens=10**6)
    for room, drawn in ((notes.tokens + search.tokens, []), (notes.tokens + search.tokens + wrapper, [search])):
        packed, _, used, report = explore_pack([notes, big, search], k=2, token_budget=room, seed=1, query="q", fmt=fmt)
        assert report is not None and report["eligible"] == len(drawn) and used <= room
        assert [c.tool.id for c in packed] == [c.tool.id for c in [notes, *drawn]]


def test_definitions_in_another_format_keep_the_tools_and_warn_past_the_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A result packed for one format gives the same tools in another (its names and resolve() stay true), and when
    their definitions there pass the token budget (an MCP tool's outputSchema, which the OpenAI format leaves out) a
    warning on the ``toolstore`` logger says so, with their tokens and the format to route for; in the format packed
    for, within the budget, or without one, nothing is said."""
    from toolstore import RouteResult, parse_tools

    output = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(40)}}
    definition = {"name": "report", "description": "A report.", "inputSchema": SCHEMA, "outputSchema": output}
    [tool] = parse_tools([definition])
    candidate = RoutedTool(tool, 1.0, Signals(), tokens=tool_tokens(tool))
    packed, _, used = pack([candidate], k=1, token_budget=tool_tokens(tool))
    result = RouteResult(query="q", tools=packed, token_budget=used, tokens_used=used)
    with caplog.at_level("WARNING", logger="toolstore"):
        assert sent_tokens(result.definitions()) <= used
        assert caplog.records == []
        mcp = result.definitions("mcp")
    assert [d["name"] for d in mcp] == result.names and mcp[0]["outputSchema"] == output
    assert sent_tokens(mcp) > used
    [record] = caplog.records
    assert record.levelname == "WARNING"
    message = record.getMessage()
    assert f"definitions('mcp') of a route packed for 'openai': {sent_tokens(mcp)} tokens" in message
    assert f"over its token budget of {used}" in message and "fmt='mcp'" in message
    caplog.clear()
    with caplog.at_level("WARNING", logger="toolstore"):
        RouteResult(query="q", tools=packed, token_budget=sent_tokens(mcp), tokens_used=used).definitions("mcp")
        RouteResult(query="q", tools=packed, tokens_used=used).definitions("mcp")
    assert caplog.records == []
