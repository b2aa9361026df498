"""route()'s filters (providers, tags, categories, allow/block with globs), values that match nothing, small filtered
sets at 10k tools, and the avoid-when penalty."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql
from test_cli import run

from toolstore import Anchor, HashingEmbedder, IntentExample, InvalidInputError, Judgement, RoutedTool, Tool, ToolStore
from toolstore._fusion import DEFAULT_AVOID

from catalog_gen import generated_queries, generated_tools
from conftest import TEMPLATE, create_database, drop_database

TOOLS = [
    Tool(id="slack.send_message", name="send_message", provider="slack", description="Post a message to a channel",
         tags=("chat",), categories=("communication",)),
    Tool(id="slack.list_channels", name="list_channels", provider="slack", description="List the workspace channels",
         tags=("chat", "read"), categories=("communication",)),
    Tool(id="gmail.send_email", name="send_email", provider="gmail", description="Send an email message to someone",
         tags=("mail",), categories=("communication",)),
    Tool(id="linear.create_issue", name="create_issue", provider="linear", description="File an issue for a bug",
         tags=("tickets",), categories=("developer",)),
    Tool(id="stripe.list_charges", name="list_charges", provider="stripe", description="List payments and charges",
         categories=("finance",)),
    Tool(id="core.help", name="help", provider="core", description="Explain what the assistant can do",
         always_on=True),
]  # fmt: skip


@pytest.fixture
def catalog(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    return store


def ids(store: ToolStore, text: str, **options: object) -> list[str]:
    return [r.tool.id for r in store.route(text, k=8, **options) if not r.always_on]  # type: ignore[arg-type]


def test_providers_tags_and_globs(catalog: ToolStore) -> None:
    text = "send a message about the failed payments bug"
    assert set(ids(catalog, text, providers=["slack"])) == {"slack.send_message", "slack.list_channels"}
    assert set(ids(catalog, text, providers=["slack", "stripe"])) == {
        "slack.send_message",
        "slack.list_channels",
        "stripe.list_charges",
    }
    assert set(ids(catalog, text, tags=["mail", "tickets"])) == {"gmail.send_email", "linear.create_issue"}
    assert set(ids(catalog, text, allow=["slack.*"])) == {"slack.send_message", "slack.list_channels"}
    assert set(ids(catalog, text, allow=["slack.list_channel?", "gmail.send_email"])) == {
        "slack.list_channels",
        "gmail.send_email",
    }
    assert "slack.send_message" not in ids(catalog, text, block=["slack.*"])
    assert set(ids(catalog, text, providers=["slack"], tags=["read"])) == {"slack.list_channels"}  # all must hold
    explained = catalog.route(text, providers=["slack"], tags=["read"], allow=["slack.*"]).explain()["request"][
        "filters"
    ]
    assert explained == {"allow": ["slack.*"], "providers": ["slack"], "tags": ["read"]}
    assert set(ids(catalog, text, categories=["communication"], block=["*.send_*"])) == {"slack.list_channels"}
    # always-on tools stay (allow/providers/tags do not remove them); a block removes them
    result = catalog.route(text, providers=["stripe"])
    assert [r.tool.id for r in result if r.always_on] == ["core.help"]
    assert "core.help" not in catalog.route(text, block=["core.*"]).ids


def test_a_filter_value_that_matches_nothing_is_an_error_naming_it(catalog: ToolStore) -> None:
    with pytest.raises(InvalidInputError, match="match no tool of the catalog: allow 'slak.\\*', provider 'slak'"):
        catalog.route("send a message", allow=["slack.*", "slak.*"], providers=["slack", "slak"])
    with pytest.raises(InvalidInputError, match="category 'finanse', tag 'urgent'"):
        catalog.route("send a message", categories=["finanse"], tags=["urgent"])
    with pytest.raises(InvalidInputError, match="allow 'slack.nope'"):
        catalog.route("zzzz qqqq", allow=["slack.nope"])  # raised even when no retriever finds anything
    assert catalog.route("send a message", block=["nope.*"]).ids  # block values are not checked
    # both filters match, their intersection is empty: an empty result, not an error
    assert ids(catalog, "send a message", providers=["stripe"], tags=["chat"]) == []


@pytest.mark.parametrize("option", ["allow", "providers", "categories", "tags"])
def test_an_empty_list_keeps_no_tool_in_any_part_of_the_route(catalog: ToolStore, option: str) -> None:
    catalog.add_anchors([Anchor(pattern="payments", tool="stripe.list_charges", boost=1.0)])
    text = "post with slack.send_message about the failed payments"  # an exact match and an anchor
    assert {"slack.send_message", "stripe.list_charges"} <= set(ids(catalog, text))
    result = catalog.route(text, **{option: []})  # type: ignore[arg-type]
    assert [r.tool.id for r in result] == ["core.help"]  # the always-on tool only
    assert set(ids(catalog, text, block=[])) == set(ids(catalog, text))  # an empty block list blocks nothing


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("providers", "slack", "providers must be a list of strings"),
        ("tags", [3], "tags value must be a string"),
        ("providers", [""], "providers value is empty"),
        ("tags", ["x"] * 10_001, "tags holds 10,001 values"),
    ],
)
def test_bad_filter_arguments(catalog: ToolStore, option: str, value: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        catalog.route("send a message", **{option: value})  # type: ignore[arg-type]


def test_cli_provider_tag_and_glob_filters(catalog: ToolStore, dsn: str) -> None:
    out = run(
        dsn, "--embedder", "hashing-64", "-c", "test", "route", "send a message", "--provider", "slack", "--tag", "read"
    )
    assert [t["id"] for t in json.loads(out.stdout)["tools"] if not t["always_on"]] == ["slack.list_channels"]
    out = run(dsn, "--embedder", "hashing-64", "-c", "test", "route", "send a message", "--allow", "gmail.*")
    assert [t["id"] for t in json.loads(out.stdout)["tools"] if not t["always_on"]] == ["gmail.send_email"]
    bad = run(
        dsn, "--embedder", "hashing-64", "-c", "test", "route", "send a message", "--provider", "slak", check=False
    )
    assert bad.returncode == 1 and "provider 'slak'" in bad.stderr


def penalty(r: RoutedTool) -> float:
    """What the avoid-when penalty took off a routed tool's score (positive)."""
    return -r.adjustments.get("avoid_penalty", 0.0)


