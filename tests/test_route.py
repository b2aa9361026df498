"""route(): the one fused statement, filters, always-on tools, degraded mode, and bad input."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from psycopg.rows import dict_row

from toolstore import (
    Embedder,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    ModelMismatchError,
    Tool,
    ToolStore,
    UnknownCatalogError,
)
from toolstore._fusion import NEIGHBOURS_PER_TOOL, SIGNALS, stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import query
from toolstore._text import query_text

from catalog_gen import generated_queries, generated_tools
from fusion_oracle import ranked, rrf
from retrievers import block

SIGNAL_NAMES = ("name", "description", "expansion", "dense", "intent")


@pytest.fixture
def catalog(dsn: str):
    tools = generated_tools(400, seed=21)
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="fusion") as store:
        store.upsert(tools)
        examples = [IntentExample(t.id, q) for t, q in zip(tools[::2], generated_queries(200, seed=5))]
        examples += [IntentExample(t.id, q) for t, q in zip(tools[::3], generated_queries(134, seed=6))]
        store.add_examples(examples)
        yield store


def separate_lists(store: ToolStore, text: str, qvec: np.ndarray, n: int, n_examples: int) -> dict[str, list[str]]:
    """Each retriever's ranked tool ids, fetched one statement at a time."""
    info = store.info()
    lists: dict[str, list[str]] = {}
    with store.pool.connection() as conn:
        for field, name in ((1, "name"), (2, "description"), (3, "expansion")):
            rows = conn.execute(
                block("bm25_field"), {"catalog": info.id, "field": field, "query_text": text}
            ).fetchall()
            lists[name] = [r[0] for r in rows][:n]
        params = {"catalog": info.id, "dim": info.embed_dim, "qvec": qvec, "n": n, "n_examples": n_examples}
        lists["dense"] = [r[0] for r in conn.execute(query("eval_dense"), params).fetchall()]
        neighbours = conn.execute(block("neighbour_list"), params).fetchall()
    per_tool: dict[str, list[float]] = defaultdict(list)
    for tool_id, distance in neighbours:
        per_tool[tool_id].append(distance)
    scores = {t: sum(1 - d for d in sorted(ds)[:NEIGHBOURS_PER_TOOL]) for t, ds in per_tool.items()}
    lists["intent"] = [t for t, _ in sorted(scores.items(), key=lambda kv: (-round(kv[1] * 1e9), kv[0]))][:n]
    return lists


def python_rrf(
    lists: dict[str, list[str]], weights: dict[str, float], k_rrf: float
) -> list[tuple[str, float, dict[str, int]]]:
    """The fused list the oracle computes from separate lists: (id, score, rank per contributing signal)."""
    ranks = ranked(lists)
    scores = rrf(ranks, weights, k_rrf)
    ordered = sorted(scores, key=lambda t: (-round(scores[t] * 1e9), t))
    return [
        (t, scores[t], {s: ranks[s][t] for s in SIGNALS if weights.get(s, 0) > 0 and t in ranks.get(s, {})})
        for t in ordered
    ]


@pytest.mark.parametrize(
    ("weights", "k_rrf"),
    [
        ({s: 1.0 for s in SIGNAL_NAMES}, 60.0),
        ({s: 1.0 for s in SIGNAL_NAMES}, 5.0),
        ({"name": 2.0, "description": 0.5, "expansion": 0.0, "dense": 1.5, "intent": 3.0}, 60.0),
        ({"name": 0.0, "description": 1.0, "expansion": 0.0, "dense": 0.0, "intent": 0.0}, 60.0),
    ],
)
def test_fused_statement_is_exactly_the_rrf_of_separate_lists(
    catalog: ToolStore, weights: dict[str, float], k_rrf: float
) -> None:
    info = catalog.info()
    fusion = replace(stored_fusion(info.settings), weights=weights, k_rrf=k_rrf)
    checked = 0
    for q in generated_queries(12, seed=99):
        text = query_text(q)
        qvec = catalog.embedder.embed(q)
        request = route_request(q, fusion, k=8, token_budget=10**6)  # the whole fused list
        params = statement_params(info, request, qvec)
        lists = separate_lists(catalog, text, qvec, params["n"], params["n_examples"])
        expected = python_rrf(lists, weights, k_rrf)[: params["limit"]]
        with catalog.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query("route"), params).fetchall()
        got = [(r["id"], float(r["score"]), tuple(r[f"rank_{s}"] for s in SIGNAL_NAMES)) for r in rows]
        assert not any(r["exact"] for r in rows)  # generated queries name no tool exactly
        assert [g[0] for g in got] == [e[0] for e in expected], q
        for (tool_id, score, ranks), (_, exp_score, exp_ranks) in zip(got, expected):
            assert score == pytest.approx(exp_score, abs=1e-12)
            assert ranks == tuple(exp_ranks.get(s) for s in SIGNAL_NAMES), tool_id
            for s, w in weights.items():
                if w == 0:
                    assert exp_ranks.get(s) is None and ranks[SIGNAL_NAMES.index(s)] is None
        checked += len(got)
    assert checked > 100


