"""route() in a conversation: the recent, transition and context signals computed by the one statement equal the
client-side fusion the tuner uses (and the plain oracle), for messages and for sessions; without a conversation
nothing changes; filters, resolution of called names, bounded reading, the async driver."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from toolstore import (
    AsyncToolStore,
    Fusion,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    Judgement,
    SessionCall,
    ToolStore,
    _candidates,
    _route,
    read_messages,
)
from toolstore._candidates import CandidateTable, Transitions
from toolstore._fusion import SIGNALS
from toolstore._lists import Probe, fetch_lists, load_tool_index

from catalog_gen import generated_queries, generated_tools
from fusion_oracle import route_ids

BASE = {"name": 1.0, "description": 1.0, "expansion": 1.0, "dense": 1.0, "intent": 1.0}
FUSIONS = [
    Fusion({**BASE, "recent": 0.0, "transition": 1.0, "context": 0.5}),  # the default
    Fusion({**BASE, "recent": 2.0, "transition": 3.0, "context": 1.5}, k_rrf=15.0),
    Fusion({**BASE, "description": 0.25, "dense": 0.0, "recent": 1.0, "transition": 0.0, "context": 4.0}),
    Fusion({**BASE, "name": 0.0, "recent": 4.0, "transition": 4.0, "context": 0.0}, k_rrf=60.0, overfetch=16),
]


@pytest.fixture(scope="module")
def conversations(server_dsn: str, template_dsn: str) -> Any:
    """A catalog with intent examples and a logged history (random walks with habits, so transitions matter)."""
    import uuid

    from conftest import TEMPLATE, create_database, drop_database

    name = f"toolstore_conv_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    tools = generated_tools(80, seed=4)
    ids = [t.id for t in tools]
    rng = random.Random(8)
    habit = {t: rng.sample(ids, 3) for t in ids}
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="conv") as store:
        store.upsert(tools)
        store.add_examples(IntentExample(rng.choice(ids), q) for q in generated_queries(30, seed=3))
        logs = []
        for s in range(40):
            calls = [rng.choice(ids)]
            for _ in range(rng.randint(1, 9)):
                calls.append(rng.choice(habit[calls[-1]]) if rng.random() < 0.8 else rng.choice(ids))
            logs.append((f"log-{s}", calls))
        store.import_sessions(logs)
        yield store, tools, rng
    drop_database(server_dsn, name)


def _messages(probe: Probe) -> list[dict[str, Any]]:
    """An OpenAI Chat conversation: the earlier turns, then the calls (by tool id), then the request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": text} for text in probe.earlier]
    if probe.history:
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
            for i, tool in enumerate(probe.history)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    return [*messages, {"role": "user", "content": probe.query}]


def _probes(tools: list[Any], rng: random.Random) -> list[Probe]:
    ids = [t.id for t in tools]
    queries = generated_queries(14, seed=31)
    probes = []
    for i, q in enumerate(queries):
        earlier = tuple(generated_queries(i % 4, seed=100 + i))
        history = tuple(rng.choice(ids) for _ in range(rng.randint(0, 7)))
        probes.append(Probe(q, earlier, history))
    probes.append(Probe(f"please run {tools[3].name} now", (queries[0],), (ids[5], ids[5], ids[6])))
    return probes


