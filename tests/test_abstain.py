"""Abstention: the evidence, the decision in route() (sync and async, always-on tools kept), calibration through
tune(negatives=...), the negatives file and bad input, the CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psycopg
import pytest
from test_cli import run, write_jsonl

from toolstore import (
    Anchor,
    AsyncToolStore,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    Judgement,
    Tool,
    ToolStore,
)
from toolstore._abstain import (
    DEFAULT_ABSTAIN,
    DEFAULT_EMBED_MODEL,
    EXAMPLES_ABSTAIN,
    FEATURES,
    AbstainModel,
    best_threshold,
    features,
    fit,
    load_negatives,
    stored_abstain,
)
from toolstore._calibrate import evidence
from toolstore._fusion import Fusion, check_weights
from toolstore._sql import query
from toolstore.cli.report import tune_summary

TOOLS = [
    Tool(
        id="slack.send_message", name="send_message", provider="slack", description="Post a message to a Slack channel"
    ),
    Tool(id="slack.list_channels", name="list_channels", provider="slack", description="List the Slack channels"),
    Tool(id="github.create_issue", name="create_issue", provider="github", description="Open an issue in a repository"),
    Tool(id="github.list_pulls", name="list_pulls", provider="github", description="List pull requests of a repo"),
    Tool(id="weather.forecast", name="forecast", provider="weather", description="Weather forecast for a city"),
    Tool(id="stripe.list_charges", name="list_charges", provider="stripe", description="List payment charges"),
    Tool(id="stripe.refund", name="refund", provider="stripe", description="Refund a payment charge"),
    Tool(id="gmail.send_email", name="send_email", provider="gmail", description="Send an email message"),
]
SERVED = [
    ("post a message to the team slack channel", "slack.send_message"),
    ("send a slack message about the release", "slack.send_message"),
    ("which slack channels exist", "slack.list_channels"),
    ("list channels in slack", "slack.list_channels"),
    ("open an issue about the login bug in the repository", "github.create_issue"),
    ("create a github issue for the crash", "github.create_issue"),
    ("list the open pull requests of the repo", "github.list_pulls"),
    ("show pull requests waiting for review", "github.list_pulls"),
    ("weather forecast for Paris tomorrow", "weather.forecast"),
    ("will it rain in the city this weekend forecast", "weather.forecast"),
    ("list the payment charges from last week", "stripe.list_charges"),
    ("show failed payment charges", "stripe.list_charges"),
    ("refund the payment charge of this customer", "stripe.refund"),
    ("issue a refund for the duplicate payment", "stripe.refund"),
    ("send an email message to the landlord", "gmail.send_email"),
    ("email the invoice to accounting", "gmail.send_email"),
]
UNSERVED = [
    "bake a chocolate cake with three eggs",
    "who painted the mona lisa",
    "translate good morning into japanese",
    "what is the square root of two hundred",
    "recommend a novel about dragons",
    "how tall is mount everest",
    "play some jazz music",
    "book a table for dinner tonight",
    "what year did the roman empire fall",
    "teach me how to knit a scarf",
    "find a yoga class near me",
    "how many calories are in an apple",
]
OFF_TOPIC = "bake a sourdough bread with rye flour"
ON_TOPIC = "post a slack message to the team channel"


def examples() -> list[tuple[str, Judgement]]:
    return [(q, Judgement(f"q{i}", (t,))) for i, (q, t) in enumerate(SERVED)]


@pytest.fixture
def store(dsn: str):
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="abstain") as s:
        s.upsert(TOOLS)
        yield s


def test_features_from_ranks() -> None:
    weights = dict.fromkeys(("name", "description", "expansion", "dense", "intent"), 1.0)
    cands = [("a", {"name": 1, "description": 2, "dense": 5}), ("b", {"name": 2, "description": 1})]
    available = ["name", "description", "dense"]  # no expansion text, no intent examples
    top, values = features(cands, weights, 5.0, available, 0.4, None)
    best = 3 / 6
    a, b = 1 / 6 + 1 / 7 + 1 / 10, 1 / 7 + 1 / 6
    assert top == "a"
    assert values["agreement"] == pytest.approx(2 / 3)  # dense ranks it 5th: no vote
    assert values["strength"] == pytest.approx(a / best)
    assert values["margin"] == pytest.approx((a - b) / best)
    assert (values["dense_sim"], values["intent_sim"]) == (0.4, 0.0)
    # no candidate: no top tool, zero evidence; a retriever that is off does not count
    assert features([], weights, 5.0, available, None, None) == (None, dict.fromkeys(FEATURES, 0.0))
    _, off = features(cands, {**weights, "dense": 0.0}, 5.0, available, 0.4, None)
    assert off["agreement"] == 1.0


def test_fit_separates_and_picks_the_threshold() -> None:
    rng = np.random.default_rng(0)
    pos = rng.normal(0.7, 0.1, (60, len(FEATURES)))
    neg = rng.normal(0.2, 0.1, (90, len(FEATURES)))
    model = fit(pos, neg)
    assert all(model.probability(r) >= model.threshold for r in pos)
    assert all(model.probability(r) < model.threshold for r in neg)
    assert 0 < best_threshold(model, pos, neg) < 1
    with pytest.raises(InvalidInputError, match="at least 2 served and 2 unserved"):
        fit(pos, neg[:1])


def test_route_abstains_off_topic_and_not_on_topic(store: ToolStore) -> None:
    off = store.route(OFF_TOPIC, abstain=True)
    assert off.abstained and off.tools == [] and off.abstention is not None
    assert off.abstention.probability < off.abstention.threshold and off.abstention.model == "default-rank"
    on = store.route(ON_TOPIC, abstain=True, k=1)  # k=1 still sees a second tool for the margin
    assert not on.abstained and on.ids == ["slack.send_message"]
    assert on.abstention is not None and on.abstention.top == "slack.send_message"
    assert on.abstention.features["margin"] > 0
    plain = store.route(OFF_TOPIC)  # without abstain nothing changes
    assert plain.abstention is None and not plain.abstained
    named = store.route("bake bread with stripe.refund", abstain=True)  # names a tool: never abstained on
    assert not named.abstained and named.ids[0] == "stripe.refund"
    assert named.abstention is not None and named.abstention.reason == "the request names a tool"


class Shipped(HashingEmbedder):
    """Hashing vectors under the shipped model's name (the default that weighs similarities applies); ``fail``
    makes route-time embedding fail (dense retrieval down)."""

    fail = False

    def __init__(self) -> None:
        super().__init__(64)
        self.model = DEFAULT_EMBED_MODEL

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise ConnectionError("provider down")
        return super().embed_batch(texts)


def test_the_default_model_follows_the_embedder(dsn: str, store: ToolStore) -> None:
    """Similarities only mean something for the model the default was fitted with: any other embedder, no embedder
    and a failed embedding get the rank-only default."""
    assert store.route(ON_TOPIC, abstain=True).abstention.model == "default-rank"  # type: ignore[union-attr]
    with ToolStore(dsn, embedder=None, catalog="abstain", create=False) as lexical:
        assert lexical.route(ON_TOPIC, abstain=True).abstention.model == "default-rank"  # type: ignore[union-attr]
    embedder = Shipped()
    with ToolStore(dsn, embedder=embedder, catalog="shipped") as shipped:
        shipped.upsert(TOOLS)
        result = shipped.route(ON_TOPIC, abstain=True)
        assert result.dense_used and result.abstention is not None and result.abstention.model == "default"
        assert result.abstention.probability == pytest.approx(
            DEFAULT_ABSTAIN.probability([result.abstention.features[f] for f in FEATURES])
        )
        shipped.add_examples([IntentExample(t, q) for q, t in SERVED])
        examples = shipped.route(ON_TOPIC, abstain=True).abstention  # intent examples searched: their default
        assert examples is not None and examples.model == "default-examples" and examples.features["intent_sim"] > 0
        assert examples.probability == pytest.approx(
            EXAMPLES_ABSTAIN.probability([examples.features[f] for f in FEATURES])
        )
        no_intent = shipped.route(ON_TOPIC, abstain=True, weights={"intent": 0}).abstention
        assert no_intent is not None and no_intent.model == "default"
        embedder.fail = True
        degraded = shipped.route(OFF_TOPIC, abstain=True)
        assert not degraded.dense_used and degraded.abstention is not None
        assert degraded.abstention.model == "default-rank" and degraded.abstention.features["dense_sim"] == 0


def test_abstain_keeps_always_on_tools(store: ToolStore) -> None:
    ask = Tool(id="core.ask_user", name="ask_user", description="Ask the user a question", always_on=True)
    store.upsert([ask])
    off = store.route(OFF_TOPIC, abstain=True, token_budget=5000)
    assert off.abstained and off.ids == ["core.ask_user"] and off.skipped == []
    on = store.route(ON_TOPIC, abstain=True)
    assert not on.abstained and on.ids[:2] == ["core.ask_user", "slack.send_message"]


def test_the_evidence_is_the_requests_own_whatever_moves_the_final_order(store: ToolStore) -> None:
    """Anchors, a conversation and k=1 reorder (or cut) the rows route() returns; the evidence still ranks the
    request's own candidates, as calibration does."""
    store.add_anchors([Anchor(r"\mcustomer\M", "weather.forecast", 1.0)])
    text = "refund the payment charge of this customer"
    rows, _ = evidence(store, [text], Fusion(weights=check_weights({})))
    calls = [
        {"role": "user", "content": "what is the weather"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "forecast"}}]},
        {"role": "user", "content": text},
    ]
    for options in ({"k": 1}, {"k": 1, "messages": calls, "weights": {"recent": 2.0}}):
        result = store.route(text if "messages" not in options else None, abstain=True, **options)  # type: ignore[arg-type]
        assert result.abstention is not None and result.abstention.top == "stripe.refund", options
        assert [result.abstention.features[f] for f in FEATURES] == pytest.approx(list(rows[0]), abs=1e-6), options


