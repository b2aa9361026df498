"""route()'s exploration slot (ranks k+1..2k, deterministic per seed) and reranker hook (the fused top
k * rerank_depth reordered before packing; its failure contract), on both stores."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import pytest

from toolstore import AsyncToolStore, HashingEmbedder, IntentExample, InvalidInputError, Tool, ToolStore

from catalog_gen import generated_queries, generated_tools

ALWAYS = Tool(id="core.ask_user", name="ask_user", description="Ask the user a clarifying question", always_on=True)
QUERIES = generated_queries(6, seed=41)


@pytest.fixture
def store(dsn: str) -> Iterator[ToolStore]:
    tools = generated_tools(200, seed=31) + [ALWAYS]
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="shaping") as s:
        s.upsert(tools)
        s.add_examples([IntentExample(t.id, q) for t, q in zip(tools[::2], generated_queries(100, seed=7))])
        yield s


def routed(result: Any) -> list[str]:
    return [r.tool.id for r in result.tools if not r.always_on]


def fused(store: ToolStore, query: str, n: int) -> list[str]:
    """The routed ids in plain fused order, ranks 1..n."""
    return routed(store.route(query, k=n))


# -- exploration ---------------------------------------------------------------------------------------------------


def test_explore_draws_one_slot_from_ranks_k_plus_1_to_2k_deterministically(store: ToolStore) -> None:
    k = 5
    drawn_ranks = set()
    for q in QUERIES[:3]:
        order = fused(store, q, 2 * k)
        for seed in range(12):
            result = store.route(q, k=k, explore=True, seed=seed)
            ids = routed(result)
            assert result.tools[0].tool.id == ALWAYS.id and result.tools[0].always_on  # always-on still first
            assert len(ids) == k and ids[: k - 1] == order[: k - 1]
            explored = [r for r in result.tools if r.explored]
            assert len(explored) == 1 and explored[0] is result.tools[-1]
            assert explored[0].tool.id in order[k : 2 * k]
            assert result.exploration is not None and result.exploration["seed"] == seed
            assert result.exploration["explored"] == explored[0].tool.id
            rank = result.exploration["explored_rank"]
            assert order[rank - 1] == explored[0].tool.id and k + 1 <= rank <= 2 * k
            drawn_ranks.add(rank)
            assert routed(store.route(q, k=k, explore=True, seed=seed)) == ids  # same seed, same request: same draw
    assert len(drawn_ranks) > 2  # different seeds draw different tools, from the whole window


def test_explore_without_a_seed_reports_one_that_replays_it(store: ToolStore) -> None:
    q = QUERIES[3]
    result = store.route(q, k=4, explore=True)
    assert result.exploration is not None
    seed = result.exploration["seed"]
    assert isinstance(seed, int)
    assert routed(store.route(q, k=4, explore=True, seed=seed)) == routed(result)
    plain = store.route(q, k=4)
    assert plain.exploration is None and not any(r.explored for r in plain)


def test_explore_respects_the_token_budget(store: ToolStore) -> None:
    q = QUERIES[4]
    k = 4
    unlimited = store.route(q, k=2 * k)
    costs = {r.tool.id: r.tokens for r in unlimited.tools}
    first = sum(costs[i] for i in [ALWAYS.id, *routed(unlimited)[: k - 1]])
    window = routed(unlimited)[k : 2 * k]
    cheapest = min(costs[i] for i in window)
    # room for the first k - 1 and the cheapest of the window only: it is the one drawn, whatever the seed
    budget = first + cheapest
    for seed in range(5):
        result = store.route(q, k=k, token_budget=budget, explore=True, seed=seed)
        assert result.tokens_used <= budget
        explored = [r for r in result.tools if r.explored]
        assert result.exploration is not None
        if result.exploration["eligible"]:
            assert len(explored) == 1 and explored[0].tokens == cheapest
    # no room for any tool of the window: the slot is filled as usual and nothing is marked explored
    tight = store.route(q, k=k, token_budget=first + cheapest - 1, explore=True, seed=1)
    assert tight.tokens_used <= first + cheapest - 1
    assert not any(r.explored for r in tight) and tight.exploration is not None
    assert tight.exploration["explored"] is None


# -- reranking -----------------------------------------------------------------------------------------------------


def test_reranker_reorders_the_fused_top_k_times_depth(store: ToolStore) -> None:
    q = QUERIES[0]
    k, depth = 4, 2
    order = fused(store, q, k * depth)
    seen: list[Any] = []

    def reverse(query: str, candidates: list[Any]) -> list[float]:
        seen.append((query, [c.tool.id for c in candidates]))
        return [float(i) for i in range(len(candidates))]  # the last fused candidate scores highest

    result = store.route(q, k=k, reranker=reverse, rerank_depth=depth)
    assert seen == [(q, order)]  # the top k * depth, fused order, always-on tool not sent
    assert routed(result) == order[::-1][:k]
    for r in result.tools:
        if not r.always_on:
            assert order[r.fused_rank - 1] == r.tool.id and r.rerank_rank == k * depth + 1 - r.fused_rank
    assert result.rerank == {"depth": depth, "candidates": k * depth, "applied": True}
    assert "rerank" in result.timings
    explained = {t["id"]: t for t in result.explain()["tools"]}
    assert explained[order[-1]]["fused_rank"] == k * depth and explained[order[-1]]["rerank_rank"] == 1


def test_reranked_ranks_are_on_the_fused_scale_with_an_exact_match_ahead(store: ToolStore) -> None:
    named = fused(store, QUERIES[2], 12)[-1]
    text = f"{QUERIES[2]} with {named}"  # names a tool verbatim: an exact match, first and not reranked
    keep = lambda query, c: [-float(i) for i in range(len(c))]  # noqa: E731  (the fused order kept)
    result = store.route(text, k=4, reranker=keep, rerank_depth=2)
    first = next(r for r in result.tools if not r.always_on)
    assert first.tool.id == named and first.exact and first.fused_rank == 1 and first.rerank_rank is None
    reranked = [r for r in result.tools if r.rerank_rank is not None]
    assert len(reranked) == 3 and all(r.rerank_rank == r.fused_rank for r in reranked)


def test_reranker_ties_keep_the_fused_order_and_it_works_with_exploration(store: ToolStore) -> None:
    q = QUERIES[1]
    flat = store.route(q, k=5, reranker=lambda query, c: [1.0] * len(c))
    assert routed(flat) == fused(store, q, 5)
    order = fused(store, q, 10)
    reverse = lambda query, c: list(range(len(c)))  # noqa: E731
    both = store.route(q, k=5, reranker=reverse, rerank_depth=2, explore=True, seed=3)
    reranked = order[::-1]
    assert routed(both)[:4] == reranked[:4]
    assert both.exploration is not None and both.exploration["explored"] in reranked[5:10]


def test_a_reranker_that_raises_degrades_to_the_fused_order(store: ToolStore) -> None:
    q = QUERIES[2]

    def down(query: str, candidates: list[Any]) -> list[float]:
        raise TimeoutError("rerank service timed out: https://rerank.example/v1?api_key=rk_live_0123456789")

    result = store.route(q, k=5, reranker=down)
    assert routed(result) == fused(store, q, 5)
    assert result.degraded_reason is not None and "reranker failed (TimeoutError" in result.degraded_reason
    assert "rk_live" not in result.degraded_reason  # a client's quoted URL keeps no key
    assert result.rerank == {"depth": 3, "candidates": 15, "applied": False}
    assert all(r.rerank_rank is None for r in result.tools)


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        (lambda c: [1.0] * (len(c) - 1), "reranker returned 14 scores for 15 candidates"),
        (lambda c: [1.0] * (len(c) - 1) + [math.nan], "reranker score #15 is not finite"),
        (lambda c: [1.0] * (len(c) - 1) + [math.inf], "reranker score #15 is not finite"),
        (lambda c: ["high"] * len(c), "reranker score #1 is not a number"),
        (lambda c: None, "reranker must return a sequence of scores"),
        (lambda c: "0.5", "reranker must return a sequence of scores"),
    ],
)
def test_a_reranker_that_returns_unusable_scores_is_a_clear_error(store: ToolStore, scores: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.route(QUERIES[0], k=5, reranker=lambda query, c: scores(c))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"explore": "yes"}, "explore must be True or False"),
        ({"explore": True, "seed": -1}, "seed must be an integer"),
        ({"explore": True, "seed": 1.5}, "seed must be an integer"),
        ({"explore": True, "seed": True}, "seed must be an integer"),
        ({"seed": 3}, "seed is only used with explore=True"),
        ({"reranker": "cross-encoder"}, "reranker must be a callable"),
        ({"reranker": lambda q, c: [], "rerank_depth": 0}, "rerank_depth must be an integer"),
        ({"rerank_depth": 51}, "rerank_depth must be an integer"),
        ({"rerank_depth": 5}, "rerank_depth is only used with a reranker"),
        ({"rerank_depth": 3}, "rerank_depth is only used with a reranker"),  # the default depth, given: refused too
    ],
)
def test_bad_exploration_and_rerank_options(store: ToolStore, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.route(QUERIES[0], **kwargs)


def test_async_store_reranks_with_a_coroutine_or_a_plain_function(store: ToolStore, dsn: str) -> None:
    q = QUERIES[5]
    reverse = lambda query, c: [float(i) for i in range(len(c))]  # noqa: E731

    async def areverse(query: str, candidates: list[Any]) -> list[float]:
        await asyncio.sleep(0)
        return reverse(query, candidates)

    expected = routed(store.route(q, k=4, reranker=reverse, explore=True, seed=9))

    async def main() -> list[list[str]]:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="shaping", create=False) as a:
            out = [routed(await a.route(q, k=4, reranker=f, explore=True, seed=9)) for f in (areverse, reverse)]
            with pytest.raises(InvalidInputError, match="reranker returned 0 scores"):
                await a.route(q, k=4, reranker=lambda query, c: [])
            return out

    assert asyncio.run(main()) == [expected, expected]
    with pytest.raises(InvalidInputError, match="an async reranker needs AsyncToolStore"):
        store.route(q, k=4, reranker=areverse)


def test_explore_pack_edges_without_a_database() -> None:
    from toolstore._explore import explore_pack
    from toolstore._result import RoutedTool, Signals

    tools = [RoutedTool(Tool(id=f"t.{i}", name=f"t{i}", description="d"), 1.0 / (i + 1), Signals()) for i in range(6)]
    packed, skipped, used, report = explore_pack(tools, k=1, token_budget=None, seed=0, query="q")
    assert [t.tool.id for t in packed] == ["t.1"] and packed[0].explored and report is not None  # rank 2 of 1..2
    assert report["ranks"] == [2, 2] and report["explored_rank"] == 2
    packed, _, _, report = explore_pack(tools, k=6, token_budget=None, seed=0, query="q")  # no rank beyond k
    assert [t.tool.id for t in packed] == [t.tool.id for t in tools] and report is not None
    assert report["explored"] is None and not any(t.explored for t in packed)
    draws = {explore_pack(tools, k=3, token_budget=None, seed=s, query="q")[3]["explored"] for s in range(30)}  # type: ignore[index]
    assert draws == {"t.3", "t.4", "t.5"}  # uniform over the window, all of it reached
    assert explore_pack(tools, k=3, token_budget=None, seed=None, query="q")[3] is None