def test_route_returns_ranked_results_with_signals_deterministically(catalog: ToolStore) -> None:
    q = generated_queries(1, seed=42)[0]
    first = catalog.route(q, k=6)
    again = catalog.route(q, k=6)
    assert first.ids == again.ids and len(first) == 6
    assert [r.score for r in first] == sorted((r.score for r in first), reverse=True)
    assert first.dense_used and first.degraded_reason is None
    assert any(r.signals.intent is not None for r in first) and any(r.signals.dense is not None for r in first)


def test_exact_name_and_identifier_match_ranks_first(catalog: ToolStore) -> None:
    target = catalog.tools()[17]
    for q in (target.name, f"please run {target.id} now"):
        assert (
            catalog.route(q, k=3, weights={"description": 0, "expansion": 0, "dense": 0, "intent": 0}).ids[0]
            == target.id
        )
        fused = catalog.route(q, k=5)
        assert fused.ids[0] == target.id and fused.tools[0].exact
        assert fused.tools[0].signals.name == 1
        assert not any(r.exact for r in fused.tools[1:])


def test_always_on_tools_come_first_and_filters_apply(dsn: str) -> None:
    tools = generated_tools(60, seed=8) + [
        Tool(id="core.ask_user", name="ask_user", description="Ask the user a clarifying question", always_on=True)
    ]
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="filters") as store:
        store.upsert(tools)
        q = "send email invoice customer"
        result = store.route(q, k=5)
        assert result.tools[0].tool.id == "core.ask_user" and result.tools[0].always_on
        assert len([r for r in result if not r.always_on]) == 5
        allowed = [t.id for t in tools[:10]]
        assert set(store.route(q, k=5, allow=allowed).ids) - {"core.ask_user"} <= set(allowed)
        blocked = store.route(q, k=5).ids
        assert not set(blocked) & set(store.route(q, k=5, block=blocked).ids)
        finance = store.route(q, k=20, categories=["finance"])
        assert all("finance" in r.tool.categories for r in finance if not r.always_on)
        assert len(finance) > 1


def test_weight_zero_removes_a_retriever(catalog: ToolStore) -> None:
    q = generated_queries(1, seed=3)[0]
    result = catalog.route(q, weights={"dense": 0, "intent": 0, "expansion": 0})
    assert all(r.signals.dense is None and r.signals.intent is None and r.signals.expansion is None for r in result)


class BrokenEmbedder(Embedder):
    def __init__(self, model: str) -> None:
        self.model, self.dim = model, 64

    def embed_batch(self, texts: Any) -> np.ndarray:
        raise ConnectionError("provider down")


def test_embedder_failure_degrades_to_lexical_and_says_so(catalog: ToolStore, dsn: str) -> None:
    with ToolStore(dsn, embedder=BrokenEmbedder("hashing-64"), catalog="fusion", create=False) as broken:
        result = broken.route("send an invoice email")
        assert not result.dense_used
        assert "provider down" in (result.degraded_reason or "")
        assert len(result) > 0 and all(r.signals.dense is None for r in result)


def test_routing_with_another_model_is_a_clear_error(catalog: ToolStore, dsn: str) -> None:
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="fusion", create=False) as other:
        with pytest.raises(ModelMismatchError, match="hashing-64"):
            other.route("send email")