def test_the_evidence_reads_as_deep_as_the_lists_go(store: ToolStore) -> None:
    """An over-fetch under the evidence's depth ends the lists there: calibration reads them as deep as route()."""
    requests = [q for q, _ in SERVED]
    for overfetch in (2, 5):
        store.set_fusion(weights={}, overfetch=overfetch)
        rows, _ = evidence(store, requests, Fusion(weights=check_weights({}), overfetch=overfetch))
        for text, row in zip(requests, rows):
            got = store.route(text, abstain=True).abstention
            assert got is not None
            assert [got.features[f] for f in FEATURES] == pytest.approx(list(row), abs=1e-6), (text, overfetch)


def test_route_evidence_equals_calibration_evidence(store: ToolStore) -> None:
    """route() reads the evidence off the statement, calibration off `_candidates` lists: the same numbers, with
    intent examples and with a retriever switched off."""
    store.add_examples([IntentExample(t, q) for q, t in SERVED[::2]])
    requests = [ON_TOPIC, OFF_TOPIC, *(q for q, _ in SERVED[1::2]), *UNSERVED[:4]]
    for weights in ({}, {"dense": 0.0, "name": 2.0}):
        fusion = Fusion(weights=check_weights(weights))
        rows, exact = evidence(store, requests, fusion)
        assert not exact.any()
        for text, row in zip(requests, rows):
            got = store.route(text, abstain=True, weights=weights or None).abstention
            assert got is not None
            assert [got.features[f] for f in FEATURES] == pytest.approx(list(row), abs=1e-6), (text, weights)
        assert rows[:, FEATURES.index("intent_sim")].max() > 0
        assert (rows[:, FEATURES.index("dense_sim")].max() > 0) == (not weights)