def test_avoid_when_demotes_the_tool_whose_avoid_text_the_request_matches(store: ToolStore) -> None:
    """Two tools alike but for one's avoid-when text: the request about that case gets the other one first."""
    alike = "Send a short message to a person"
    store.upsert(
        [
            Tool(id="a.send", name="send", description=alike, avoid_when="urgent pages for the on-call engineer"),
            Tool(id="b.send", name="send", description=alike),
            Tool(id="c.list", name="list", description="List the people in the team"),
        ]
    )
    text = "send an urgent message to the on-call engineer"
    store.set_fusion(weights={}, avoid=0.0)
    off = store.route(text, k=3)
    assert off.ids[:2] == ["a.send", "b.send"] and all(penalty(r) == 0 for r in off)
    store.set_fusion(weights={})  # the default weight
    on = store.route(text, k=3)
    assert on.ids[:2] == ["b.send", "a.send"]
    penalised = {r.tool.id: penalty(r) for r in on if penalty(r)}
    assert list(penalised) == ["a.send"]
    fused = next(r for r in off if r.tool.id == "a.send").score
    # 3 of the request's 5 terms (urgent, on-call -> call, engineer ...) are in the avoid-when text: the default
    # weight times that fraction of the fused score comes off
    a = next(r for r in on if r.tool.id == "a.send")
    assert a.score == pytest.approx(fused - penalty(a))
    assert 0 < penalty(a) < DEFAULT_AVOID * fused
    # a request with nothing in common with the avoid-when text is not touched
    assert all(penalty(r) == 0 for r in store.route("send a short message to a person", k=3))
    with pytest.raises(InvalidInputError, match="avoid must be a number from 0 to 1"):
        store.set_fusion(weights={}, avoid=1.5)
    # route(avoid=...) overrides the catalog's weight for one call, as weights= does
    assert store.route(text, k=3, avoid=0.0).ids == off.ids
    store.set_fusion(weights={}, avoid=0.0)
    assert store.route(text, k=3, avoid=DEFAULT_AVOID).ids == on.ids
    with pytest.raises(InvalidInputError, match="avoid must be a number from 0 to 1"):
        store.route(text, avoid=-0.5)