def _check(store: ToolStore, probes: list[Probe], route: Any) -> int:
    """Every fusion: the statement's top 10 equal CandidateTable's and the oracle's; returns how many routed
    tools a conversation signal ranked."""
    index = load_tool_index(store)
    counts = Transitions({(r["prev_tool"], r["next_tool"]): r["n"] for r in store.transitions(limit=10**6)})
    judgements = [Judgement(str(i), (index.ids[0],)) for i in range(len(probes))]
    fetched: dict[int, Any] = {}
    seen = 0
    for fusion in FUSIONS:
        depth = fusion.depth(10)
        if depth not in fetched:
            lists = fetch_lists(store, probes, depth=depth, leave_one_out=False, tools=index)
            fetched[depth] = lists, CandidateTable(lists, index, judgements, depth, [counts] * len(probes))
        lists, table = fetched[depth]
        top = table.top_ids([fusion.weights[s] for s in SIGNALS], fusion.k_rrf)
        for i, probe in enumerate(probes):
            result = route(probe, k=10, weights=fusion.weights, k_rrf=fusion.k_rrf, overfetch=depth)
            assert route_ids(lists[i], index, fusion, transitions=counts) == result.ids, (probe, fusion)
            assert top[i] == result.ids[:10], (probe, fusion)
            seen += sum(1 for r in result if r.signals.recent or r.signals.transition or r.signals.context)
    return seen


def test_statement_equals_client_side_fusion_with_messages(conversations: Any) -> None:
    store, tools, rng = conversations
    probes = _probes(tools, rng)
    seen = _check(store, probes, lambda p, **o: store.route(messages=_messages(p), turns=len(p.earlier) + 2, **o))
    assert seen > 50  # the conversation signals did rank routed tools


def test_statement_equals_client_side_fusion_with_sessions(conversations: Any) -> None:
    store, tools, rng = conversations
    probes = [Probe(p.query, (), p.history) for p in _probes(tools, rng)]
    for i, probe in enumerate(probes):
        store.import_sessions([(f"probe-{i}", list(probe.history))])
    try:
        by_query = {p.query: f"probe-{i}" for i, p in enumerate(probes)}
        seen = _check(store, probes, lambda p, **o: store.route(p.query, session=by_query[p.query], **o))
        assert seen > 30
    finally:
        for i in range(len(probes)):
            store.prune_sessions(session=f"probe-{i}")