def test_tune_with_negatives_stores_a_calibrated_model(store: ToolStore) -> None:
    assert "abstain" not in store.info().settings
    report = store.tune(examples(), negatives=UNSERVED)
    assert report.abstain is not None and report.abstain["n_served"] == len(SERVED)
    assert report.abstain["n_unserved"] == len(UNSERVED) and report.abstain["cv"] is not None
    stored = stored_abstain(store.info().settings)
    assert stored.source == "calibrated" and stored != DEFAULT_ABSTAIN
    assert stored.as_dict() == report.abstain["model"]
    assert store.info().settings["fusion"] == report.fusion.as_dict()  # stored in the same write
    result = store.route(OFF_TOPIC, abstain=True)
    assert result.abstention is not None and result.abstention.model == "calibrated"
    assert result.abstention.threshold == pytest.approx(stored.threshold)
    assert result.abstained and not store.route(ON_TOPIC, abstain=True).abstained
    store.set_abstain(None)
    assert stored_abstain(store.info().settings) == DEFAULT_ABSTAIN
    # without save nothing is stored
    store.tune(examples(), negatives=UNSERVED, save=False)
    assert stored_abstain(store.info().settings) == DEFAULT_ABSTAIN


def test_bad_negatives_are_clear_errors_and_store_nothing(store: ToolStore, tmp_path: Path) -> None:
    before = store.info().settings
    cases = [
        ([*UNSERVED[:3], SERVED[0][0]], "also one of the served examples"),
        (42, "negatives must be a file path or a list"),
        (["fine request", ""], "negative request #2"),
        (UNSERVED[:1], "at least 2 served and 2 unserved"),
    ]
    for negatives, message in cases:
        with pytest.raises(InvalidInputError, match=message):
            store.tune(examples(), negatives=negatives)
    with pytest.raises(InvalidInputError, match="needs examples"):
        store.tune(negatives=UNSERVED)
    mine = write_jsonl(tmp_path / "mine.jsonl", [{"query": "x y", "relevant": ["stripe.refund"]}, {"query": "z w"}])
    with pytest.raises(InvalidInputError, match=r"names tool\(s\) of this catalog as relevant \(stripe.refund\)"):
        store.tune(examples(), negatives=mine)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "a b"}\n\n{"query": 3}\n')
    with pytest.raises(InvalidInputError, match=r"bad.jsonl line 3: 'query' must be a non-empty string"):
        store.tune(examples(), negatives=bad)
    bad.write_text('{"query": "a b"}\n{not json\n')
    with pytest.raises(InvalidInputError, match="line 2, column 2: invalid JSON"):
        store.tune(examples(), negatives=bad)
    bad.write_text("\n  \n")
    with pytest.raises(InvalidInputError, match="no requests found"):
        store.tune(examples(), negatives=bad)
    with pytest.raises(InvalidInputError, match="abstain must be True or False"):
        store.route(ON_TOPIC, abstain="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="finite coefficients"):
        store.set_abstain(AbstainModel((1.0,), 0.0, 0.5))
    with pytest.raises(InvalidInputError, match="threshold must be from 0 to 1"):
        store.set_abstain(AbstainModel((0.0,) * len(FEATURES), 0.0, 1.5))
    with pytest.raises(InvalidInputError, match="fusion must be a toolstore.Fusion, got dict"):  # an AttributeError
        store.set_abstain(None, fusion={"weights": {"dense": 1.0}})  # type: ignore[arg-type]
    assert store.info().settings == before


def test_a_negatives_file_request_the_catalog_serves_is_named_by_its_file_and_line(
    store: ToolStore, tmp_path: Path
) -> None:
    """A negatives file's request naming a tool of the catalog, or one of the served examples, was said as 'negative
    request #2' (counting non-blank lines, no file named: `toolstore tune` blames no file of the several it reads);
    it is said by its file and line, as the reader's own errors are. A list's request keeps its number."""
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"query": "z w"}\n\n{"query": "x y", "relevant": ["stripe.refund"]}\n')
    with pytest.raises(InvalidInputError) as raised:
        store.tune(examples(), negatives=mine)
    assert str(raised.value) == (
        f"{mine} line 3 ('x y') names tool(s) of this catalog as relevant (stripe.refund): negatives must be requests"
        " no tool of the catalog fits"
    )
    served = tmp_path / "served.txt"
    served.write_text(f"{UNSERVED[0]}\n\n\n{SERVED[0][0]}\n")
    with pytest.raises(InvalidInputError) as raised:
        store.tune(examples(), negatives=served)
    assert str(raised.value) == f"{served} line 4 ({SERVED[0][0][:60]!r}) is also one of the served examples"
    with pytest.raises(InvalidInputError, match=r"^negative request #2 \("):
        store.tune(examples(), negatives=[UNSERVED[0], SERVED[0][0]])


