"""Workflow coverage: a compound request is split into its clauses (``_split``), each retrieved on its own inside the
route statement, and a tool's best fused score in one clause, times ``split``, is added to its score."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from toolstore import EmbedderError, HashingEmbedder, InvalidInputError, LocalEmbedder, Tool, ToolStore
from toolstore._examples import load_examples
from toolstore._formats import load_tools_file
from toolstore._split import split_request
from toolstore._vectors import QueryVectors
from toolstore.cli.demo import DEMO_DIR

DEMO_REQUEST = (
    "pull failed payments from Stripe, file a support ticket in Linear, and notify the on-call channel in Slack"
)


def _catalog() -> list[Tool]:
    def tool(tool_id: str, description: str) -> Tool:
        provider, name = tool_id.split(".")
        return Tool(id=tool_id, name=name, description=description, provider=provider)

    return [
        tool("billing.list_refunds", "List refunds issued to customers, newest first"),
        tool("billing.refund_charge", "Refund a duplicate charge to the customer"),
        tool("billing.refund_reasons", "List all the reasons a refund can be issued for"),
        tool("billing.refund_report", "Monthly report of refunds by reason for each customer"),
        tool("tickets.create", "Open an issue in the support desk queue, assigned to the agent on duty"),
        tool("chat.post_message", "Post a message to a chat channel"),
        tool("weather.forecast", "Weather forecast for a city"),
    ]


#: Description BM25 alone, so the ranking is exact and easy to follow.
DESCRIPTION = {"name": 0.0, "description": 1.0, "expansion": 0.0, "dense": 0.0, "intent": 0.0}
COMPOUND = "refund the duplicate charge for the customer and list all refund reasons, then raise an issue with support"


def test_route_retrieves_each_clause(store: ToolStore) -> None:
    store.upsert(_catalog())
    whole = store.route(COMPOUND, k=3, weights=DESCRIPTION, split=0)
    assert whole.sub_requests == []
    assert "tickets.create" not in whole.ids  # the refund clause's words outvote the ticket clause's one
    assert all(t.part is None and t.part_score is None for t in whole.tools)
    result = store.route(COMPOUND, k=3, weights=DESCRIPTION, split=1.0)
    assert result.sub_requests == list(split_request(COMPOUND)) and len(result.sub_requests) == 3
    assert "tickets.create" in result.ids
    ticket = next(t for t in result.tools if t.tool.id == "tickets.create")
    assert result.sub_requests[ticket.part - 1] == "raise an issue with support"
    assert ticket.part_score == pytest.approx(1 / (5 + 1))  # ranked first in its clause, k_rrf 5
    assert ticket.score == pytest.approx(whole_score(store, "tickets.create") + ticket.part_score)
    # the stored weight is used when none is given, and 0 turns splitting off
    store.set_fusion(weights=DESCRIPTION, split=0.0)
    assert store.route(COMPOUND, k=3).sub_requests == []
    store.set_fusion(weights=DESCRIPTION, split=2.0)
    assert store.info().settings["fusion"]["split"] == 2.0
    assert "tickets.create" in store.route(COMPOUND, k=3).ids


def whole_score(store: ToolStore, tool_id: str) -> float:
    """The tool's fused score for the whole request (0 when no retriever returned it)."""
    found = [t for t in store.route(COMPOUND, k=50, weights=DESCRIPTION, split=0).tools if t.tool.id == tool_id]
    return found[0].score if found else 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, True, "1", 1e9])
def test_bad_split_is_refused(store: ToolStore, bad: object) -> None:
    store.upsert(_catalog())
    with pytest.raises(InvalidInputError, match="split"):
        store.route(COMPOUND, split=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="split"):
        store.set_fusion(weights={}, split=bad)  # type: ignore[arg-type]


def test_demo_request_covers_every_provider(dsn: str) -> None:
    """The hybrid-retrieval seed's headline request on the bundled demo catalog, with the shipped local model and
    the default fusion: each of its three actions gets its tool into the top 8."""
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog="demo") as store:
        store.upsert(load_tools_file(DEMO_DIR / "tools.jsonl"))
        store.add_examples(load_examples(DEMO_DIR / "examples.jsonl"))
        routed = store.route(DEMO_REQUEST, k=8).ids
        assert {"stripe.list_charges", "linear.create_issue", "slack.send_message"} <= set(routed)
        assert "linear.create_issue" not in store.route(DEMO_REQUEST, k=8, split=0).ids  # what coverage fixes


class CountingEmbedder(HashingEmbedder):
    """Counts route-time model calls and the texts of each."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[list[str]] = []

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed_queries(texts)


def test_clauses_are_embedded_in_one_call(dsn: str) -> None:
    embedder = CountingEmbedder()
    with ToolStore(dsn, embedder=embedder, catalog="calls") as store:
        store.upsert(_catalog())
        result = store.route(COMPOUND, k=3)
        assert embedder.calls == [[COMPOUND], result.sub_requests]  # the request, then all its clauses at once
        embedder.calls.clear()
        store.route(COMPOUND, k=3)
        assert embedder.calls == []  # every vector cached in process
        assert all(t.signals.dense is not None for t in result.tools if t.part is None)


def test_a_wrong_count_of_vectors_opens_the_breaker() -> None:
    class Short(HashingEmbedder):
        def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
            return super().embed_queries(texts)[:-1]

    vectors = QueryVectors(cooldown=60)
    with pytest.raises(EmbedderError, match="1 vectors for 2 texts"):
        vectors.get_many(Short(8), ["a b", "c d"])
    with pytest.raises(EmbedderError, match="not retried"):
        vectors.get_many(HashingEmbedder(8), ["e f"])