def test_longer_transition_memory_still_matches(conversations: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRANSITION_CALLS above 1 (decayed, smoothed sums over several calls) is the same on both sides."""
    for module in (_route, _candidates):
        monkeypatch.setattr(module, "TRANSITION_CALLS", 3)
    store, tools, rng = conversations
    probes = _probes(tools, rng)
    _check(store, probes, lambda p, **o: store.route(messages=_messages(p), turns=len(p.earlier) + 2, **o))


def test_without_a_conversation_nothing_changes(conversations: Any) -> None:
    store, _, _ = conversations
    for q in generated_queries(8, seed=77):
        off = store.route(q, k=10, weights={**BASE, "recent": 0, "transition": 0, "context": 0})
        on = store.route(q, k=10, weights={**BASE, "recent": 4, "transition": 4, "context": 4})
        assert [(r.tool.id, r.score, r.signals) for r in off] == [(r.tool.id, r.score, r.signals) for r in on]
        assert store.route(q, k=10).ids == off.ids
        assert store.route(q, k=10, session="never-logged").ids == off.ids
        assert store.route(messages=[{"role": "user", "content": q}], k=10).ids == off.ids


def test_signals_filters_and_resolution(conversations: Any) -> None:
    store, tools, _ = conversations
    follows = store.transitions(limit=1)[0]
    prev, nxt = follows["prev_tool"], follows["next_tool"]
    named = next(t for t in tools if t.id == prev)
    calls = [
        {"id": "a", "type": "function", "function": {"name": named.id, "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "no_such_tool", "arguments": "{}"}},
    ]
    messages = [
        {"role": "user", "content": "first things first"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "user", "content": "and the next step"},
    ]
    result = store.route(messages=messages, k=5, weights={"recent": 1.0})
    assert result.unresolved == ["no_such_tool"] and result.query == "and the next step"
    ranks = {r.tool.id: r.signals for r in result}
    assert ranks[nxt].transition == 1 and ranks[prev].recent == 1
    blocked = store.route(messages=messages, k=5, weights={"recent": 1.0}, block=[nxt, prev])
    assert nxt not in blocked.ids and prev not in blocked.ids
    allowed = store.route(messages=messages, k=5, weights={"recent": 1.0}, allow=[nxt])
    assert allowed.ids == [nxt]
    # a name the model was offered (provider__name) resolves like the id
    by_name = [{**calls[0], "function": {"name": f"{named.provider}__{named.name}", "arguments": "{}"}}]
    again = store.route(messages=[*messages[:1], {**messages[1], "tool_calls": by_name}, messages[2]], k=5)
    assert again.unresolved == [] and {r.tool.id: r.signals.transition for r in again}[nxt] == 1
    # with a session, the log is the history: the messages' calls are not looked back on
    logged = store.route(messages=messages, k=5, session="nothing-logged", weights={"recent": 1.0})
    assert not any(r.signals.recent or r.signals.transition for r in logged)
    store.record_calls("has-one", [SessionCall(prev)])
    from_log = store.route("and the next step", k=5, session="has-one")
    assert {r.tool.id: r.signals.transition for r in from_log}[nxt] == 1 and from_log.session == "has-one"
    store.prune_sessions(session="has-one")


def test_only_the_last_turns_are_read(conversations: Any) -> None:
    store, _, _ = conversations
    broken = [{"role": 5, "content": "never read"}]
    filler = [
        m
        for i in range(3000)
        for m in ({"role": "user", "content": f"turn {i}"}, {"role": "assistant", "content": "ok"})
    ]
    messages = [*broken, *filler, {"role": "user", "content": "send the invoice"}]
    assert store.route(messages=messages, turns=4, k=3).query == "send the invoice"
    with pytest.raises(InvalidInputError, match=r"messages\[0\].role"):
        read_messages(messages)  # the whole list: the broken first message is read
    with pytest.raises(InvalidInputError, match=r"messages\[6002\].role"):
        store.route(messages=[*messages, {"role": None}], turns=4, k=3)
    with pytest.raises(InvalidInputError, match="turns must be an integer from 1 to 100"):
        store.route(messages=messages, turns=0)


@pytest.mark.parametrize(
    "options, said",
    [
        ({"turns": 2}, "turns=2 given without messages"),
        ({"dialect": "anthropic"}, "dialect='anthropic' given without messages"),
        ({"turns": 3, "dialect": "openai-chat"}, "turns=3 and dialect='openai-chat' given without messages"),
        ({"dialect": "anthropix"}, "unknown message dialect 'anthropix'"),
    ],
)
def test_turns_or_dialect_without_messages_is_refused(options: dict[str, Any], said: str) -> None:
    """route(turns=...) or route(dialect=...) without messages was ignored: the route ran on the query alone, hiding a
    forgotten messages=. Each is an InvalidInputError naming it (route(), aroute() and route_messages() check so)."""
    with pytest.raises(InvalidInputError, match=said.replace("(", r"\(")):
        _route.check_route("send the invoice", **options)
    assert _route.check_route("send the invoice", messages=[], turns=2, dialect="anthropic").request.earlier == ()


def test_async_route_equals_sync(conversations: Any) -> None:
    store, tools, rng = conversations
    probes = _probes(tools, rng)[:6]
    expected = [store.route(messages=_messages(p), turns=6, k=8, weights={"recent": 1.0}) for p in probes]
    session = store.route("send the weekly report", session="log-3", k=8)

    async def main() -> tuple[list[Any], Any]:
        async with AsyncToolStore(store.dsn, embedder=HashingEmbedder(64), catalog="conv") as astore:
            got = [await astore.route(messages=_messages(p), turns=6, k=8, weights={"recent": 1.0}) for p in probes]
            return got, await astore.route("send the weekly report", session="log-3", k=8)

    got, asession = asyncio.run(main())
    assert [[(r.tool.id, r.signals) for r in x] for x in got] == [[(r.tool.id, r.signals) for r in x] for x in expected]
    assert [(r.tool.id, r.signals) for r in asession] == [(r.tool.id, r.signals) for r in session]