def test_negatives_file_formats(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("bake a cake\n\n  who won the match \n")
    assert load_negatives(plain) == [
        ("bake a cake", (), f"{plain} line 1"),
        ("who won the match", (), f"{plain} line 3"),
    ]
    other = write_jsonl(tmp_path / "other.jsonl", [{"qid": "1", "query": "q", "relevant": ["x.y"], "acceptable": []}])
    assert load_negatives(other) == [("q", ("x.y",), f"{other} line 1")]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"query": "q", "relevant": "x.y"}])
    with pytest.raises(InvalidInputError, match="'relevant' must be a list of tool ids"):
        load_negatives(bad)


def test_a_negative_request_route_would_refuse_names_its_file_and_line(tmp_path: Path) -> None:
    """A negatives file's request that route() refuses (a NUL byte, over 20,000 characters) passed load_negatives and
    failed later in tune() as 'negative request #2', naming neither file nor line; the reader refuses it, naming both,
    in either format, as the other labelled files' readers do."""
    jsonl = write_jsonl(tmp_path / "negatives.jsonl", [{"query": "bake a cake"}, {"query": "bake\x00a cake"}])
    with pytest.raises(InvalidInputError) as raised:
        load_negatives(jsonl)
    assert str(raised.value) == f"{jsonl} line 2: 'query' contains a NUL byte"
    plain = tmp_path / "negatives.txt"
    plain.write_text("bake a cake\n\n" + "a" * 20_001 + "\n")
    with pytest.raises(InvalidInputError) as raised:
        load_negatives(plain)
    assert str(raised.value) == f"{plain} line 3: the request is 20,001 characters long; the limit is 20,000"


