"""RouteResult.explain(): per tool, each signal's RRF contribution adding up to the fused score; per request, the
fusion, filters, stage timings and the slots other features fill; and the CLI's `explain` object."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_cli import run

from toolstore import SIGNALS, HashingEmbedder, IntentExample, Tool, ToolStore
from toolstore._fusion import DEFAULT_FUSION
from toolstore._route import RouteRequest
from toolstore._routed import route_result

from catalog_gen import generated_queries, generated_tools

TOOL_KEYS = {
    "id", "rank", "score", "rrf", "signals", "adjustments", "sub_request", "exact", "always_on", "explored",
    "fused_rank", "rerank_rank", "rerank_score", "tokens",
}  # fmt: skip
REQUEST_KEYS = {
    "query", "fusion", "filters", "timings_ms", "dense_used", "degraded_reason", "token_budget", "tokens_used",
    "exploration", "rerank", "sub_requests", "abstention",
}  # fmt: skip


@pytest.fixture
def store(dsn: str) -> Iterator[ToolStore]:
    tools = generated_tools(150, seed=12) + [
        Tool(id="core.ask_user", name="ask_user", description="Ask the user a question", always_on=True)
    ]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="explain") as s:
        s.upsert(tools)
        s.add_examples([IntentExample(t.id, q) for t, q in zip(tools[::2], generated_queries(75, seed=2))])
        yield s


def assert_adds_up(explained: dict[str, Any]) -> None:
    for tool in explained["tools"] + explained["skipped"]:
        total = sum(s["contribution"] for s in tool["signals"].values())
        assert abs(total - tool["rrf"]) < 1e-12
        assert abs(tool["rrf"] + sum(tool["adjustments"].values()) - tool["score"]) < 1e-9, tool["id"]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"weights": {"name": 2.0, "description": 0.5, "dense": 1.5, "intent": 0.0}, "k_rrf": 60.0},
        {"token_budget": 900, "categories": ["finance", "communication"], "overfetch": 25},
        {"messages": [{"role": "user", "content": "I need to email the customer"}], "explore": True, "seed": 4},
    ],
)
def test_contributions_add_up_to_the_fused_score(store: ToolStore, options: dict[str, Any]) -> None:
    for q in generated_queries(4, seed=19):
        result = store.route(q, k=6, **options)
        explained = result.explain()
        assert_adds_up(explained)
        fusion = explained["request"]["fusion"]
        weights = options.get("weights", {})
        for name, weight in weights.items():
            assert fusion["weights"][name] == weight
        assert fusion["k_rrf"] == options.get("k_rrf", DEFAULT_FUSION.k_rrf)
        assert fusion["overfetch"] == options.get("overfetch", 40)
        for tool, routed in zip(explained["tools"], result.tools):
            assert tool["id"] == routed.tool.id and tool["score"] == routed.score
            for signal in SIGNALS:
                rank = getattr(routed.signals, signal)
                entry = tool["signals"][signal]
                assert entry["rank"] == rank
                if rank is not None:
                    assert entry["contribution"] == entry["weight"] / (fusion["k_rrf"] + rank) > 0


def test_explain_is_json_with_every_slot(store: ToolStore) -> None:
    q = generated_queries(1, seed=23)[0]
    result = store.route(q, k=5, allow=[t.id for t in generated_tools(150, seed=12)[:30]], explore=True, seed=1)
    explained = json.loads(json.dumps(result.explain()))  # JSON-ready: survives a round trip unchanged
    assert explained == result.explain()
    assert set(explained) == {"request", "tools", "skipped"}
    request = explained["request"]
    assert set(request) == REQUEST_KEYS
    assert set(request["fusion"]) == {"weights", "k_rrf", "split", "overfetch", "limit"}
    assert set(request["fusion"]["weights"]) == set(SIGNALS) and request["fusion"]["limit"] >= 10
    assert set(request["filters"]) == {"allow"} and len(request["filters"]["allow"]) == 30
    assert {"embed", "statement", "pack", "total"} <= set(request["timings_ms"])
    assert all(v >= 0 for v in request["timings_ms"].values())
    assert request["timings_ms"]["total"] >= request["timings_ms"]["statement"]
    assert request["sub_requests"] == [] and request["abstention"] is None and request["rerank"] is None
    assert request["exploration"]["seed"] == 1 and request["dense_used"] is True
    tools = explained["tools"]
    assert all(set(t) == TOOL_KEYS and set(t["signals"]) == set(SIGNALS) for t in tools)
    assert tools[0]["always_on"] and tools[0]["rank"] is None
    assert [t["rank"] for t in tools[1:]] == [1, 2, 3, 4, 5]
    assert [t["explored"] for t in tools[1:]] == [False] * 4 + [True]
    assert all(t["fused_rank"] is not None for t in tools[1:])


def test_explain_of_a_degraded_route_uses_the_weights_that_ran(store: ToolStore, dsn: str) -> None:
    class Down(HashingEmbedder):
        def embed_batch(self, texts: Any) -> Any:
            raise ConnectionError("provider down")

    with ToolStore(dsn, embedder=Down(64), catalog="explain", create=False) as lexical:  # lexical only
        result = lexical.route("send an invoice email", k=4)
    explained = result.explain()
    assert explained["request"]["degraded_reason"] == result.degraded_reason is not None
    assert explained["request"]["fusion"]["weights"]["dense"] == 0.0
    assert "embed" in explained["request"]["timings_ms"]  # the failed stage is timed too
    assert_adds_up(explained)


def test_statement_adjustments_are_explained_and_add_up() -> None:
    """Columns another feature adds to the statement (anchor boost, avoid-when penalty) are read when present."""
    tool = {"id": "a.b", "name": "b", "description": "d", "title": None, "provider": "a", "parameters": None}
    tool |= {"categories": [], "tags": [], "keywords": [], "examples": [], "expansion": None, "avoid_when": None}
    tool |= {"always_on": False, "spec": None, "exact": False, "part": None, "part_score": None}
    ranks = {f"rank_{s}": None for s in SIGNALS} | {"rank_name": 1, "rank_dense": 3}
    fused = 1 / (5 + 1) + 1 / (5 + 3)
    rows = [tool | ranks | {"score": fused + 0.5 - 0.25, "anchor_boost": 0.5, "avoid_penalty": 0.25}]
    rows.append(tool | ranks | {"id": "a.c", "score": fused})  # a statement without the columns
    sub = {"part": 2, "part_score": 0.125, "part_boost": 0.25}  # split 2 x the tool's sum in sub-request 2
    rows.append(tool | ranks | sub | {"id": "a.d", "score": fused + 0.25})
    weights = dict.fromkeys(SIGNALS, 1.0)
    request = RouteRequest(query="q", fusion=DEFAULT_FUSION, k=3)
    result = route_result(
        request, rows, dense_used=True, degraded_reason=None, fusion={"weights": weights, "k_rrf": 5.0}
    )
    explained = result.explain()
    assert explained["tools"][0]["adjustments"] == {"anchor_boost": 0.5, "avoid_penalty": -0.25}
    assert explained["tools"][1]["adjustments"] == {}
    assert explained["tools"][2]["adjustments"] == {"part_boost": 0.25} and explained["tools"][2]["sub_request"] == 2
    assert_adds_up(explained)


def test_cli_route_explain_adds_an_explain_object_to_json(dsn: str) -> None:
    tools = [{"name": n, "description": d} for n, d in (("send_email", "Send an email"), ("get_weather", "Weather"))]
    tools += [{"name": f"tool_{i}", "description": f"Send report number {i} by email"} for i in range(8)]
    path = f"/tmp/explain-tools-{abs(hash(dsn))}.json"
    with open(path, "w") as f:
        json.dump(tools, f)
    run(dsn, "-c", "cli", "import", path)
    plain = json.loads(run(dsn, "-c", "cli", "route", "send an email", "-k", "2").stdout)
    assert "explain" not in plain and plain["exploration"] is None
    data = json.loads(run(dsn, "-c", "cli", "route", "send an email", "-k", "2", "--explain").stdout)
    assert set(data["explain"]) == {"request", "tools", "skipped"}
    assert [t["id"] for t in data["explain"]["tools"]] == [t["id"] for t in data["tools"]]
    assert_adds_up(data["explain"])
    explored = json.loads(run(dsn, "-c", "cli", "route", "send an email", "-k", "2", "--explore", "--seed", "5").stdout)
    assert explored["exploration"]["seed"] == 5 and explored["tools"][-1]["explored"] is True
    again = run(dsn, "-c", "cli", "route", "send an email", "-k", "2", "--explore", "--seed", "5").stdout
    assert json.loads(again)["tools"] == explored["tools"]
    table = run(dsn, "-c", "cli", "route", "send an email", "-k", "2", "--format", "table", "--explain").stdout
    assert "ms: " in table and "statement=" in table
    bad = run(dsn, "-c", "cli", "route", "send an email", "--seed", "5", check=False)
    assert bad.returncode != 0 and "--seed is the draw's seed: it needs --explore" in bad.stderr