def test_evaluate_scores_each_config_with_its_own_avoid_weight(store: ToolStore) -> None:
    """evaluate()'s built-in configs are whole fusions: the catalog's stored avoid-when weight (which tune sets) does
    not leak into `default`."""
    from toolstore._eval import evaluate
    from toolstore._fusion import DEFAULT_FUSION

    alike = "Send a short message to a person"
    store.upsert(
        [
            Tool(id="a.send", name="send", description=alike, avoid_when="urgent pages for the on-call engineer"),
            Tool(id="b.send", name="send", description=alike),
        ]
    )
    queries = [("send an urgent message to the on-call engineer", Judgement("q", ("a.send",)))]
    before = evaluate(store, queries, configs={"default": DEFAULT_FUSION})["configs"]["default"]["nDCG@10"]
    store.set_fusion(weights={}, avoid=0.0)
    after = evaluate(store, queries, configs={"default": DEFAULT_FUSION})["configs"]["default"]["nDCG@10"]
    assert after == before < 1.0  # the default penalty still puts b.send first


def test_tune_learns_the_avoid_weight_where_tools_have_avoid_when_text(store: ToolStore) -> None:
    """Labels that contradict a tool's avoid-when text: tuning turns the penalty down (0), where the default would
    demote the labelled tool; a catalog without avoid-when text keeps the default."""
    alike = "Send a short message to a person"
    store.upsert(
        [
            Tool(id="a.send", name="send", description=alike, avoid_when="urgent pages for the on-call engineer"),
            Tool(id="b.send", name="send", description=alike),
            Tool(id="c.list", name="list", description="List the people in the team"),
        ]
    )
    requests = ["send an urgent page to the on-call engineer", "urgent: message the engineer on call",
                "page the on-call engineer now, urgent", "send the engineer an urgent message"]  # fmt: skip
    examples = [(q, Judgement(qid=str(i), relevant=("a.send",))) for i, q in enumerate(requests)]
    report = store.tune(examples, folds=2)
    assert report.tuned.avoid == 0.0 and report.cv_ndcg_tuned > report.cv_ndcg_uniform
    assert store.route(requests[0], k=2).ids[0] == "a.send"
    store.upsert([Tool(id="a.send", name="send", description=alike), Tool(id="b.send", name="send", description=alike)])
    assert store.tune(examples, folds=2, save=False).tuned.avoid == DEFAULT_AVOID


# -- small filtered sets at 10k tools ------------------------------------------------------------------------------

N_TOOLS = 10_000
RARE = 15