def test_tune_reads_the_expansions_lines_once(store: ToolStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """tune(negatives=...) read which lines of tools' expansions copy a request (block eval_expansion_lines) for its
    count of copies, again for the examples' lists and again for each calibration's (four reads); it reads them once
    and passes them on (no behaviour change: test_eval's expansion tests hold the lists and the count of copies)."""
    statement = query("eval_expansion_lines")
    reads: list[str] = []
    execute = psycopg.Connection.execute

    def counted(conn: psycopg.Connection[Any], text: Any, *args: Any, **kwargs: Any) -> Any:
        if text == statement:
            reads.append(text)
        return execute(conn, text, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    report = store.tune(examples(), negatives=UNSERVED, save=False)
    assert len(reads) == 1 and report.abstain is not None


def test_async_store_abstains_and_calibrates(dsn: str, store: ToolStore) -> None:
    async def main() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="abstain") as astore:
            off = await astore.route(OFF_TOPIC, abstain=True)
            assert off.abstained and off.tools == []
            assert not (await astore.route(ON_TOPIC, abstain=True)).abstained
            report = await astore.tune(examples(), negatives=UNSERVED)
            assert report.abstain is not None
            calibrated = await astore.route(OFF_TOPIC, abstain=True)
            assert calibrated.abstention is not None and calibrated.abstention.model == "calibrated"

    anyio.run(main)


def test_cli_route_abstain_and_tune_negatives(dsn: str, tmp_path: Path) -> None:
    rows = [{"id": t.id, "name": t.name, "provider": t.provider, "description": t.description} for t in TOOLS]
    tools = write_jsonl(tmp_path / "tools.jsonl", rows)
    run(dsn, "-c", "cli-abstain", "import", str(tools))
    out = json.loads(run(dsn, "-c", "cli-abstain", "--json", "route", OFF_TOPIC, "--abstain").stdout)
    assert out["abstained"] is True and out["tools"] == [] and out["abstention"]["model"] == "default-rank"
    assert set(out["abstention"]["features"]) == set(FEATURES)
    out = json.loads(run(dsn, "-c", "cli-abstain", "--json", "route", ON_TOPIC).stdout)
    assert out["abstained"] is False and "abstention" not in out
    table = run(dsn, "-c", "cli-abstain", "route", OFF_TOPIC, "--abstain", "--format", "table", "--explain").stdout
    assert "abstained: no tool fits the request" in table and "evidence: agreement" in table
    labelled = [{"qid": j.qid, "query": q, "relevant": list(j.relevant)} for q, j in examples()]
    train = write_jsonl(tmp_path / "train.jsonl", labelled)
    negatives = tmp_path / "negatives.txt"
    negatives.write_text("\n".join(UNSERVED) + "\n")
    report = json.loads(
        run(dsn, "-c", "cli-abstain", "--json", "tune", "--examples", str(train), "--negatives", str(negatives)).stdout
    )
    assert report["abstain"]["model"]["source"] == "calibrated"
    assert "abstention: 16 served, 12 unserved requests; threshold" in tune_summary(report)
    err = run(dsn, "-c", "cli-abstain", "tune", "--negatives", str(negatives), check=False)
    assert err.returncode != 0 and "--negatives needs --examples" in err.stderr
    out = json.loads(run(dsn, "-c", "cli-abstain", "--json", "route", OFF_TOPIC, "--abstain").stdout)
    assert out["abstention"]["model"] == "calibrated"