@pytest.mark.parametrize(
    ("bad", "message"),
    [("", "empty"), ("   \n\t", "empty"), ("x" * 100_000, "limit"), ("send\x00email", "NUL"), (None, "string")],
)
def test_bad_queries_are_clear_errors(catalog: ToolStore, bad: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        catalog.route(bad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must"),
        ({"token_budget": -1}, "token_budget"),
        ({"weights": {"bogus": 1}}, "unknown signal"),
        ({"weights": {"dense": -1}}, "finite number"),
        ({"weights": {s: 0 for s in SIGNAL_NAMES}}, "every weight of .* is 0"),
        ({"k_rrf": float("nan")}, "k_rrf"),
        ({"allow": "one_id"}, "list of strings"),
        ({"fmt": "xml"}, "fmt must be one of openai, openai-responses, anthropic, mcp, got 'xml'"),
    ],
)
def test_bad_options_are_clear_errors(catalog: ToolStore, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        catalog.route("send email", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 10**9}, "k must be an integer from 1 to 1000"),
        ({"overfetch": 10**9}, "overfetch must be an integer from 1 to"),
        ({"weights": {"dense": 1e308}}, "weight for 'dense'"),
        ({"k_rrf": 1e308}, "k_rrf"),
        ({"token_budget": 10**12}, "token_budget"),
        ({"allow": ["a\x00b"]}, "allow value contains a NUL byte"),
        ({"block": ["\ud800"]}, "block value is not valid Unicode"),
        ({"categories": ["x" * 300]}, "categories value is 300 characters long"),
        ({"allow": [f"t{i}" for i in range(10_001)]}, "allow holds 10,001 values"),
        ({"dialect": "anthropc"}, "unknown message dialect 'anthropc'"),  # without messages too
    ],
)
def test_out_of_range_options_are_refused_before_the_database(
    catalog: ToolStore, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        catalog.route("send email", **kwargs)


@pytest.mark.parametrize(("query", "message"), [("send \udcff email", "not valid Unicode"), ("x\x00", "NUL")])
def test_queries_that_cannot_be_encoded_are_refused(catalog: ToolStore, query: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        catalog.route(query)


def test_unknown_catalog(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="nope", create=False) as store:
        with pytest.raises(UnknownCatalogError, match="nope"):
            store.route("send email")


def test_token_budget_packs_greedily(catalog: ToolStore) -> None:
    q = generated_queries(1, seed=8)[0]
    unlimited = catalog.route(q, k=8)
    costs = [r.tokens for r in unlimited]
    budget = sum(costs[:3]) + 1
    packed = catalog.route(q, k=8, token_budget=budget)
    assert packed.tokens_used <= budget
    assert packed.ids[:3] == unlimited.ids[:3]
    assert packed.tokens_used == sum(r.tokens for r in packed)
    definitions = packed.definitions("anthropic")
    assert [d["name"] for d in definitions] == packed.names  # model-facing: valid, unique
    assert [packed.resolve(d["name"]) for d in definitions] == [r.tool for r in packed]
    assert all("input_schema" in d for d in definitions)


def test_a_token_budget_with_an_overfetch_under_k_still_fills_k(catalog: ToolStore) -> None:
    q = generated_queries(1, seed=8)[0]
    plain = catalog.route(q, k=8, overfetch=3)
    budgeted = catalog.route(q, k=8, overfetch=3, token_budget=10**6)  # room for every tool
    assert len(plain.tools) == 8 and budgeted.skipped == []
    assert budgeted.ids == plain.ids


PREPARED_ROUTE = (
    "select generic_plans, custom_plans from pg_prepared_statements where statement like '%route_catalog(%'"
)


def test_the_route_statement_is_prepared_at_its_first_run_on_a_connection(dsn: str) -> None:
    """psycopg prepares a statement at its sixth run; each run before parses and plans the route statement again (about
    4 ms at 10k tools). It is prepared at its first: two routes on one connection run its one generic plan twice."""
    with ToolStore(dsn, embedder=HashingEmbedder(16), catalog="prepared", pool_size=1) as store:
        store.upsert(generated_tools(20, seed=1))
        store.route("send the weekly report")
        store.route("open an issue")
        with store.pool.connection() as conn:
            assert conn.execute(PREPARED_ROUTE).fetchall() == [(2, 0)]


def test_intent_reads_two_nearest_examples_per_candidate(dsn: str) -> None:
    """The intent retriever sums a tool's nearest examples among the request's 2 x depth nearest (80 at k 10), not 3 x
    depth: 120 took about 8% more of the 10k statement's backend CPU for the same train quality (bench/PROFILE.md,
    "The intent depth"). Four tools own the 80 examples nearest the request; the 81st is `far`'s."""
    embedder = HashingEmbedder(256)
    tools = [Tool(id=f"near{i}", name=f"near{i}", description=f"tool {i}") for i in range(4)]
    tools.append(Tool(id="far", name="far", description="another tool"))
    request = "alpha beta"
    near = [IntentExample(f"near{i % 4}", f"alpha beta w{i}") for i in range(80)]
    far = IntentExample("far", "alpha gamma delta epsilon zeta")
    vectors = embedder.embed_batch([request, *(e.query for e in near), far.query])
    distance = 1 - vectors[1:] @ vectors[0]
    assert distance[-1] > distance[:-1].max()  # `far`'s example is the 81st nearest
    intent_only = {"name": 0, "description": 0, "expansion": 0, "dense": 0, "intent": 1}
    with ToolStore(dsn, embedder=embedder, catalog="depth") as store:
        store.upsert(tools)
        store.add_examples([*near, far])
        routed = [r.tool.id for r in store.route(request, k=10, weights=intent_only)]
    assert sorted(routed) == [f"near{i}" for i in range(4)]