@pytest.fixture(scope="module")
def big(server_dsn: str, template_dsn: str) -> Iterator[ToolStore]:
    """10k generated tools (hashing vectors: cheap; 384 dimensions, as the local model's, since the plans knn() gets
    depend on the rows' width), of which RARE have provider `rare` and tag `few`, with intent examples for every tool
    of those and every tenth of the rest."""
    name = f"toolstore_test_filters_{uuid.uuid4().hex[:8]}"
    dsn = create_database(server_dsn, name, template=TEMPLATE)
    tools = generated_tools(N_TOOLS, seed=5)
    rare = set(range(0, N_TOOLS, N_TOOLS // RARE))
    tools = [dataclasses.replace(t, provider="rare", tags=("few",)) if i in rare else t for i, t in enumerate(tools)]
    queries = generated_queries(N_TOOLS, seed=6)
    examples = [IntentExample(t.id, queries[i]) for i, t in enumerate(tools) if i in rare or i % 10 == 0]
    with ToolStore(dsn, embedder=HashingEmbedder(384), catalog="big") as s:
        s.upsert(tools)
        s.add_examples(examples)
        s.analyze()
        yield s
    drop_database(server_dsn, name)


@pytest.mark.parametrize("option", [{"providers": ["rare"]}, {"tags": ["few"]}])
def test_a_small_filtered_set_at_10k_tools_returns_k_tools_from_dense_and_intent(
    big: ToolStore, option: dict[str, list[str]]
) -> None:
    for text in generated_queries(5, seed=8):
        result = big.route(text, k=8, **option)  # type: ignore[arg-type]
        assert len(result) == 8
        assert all(r.tool.provider == "rare" for r in result)
        assert all(r.signals.dense is not None for r in result), [r.signals for r in result]
        assert sum(r.signals.intent is not None for r in result) == 8
    # the dense list holds every kept tool: exact search over the 15, not an HNSW walk that finds a few
    lexical_off = big.route(generated_queries(1, seed=8)[0], k=RARE, weights={"name": 0, "description": 0,
                            "expansion": 0}, **option)  # type: ignore[arg-type]  # fmt: skip
    assert len(lexical_off) == RARE and all(r.signals.dense is not None for r in lexical_off)


DENSE_ONLY = {"name": 0, "description": 0, "expansion": 0, "intent": 0}


def test_a_large_filtered_set_at_10k_tools_still_fills_k(big: ToolStore) -> None:
    """A category keeping about a quarter of the catalog: iterative HNSW, filtered row by row."""
    for text in generated_queries(3, seed=9):
        result = big.route(text, k=8, categories=["finance"], block=["*.send*"])
        assert len(result) == 8
        assert all("finance" in r.tool.categories and ".send" not in r.tool.id for r in result)
        dense = big.route(text, k=8, categories=["finance"], block=["*.send*"], weights=DENSE_ONLY)
        assert len(dense) == 8 and all(r.signals.dense is not None for r in dense)


@pytest.mark.parametrize("table, limit", [("tool_vectors", 40), ("intent_examples", 120)])
@pytest.mark.parametrize("kept_count", [RARE, 60, 400, 2000])
def test_knn_over_a_kept_set_is_the_exact_nearest(big: ToolStore, table: str, limit: int, kept_count: int) -> None:
    """knn()'s kept-set branch is exact whatever plan Postgres would choose. At 384 dimensions and a few dozen kept
    tools, ordering by the distance let the planner walk the catalog's HNSW index (ef_search rows) and join the
    kept set afterwards: 1 row of 40 at 42 kept tools of 10k (migration 0014)."""
    info = big.info()
    qvec = big.embedder.embed_batch([generated_queries(1, seed=11)[0]])[0]
    with big.pool.connection() as conn:
        listed = sql.SQL("select distinct tool_pk from {} where catalog_id = %s order by 1").format(
            sql.Identifier(table)
        )
        pks = [r[0] for r in conn.execute(listed, [info.id])]  # the tools with a vector in the table
        kept = pks[3 :: max(1, len(pks) // kept_count)][:kept_count]
        got = conn.execute(
            "select tool_pk, distance from knn(%s, %s, %s, %s, %s, %s::bigint[])",
            [table, info.id, info.embed_dim, qvec, limit, kept],
        ).fetchall()
        exact = sql.SQL(
            "select v.tool_pk, (v.embedding <=> %s)::float8 from {} v "
            "where v.catalog_id = %s and v.tool_pk = any (%s::bigint[])"
        ).format(sql.Identifier(table))
        with conn.transaction():  # a sequential scan: no index can cut the list short
            conn.execute("set local enable_indexscan = off")
            conn.execute("set local enable_bitmapscan = off")
            every = sorted(conn.execute(exact, [qvec, info.id, kept]).fetchall(), key=lambda r: (r[1], r[0]))
    assert len(every) >= len(kept) and len(got) == min(limit, len(every))
    assert [pk for pk, _ in got] == [pk for pk, _ in every[:limit]]
    assert [d for _, d in got] == pytest.approx([d for _, d in every[:limit]])


BLOCK_MOST = ["*.send*", "slack.*"]  # keeps most of the catalog: route_kept() lists the dropped tools


@pytest.mark.parametrize("table, limit", [("tool_vectors", 40), ("intent_examples", 120)])
@pytest.mark.parametrize("dropped_count", [RARE, 3000])
def test_knn_over_a_dropped_set_finds_what_its_kept_complement_finds(
    big: ToolStore, table: str, limit: int, dropped_count: int
) -> None:
    """knn() given the tools to leave out (migration 0016) returns the rows it returns given the rest: the same
    iterative HNSW scan with the membership test inverted. The query's nearest tools are among those left out, so the
    scan has to go past them."""
    info = big.info()
    qvec = big.embedder.embed_batch([generated_queries(1, seed=12)[0]])[0]
    search = "select tool_pk, distance from knn(%s, %s, %s, %s, %s, %s::bigint[], %s)"
    with big.pool.connection() as conn:
        every = [r[0] for r in conn.execute("select pk from tools where catalog_id = %s order by pk", [info.id])]
        unfiltered = conn.execute(search, [table, info.id, info.embed_dim, qvec, limit, None, None]).fetchall()
        nearest = list(dict.fromkeys(pk for pk, _ in unfiltered))[:10]
        dropped = list(dict.fromkeys(nearest + every[:: len(every) // dropped_count]))[:dropped_count]
        kept = sorted(set(every) - set(dropped))
        by_dropped = conn.execute(search, [table, info.id, info.embed_dim, qvec, limit, dropped, True]).fetchall()
        by_kept = conn.execute(search, [table, info.id, info.embed_dim, qvec, limit, kept, False]).fetchall()
    assert len(kept) > 2000  # both take the iterative scan
    assert len(by_dropped) == limit and not {pk for pk, _ in by_dropped} & set(dropped)
    assert by_dropped == by_kept


@pytest.mark.parametrize("signal", ["name", "description"])
def test_a_block_list_keeping_most_tools_ranks_as_the_unfiltered_list_without_them(big: ToolStore, signal: str) -> None:
    """A block list that keeps most of 10k tools (route_kept() lists the dropped ones) takes them out of the lexical
    lists before the cut: with one exact retriever weighted, the route is the unfiltered one without the blocked tools
    (taking tools out of a single ranked list cannot reorder the rest)."""
    weights = {s: float(s == signal) for s in ("name", "description", "expansion", "dense", "intent")}
    blocked = 0
    for text in generated_queries(4, seed=13):
        filtered = [r.tool.id for r in big.route(text, k=8, block=BLOCK_MOST, weights=weights)]
        unfiltered = [r.tool.id for r in big.route(text, k=40, weights=weights)]
        kept = [i for i in unfiltered if not any(fnmatch.fnmatchcase(i, b) for b in BLOCK_MOST)]
        blocked += len(unfiltered) - len(kept)
        assert filtered == kept[:8]
    assert blocked, "no request's unfiltered list held a blocked tool: the test proves nothing"


KEPT_CASES = [
    {"providers": ["rare"]},  # 15 tools: listed through the providers' index entries
    {"providers": ["slack", "gmail", "github"]},  # thousands: the same, past 2,000
    {"providers": ["slack", "gmail", "github", "rare"], "tags": ["few"]},  # the tags bound the set
    {"allow": ["s*"]},  # globs alone: every tool is tested
    {"block": BLOCK_MOST},  # most of the catalog: the dropped tools are listed
    {"categories": ["finance"], "block": ["*.send*"]},  # a quarter of the catalog
    {"allow": ["gmail.*", "stripe.?*"], "categories": ["finance", "sales"], "providers": ["gmail", "stripe"]},
]


@pytest.mark.parametrize("case", KEPT_CASES)
def test_route_kept_lists_exactly_the_tools_the_filters_keep(big: ToolStore, case: dict[str, list[str]]) -> None:
    """route_kept() lists every kept tool whatever their number (migration 0014), or every dropped one where it tests
    every tool and that set is the smaller (migration 0016): route() tests membership in it."""
    info = big.info()
    with big.pool.connection() as conn:
        rows = conn.execute(
            "select pk, id, provider, categories, tags from tools where catalog_id = %s", [info.id]
        ).fetchall()
        listed, dropped = conn.execute(
            "select pks, dropped from route_kept(%s, %s, %s, %s, %s, %s)",
            [info.id, *(case.get(k) for k in ("allow", "block", "categories", "providers", "tags"))],
        ).fetchone() or (None, None)

    def keeps(tool_id: str, provider: str, categories: list[str], tags: list[str]) -> bool:
        def matches(patterns: list[str]) -> bool:
            return any(fnmatch.fnmatchcase(tool_id, p) for p in patterns)

        return (
            ("allow" not in case or matches(case["allow"]))
            and ("block" not in case or not matches(case["block"]))
            and ("categories" not in case or bool(set(categories) & set(case["categories"])))
            and ("providers" not in case or provider in case["providers"])
            and ("tags" not in case or bool(set(tags) & set(case["tags"])))
        )

    expected = {pk for pk, tool_id, provider, categories, tags in rows if keeps(tool_id, provider, categories, tags)}
    assert expected and len(expected) < len(rows)
    assert listed is not None and dropped is not None
    every = {pk for pk, *_ in rows}
    assert sorted(listed) == sorted(every - expected if dropped else expected)
    # Without a providers filter, these cases' filters are globs or keep more than 2,000 tools: route_kept() tests
    # every tool, and lists the dropped ones when they are fewer.
    tests_every_tool = "providers" not in case
    assert dropped == (tests_every_tool and len(every) - len(expected) < len(expected))
