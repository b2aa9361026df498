"""evaluate(), tune() and ``toolstore eval``/``tune``: metrics through the real route(), client-side fusion
that reproduces the SQL statement, learned weights, no leakage, determinism, fallback, CLI end to end."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from toolstore import (
    Fusion,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    Judgement,
    ModelMismatchError,
    Tool,
    ToolStore,
)
from toolstore._candidates import CandidateTable
from toolstore._eval import BUILTIN_CONFIGS, evaluate, select_configs
from toolstore._fusion import DEFAULT_FUSION, SIGNALS, UNIFORM, top_columns
from toolstore._lists import Probe, fetch_lists, load_tool_index
from toolstore._metrics import METRICS, score_query
from toolstore._split import split_request
from toolstore._tune import avoid_fractions, tune
from toolstore.cli import cli
from toolstore.testing.fake_openai import FakeOpenAI

from catalog_gen import generated_queries, generated_tools
from fusion_oracle import route_ids

N = 20


def clue_catalog() -> tuple[list[Tool], list[tuple[str, Judgement]]]:
    """Tool i's description holds clue word i, but its name field holds clue i+1: description is informative,
    name is noise that points at the neighbour. Queries name one clue each."""
    clues = [f"zq{chr(97 + i)}x" for i in range(N)]
    tools = [
        Tool(id=f"t{i:02d}", name=f"t{i:02d}", description=f"does {clues[i]} work", keywords=(clues[(i + 1) % N],))
        for i in range(N)
    ]
    examples = [
        (f"{filler} {clues[i]}", Judgement(f"q{i}-{n}", (f"t{i:02d}",)))
        for i in range(N)
        for n, filler in enumerate(["please", "kindly run", "I want"])
    ]
    return tools, examples


def test_evaluate_reports_every_metric_per_config(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    report = evaluate(store, examples[:10], configs=select_configs(["name", "description", "uniform"]), k=5)
    assert set(report) == {"configs", "n_queries", "n_tools", "degraded"}
    assert report["n_queries"] == 10 and report["n_tools"] == N and report["degraded"] is None
    assert list(report["configs"]) == ["name", "description", "uniform"]
    for row in report["configs"].values():
        assert set(row) == {*METRICS, "latency_ms_p50", "latency_ms_p95"}
        assert row["latency_ms_p50"] <= row["latency_ms_p95"]
    assert report["configs"]["description"]["R@1"] == 1.0
    assert report["configs"]["name"]["R@1"] == 0.0  # the name field points at the neighbour


def test_an_always_on_tool_does_not_shift_the_ranks_of_routed_tools(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    configs = select_configs(["description", "default"])
    text = examples[0][0]
    before = evaluate(store, [*examples, (text, Judgement("mix", ("t00",)))], configs=configs, k=3)["configs"]
    store.upsert([Tool(id="core.ask_user", name="ask_user", description="Ask the user a question", always_on=True)])
    assert store.route(text, k=3).ids[0] == "core.ask_user"  # packed first, on every turn
    # offered whatever the router does: found, so a request needing only it is not scored
    ask = [(text, Judgement("mix", ("t00", "core.ask_user"))), ("ask me first", Judgement("ask", ("core.ask_user",)))]
    after = evaluate(store, [*examples, *ask], configs=configs, k=3)["configs"]
    for name in configs:
        assert {m: after[name][m] for m in METRICS} == {m: before[name][m] for m in METRICS}
    assert after["description"]["R@1"] == 1.0


def test_evaluate_rejects_bad_input(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    with pytest.raises(InvalidInputError, match="'nope'"):
        select_configs(["bm25", "nope"])
    with pytest.raises(InvalidInputError, match="'ghost.tool'"):
        evaluate(store, [("send it", Judgement("q1", ("ghost.tool",)))], configs=select_configs(["bm25"]))
    with pytest.raises(InvalidInputError, match="no queries"):
        evaluate(store, [], configs=select_configs(["bm25"]))
    assert set(select_configs()) == set(BUILTIN_CONFIGS)
    assert "tuned" not in select_configs(tuned=False)


def fusions() -> list[Fusion]:
    rng = random.Random(3)
    out = [
        UNIFORM,
        Fusion({s: float(s == "intent") for s in SIGNALS}),
        Fusion({s: float(s == "name") for s in SIGNALS}),
    ]
    for _ in range(4):
        weights = {s: rng.choice([0.0, 0.25, 1.0, 1.5, 3.0]) for s in SIGNALS}
        weights["description"] = 1.0
        split = rng.choice([0.0, 0.5, 1.5])
        out.append(
            Fusion(weights, k_rrf=rng.choice([5.0, 15.0, 60.0]), overfetch=rng.choice([None, 12, 25]), split=split)
        )
    return out


def test_client_side_fusion_reproduces_route(store: ToolStore) -> None:
    tools = generated_tools(60)
    tools[5] = dataclasses.replace(tools[5], always_on=True)
    store.upsert(tools)
    rng = random.Random(1)
    # fewer examples than the neighbours fetched (24 at the smallest over-fetch, 12): the hashing embedder ties many
    # distances, and ties at the cut-off would make the statement's pick arbitrary
    store.add_examples(IntentExample(rng.choice(tools).id, q) for q in generated_queries(20, seed=2))
    compound = [f"{a}, then {b}. Finally {c}" for a, b, c in zip(*[iter(generated_queries(12, seed=4))] * 3)]
    queries = generated_queries(16, seed=9) + compound
    queries += [f"please run {tools[0].name} now", f"use {tools[7].id} and mail"]
    index = load_tool_index(store)
    judgements = [Judgement(str(i), (tools[0].id,)) for i in range(len(queries))]
    fetched = {}
    for fusion in fusions():
        depth = fusion.depth(10)
        if depth not in fetched:
            lists = fetch_lists(store, queries, depth=depth, leave_one_out=False, tools=index)
            fetched[depth] = lists, CandidateTable(lists, index, judgements, depth)
        lists, table = fetched[depth]
        top = table.top_ids([fusion.weights[s] for s in SIGNALS], fusion.k_rrf, split=fusion.split)
        ndcg = table.ndcg([fusion.weights[s] for s in SIGNALS], fusion.k_rrf, split=fusion.split)
        for i, q in enumerate(queries):
            options = dict(weights=fusion.weights, k_rrf=fusion.k_rrf, overfetch=depth, split=fusion.split)
            routed = store.route(q, k=10, **options).ids
            assert route_ids(lists[i], index, fusion, k=10) == routed, (q, fusion)
            assert top[i] == routed[:10], (q, fusion)
            # tuning's objective is evaluation's nDCG@10 of what route() returns
            assert ndcg[i] == pytest.approx(score_query(routed, judgements[i])["nDCG@10"]), (q, fusion)
    assert lists[-2].exact == {tools[0].id} and lists[-1].exact == {tools[7].id}
    assert [len(lists[i].parts) for i in range(16, 20)] == [3, 3, 3, 2]  # the compound requests were split


def test_tune_learns_that_name_is_noise(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    report = tune(store, examples, seed=0, folds=3)
    weights = report.fusion.weights
    assert not report.fell_back
    assert weights["name"] < weights["description"]
    assert report.cv_ndcg_tuned > report.cv_ndcg_uniform
    assert report.train_ndcg == pytest.approx(1.0)
    # stored: route() now uses the tuned weights by default
    assert store.info().settings["fusion"]["weights"] == dict(weights)
    assert evaluate(store, examples, configs={"tuned": None})["configs"]["tuned"]["R@1"] == 1.0
    assert evaluate(store, examples, configs={"u": UNIFORM})["configs"]["u"]["R@1"] < 1.0


def test_tune_is_deterministic(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    store.add_examples(IntentExample(j.relevant[0], q) for q, j in examples[::2])
    runs = [tune(store, examples, seed=4, folds=4, save=False).as_dict() for _ in range(2)]
    for r in runs:
        r.pop("seconds"), r.pop("fetch_seconds")
    assert runs[0] == runs[1]


def test_tune_never_matches_a_query_to_its_own_example(store: ToolStore) -> None:
    """Only intent carries signal, and only through each query's own stored example: with leakage, intent
    would score every training query perfectly; leave-one-out must not."""
    rng = random.Random(5)
    store.upsert(Tool(id=f"tool{i:02d}", name=f"tool{i:02d}", description="a tool") for i in range(N))
    examples = []
    for i in range(60):
        text = " ".join(f"w{rng.randrange(10**9)}" for _ in range(3))  # unique words: nothing else matches
        examples.append((text, Judgement(f"q{i}", (f"tool{i % N:02d}",))))
    store.add_examples(IntentExample(j.relevant[0], q) for q, j in examples)
    index = load_tool_index(store)
    leaky = fetch_lists(store, [q for q, _ in examples], depth=40, leave_one_out=False, tools=index)
    intent = Fusion({s: float(s == "intent") for s in SIGNALS})
    assert all(route_ids(lst, index, intent)[0] == j.relevant[0] for lst, (_, j) in zip(leaky, examples))
    report = tune(store, examples, seed=0, folds=3)
    assert report.train_ndcg < 0.6 and report.cv_ndcg_tuned < 0.6
    assert report.expansion_copies == 0


def test_a_requests_copy_in_an_expansion_does_not_help_its_own_fold(
    store: ToolStore, caplog: pytest.LogCaptureFixture
) -> None:
    """`expand --offline` copies intent examples into expansions (and so into the tools' vectors): tuning reads each
    request's lists without its own copies, as it never matches its own intent example, so cross-validation scores a
    held-out request as if its copy had never been written (random words: nothing else finds its tool)."""
    import logging

    from toolstore._expand import expand

    rng = random.Random(6)
    store.upsert(Tool(id=f"tool{i:02d}", name=f"tool{i:02d}", description="a tool") for i in range(N))
    examples = [
        (" ".join(f"w{rng.randrange(10**9)}" for _ in range(3)), Judgement(f"q{i}", (f"tool{i % N:02d}",)))
        for i in range(30)
    ]
    store.add_examples(IntentExample(j.relevant[0], q) for q, j in examples)
    expand(store, offline=True)
    with caplog.at_level(logging.WARNING, logger="toolstore"):
        report = tune(store, examples, seed=0, folds=3, save=False)
    assert report.expansion_copies == 30 and report.as_dict()["expansion_copies"] == 30
    assert "expansion" not in caplog.text
    assert report.cv_ndcg_tuned < 0.6  # each request matched its own copy: above 0.9


def test_a_requests_own_expansion_lines_are_read_as_never_written(dsn: str) -> None:
    """A request's lists (BM25 of the expansion field with its statistics, the dense list) read the tools whose
    expansion holds the request as a line (in any case and spacing) as a catalog where that line was never written
    reads them, the other lines kept. (Deeper than the catalog: which tools the dense list keeps at its last rank is
    chosen by the HNSW index's halfvec distance in route(), and by the distance itself for the lines left out.)"""
    rng = random.Random(11)
    words = [f"w{i}" for i in range(30)]
    requests = [" ".join(rng.sample(words, 4)) for _ in range(3)]
    expansions = {f"tool{i:02d}": [" ".join(rng.sample(words, 4)) for _ in range(3)] for i in range(12)}
    for i, request in enumerate(requests):
        expansions[f"tool{i:02d}"].insert(1, request)
        expansions[f"tool{i + 5:02d}"].append("  " + request.upper())

    def catalog(name: str, without: str | None) -> ToolStore:
        store = ToolStore(dsn, embedder=HashingEmbedder(64), catalog=name)
        same = lambda line: without is not None and " ".join(line.split()).lower() == without  # noqa: E731
        store.upsert(
            Tool(id=t, name=t, description="a tool", expansion="\n".join(x for x in lines if not same(x)))
            for t, lines in expansions.items()
        )
        return store

    with catalog("copied", None) as copied:
        found = fetch_lists(copied, requests, depth=20)
    for i, (request, lists) in enumerate(zip(requests, found)):
        with catalog(f"clean{i}", request) as clean:
            (expected,) = fetch_lists(clean, [request], depth=20)
        assert lists.lexical == expected.lexical
        assert lists.dense == expected.dense
        assert lists.dense_distance == pytest.approx(expected.dense_distance, abs=1e-6)


def test_tune_falls_back_to_the_default_when_nothing_beats_it(dsn: str) -> None:
    """Lexical only, and only the description field matches: every weighting ranks alike, so tuning cannot win."""
    with ToolStore(dsn, embedder=None, catalog="lexical") as store:
        store.upsert(Tool(id=f"t{i:02d}", name=f"t{i:02d}", description=f"handles k{i}x") for i in range(N))
        examples = [(f"handle k{i}x", Judgement(f"q{i}", (f"t{i:02d}",))) for i in range(N)]
        report = tune(store, examples, folds=4)
        assert report.fell_back and report.fusion == DEFAULT_FUSION
        assert report.cv_ndcg_tuned == report.cv_ndcg_uniform
        assert store.info().settings["fusion"]["weights"] == dict(DEFAULT_FUSION.weights)


def test_tune_rejects_bad_input(store: ToolStore) -> None:
    tools, examples = clue_catalog()
    store.upsert(tools)
    with pytest.raises(InvalidInputError, match="'nowhere'"):
        tune(store, [*examples, ("x", Judgement("bad", ("nowhere",)))])
    with pytest.raises(InvalidInputError, match="no examples"):
        tune(store, [])
    with pytest.raises(InvalidInputError, match="folds"):
        tune(store, examples, folds=1)
    with pytest.raises(InvalidInputError, match="seed must be an integer >= 0, got -1"):
        tune(store, examples, seed=-1)


def test_tune_refuses_an_embedder_of_another_model(dsn: str) -> None:
    """Tuning embeds its requests as route() does: with another model's embedder it refuses, as route() does,
    rather than searching the catalog's vectors with vectors of another space (and storing weights fit on them)."""
    tools, examples = clue_catalog()
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="mm") as store:
        store.upsert(tools)
    other = HashingEmbedder(64)
    other.model = "another-model-64"  # same dimension, another embedding space
    with ToolStore(dsn, embedder=other, catalog="mm", create=False) as store:
        with pytest.raises(ModelMismatchError):
            store.route(examples[0][0])
        with pytest.raises(ModelMismatchError):
            tune(store, examples, save=False)


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_eval_json_end_to_end(dsn: str, tmp_path: Path) -> None:
    tools, examples = clue_catalog()
    tool_rows = [
        {
            "id": t.id,
            "name": t.name,
            "description": t.description,
            "provider": None,
            "parameters": None,
            "category": None,
        }
        for t in tools
    ]
    rows = [
        {"qid": j.qid, "query": q, "relevant": list(j.relevant), "acceptable": list(j.relevant)} for q, j in examples
    ]
    env = {**os.environ, "TOOLSTORE_DSN": dsn}
    args = [
        sys.executable,
        "-m",
        "toolstore.cli",
        "--embedder",
        "hashing",
        "eval",
        "--tools",
        str(_write(tmp_path / "tools.jsonl", tool_rows)),
        "--queries",
        str(_write(tmp_path / "q.jsonl", rows[1::3])),
        "--train",
        str(_write(tmp_path / "train.jsonl", [r for i, r in enumerate(rows) if i % 3 != 1])),
        "--tune",
        "--json",
        "--report",
        str(tmp_path / "report"),
    ]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["n_queries"] == N and out["n_tools"] == N
    assert set(out["configs"]) == set(BUILTIN_CONFIGS)
    assert out["configs"]["tuned"]["nDCG@10"] >= out["configs"]["uniform"]["nDCG@10"]
    assert "| tuned |" in (tmp_path / "report" / "eval.md").read_text()
    with ToolStore(dsn, embedder=None, create=False, catalog="default") as s:
        assert not [c for c in s.catalogs() if c["name"].startswith("eval-")]  # scratch catalog dropped
    bad = subprocess.run([*args[:10], "--config", "nope"], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "'nope'" in bad.stderr and "Traceback" not in bad.stderr  # a usage error


def test_an_eval_whose_labels_name_tools_not_in_its_tools_file_names_the_files(dsn: str, tmp_path: Path) -> None:
    """toolstore eval with --queries (or --train, --sessions) naming a tool --tools lacks said 'queries name 1 tool
    id(s) not in catalog 'eval-3f2a...'', the scratch catalog the user never gave; it names the labelled file, the
    tools file, and each unknown id's query or session, before a scratch catalog is made."""
    tools = _write(tmp_path / "tools.jsonl", [{"id": "a", "name": "alpha", "description": "do alpha"}])
    good = _write(tmp_path / "good.jsonl", [{"qid": "g1", "query": "do alpha", "relevant": ["a"]}])
    bad = _write(tmp_path / "bad.jsonl", [{"qid": "q1", "query": "x", "relevant": ["a"], "acceptable": ["a", "b"]}])
    session = {"sid": "s1", "turns": [{"query": "do alpha", "relevant": ["a"], "calls": ["a", "c"]}]}
    sessions = _write(tmp_path / "sessions.jsonl", [session])
    base = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "eval", "--tools", str(tools)]
    for args, file, unknown in [
        (["--queries", str(bad)], bad, "'b' (in 'q1')"),
        (["--queries", str(good), "--train", str(bad)], bad, "'b' (in 'q1')"),
        (["--sessions", str(sessions)], sessions, "'c' (in 's1')"),
    ]:
        proc = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == f"error: {file} names 1 tool id(s) not in {tools}: {unknown}\n"
    with ToolStore(dsn, embedder=None, create=False, catalog="default") as s:
        assert not [c for c in s.catalogs() if c["name"].startswith("eval-")]


def test_an_eval_with_the_embedding_server_down_says_so_once(dsn: str, tmp_path: Path) -> None:
    """The embedding server answers the import, then fails (the first route's one attempt; the breaker answers the
    others at once): every config is scored on lexical routes, which the JSON says once at its top (``degraded``),
    the CLI in one warning line on stderr, and eval.md above its table."""
    tools, examples = clue_catalog()
    tool_rows = [
        {"id": t.id, "name": t.name, "description": t.description, "keywords": list(t.keywords)} for t in tools
    ]
    rows = [{"qid": j.qid, "query": q, "relevant": list(j.relevant)} for q, j in examples[:4]]
    args = ["--dsn", dsn, "--embedder", "openai/bge", "eval", "--tools", str(_write(tmp_path / "t.jsonl", tool_rows))]
    args += ["--queries", str(_write(tmp_path / "q.jsonl", rows)), "--config", "default", "--config", "dense"]
    with FakeOpenAI(models={"bge": 64}) as server:
        server.pass_next(1)  # the import's one request
        server.fail_next(503)  # the first route's
        env = {"OPENAI_API_KEY": server.api_key, "OPENAI_BASE_URL": server.base_url}
        result = CliRunner().invoke(cli, [*args, "--json", "--report", str(tmp_path / "r")], env=env)
        assert result.exit_code == 0, (result.output, result.exception)
        assert len(server.requests_to("/embeddings")) == 2
    degraded = json.loads(result.stdout)["degraded"]
    assert degraded["routes"] == degraded["of"] == 8, degraded
    assert degraded["reason"].startswith("embedder failed (EmbedderUnavailableError: ")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: 8 of 8 routes answered lexically, not with the configs' dense and intent signals, "
        f"so their numbers are lexical ones: {degraded['reason']}"
    ]
    assert warnings[0][len("warning: ") :] in (tmp_path / "r" / "eval.md").read_text()


def test_store_tune_from_a_train_file(dsn: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``ToolStore.tune`` reads train.jsonl and stores weights that route() then uses."""
    from toolstore import HashingEmbedder, Tool, ToolStore, TuneReport

    tools = [Tool(id=f"t{i}", name=f"tool_{i}", description=f"does thing number {i} with widgets") for i in range(6)]
    lines = [
        {"qid": f"q{i}{j}", "query": f"thing number {i} please {j}", "relevant": [f"t{i}"]}
        for i in range(6)
        for j in range(3)
    ]
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(json.dumps(r) for r in lines))
    with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="tune_file") as store:
        store.upsert(tools)
        report = store.tune(str(train), seed=1)
        assert isinstance(report, TuneReport) and report.n_examples == 18
        stored = store.info().settings["fusion"]
        assert stored["weights"] == dict(report.fusion.weights)


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_client_side_top_columns_equal_a_full_sort_with_ties_and_large_scores(scale: float) -> None:
    """The preselection by a float key must not change the statement's order (group, score at 1e-9, id): not under
    large weights (scores far over 16), not where many candidates tie at the cut (avoid = 1 zeroes whole lists)."""
    rng = np.random.default_rng(7)
    rows, cols, k = 200, 60, 10
    group = rng.choice([-1, 0, 0, 0, 0, 1], size=(rows, cols))
    score = rng.choice([0.0, 0.0, 0.0, 0.0, 0.1, 0.2], size=(rows, cols)) * scale
    position = np.argsort(rng.random((rows, cols)), axis=1)  # each row's ids in a random order
    got = top_columns(group, score, position, k)
    for r in range(rows):
        order = sorted(range(cols), key=lambda c: (-group[r, c], -round(score[r, c] * 1e9), position[r, c]))
        want = [c if group[r, c] >= 0 else -1 for c in order[:k]]
        assert list(got[r]) == want, r


def test_client_side_fusion_reproduces_route_with_large_weights_and_avoided_ties(store: ToolStore) -> None:
    tools = [
        Tool(id=f"t{i:02d}", name=f"t{i:02d}", description=f"frobnicate widgets variant {i}",
             avoid_when="frobnicate widgets" if i % 7 else "")
        for i in range(40)
    ] + [Tool(id="zeta_tool", name="zeta_tool", description="an unrelated thing")]  # fmt: skip
    store.upsert(tools)
    index = load_tool_index(store)
    for request, weights, avoid in [
        ("frobnicate widgets with zeta_tool", {s: 1000.0 * (s == "description") for s in SIGNALS}, 0.5),
        ("frobnicate widgets", dict(DEFAULT_FUSION.weights), 1.0),  # most tools' scores drop to 0: ties at the cut
    ]:
        fusion = Fusion(weights, k_rrf=5.0, split=0.0, avoid=avoid)
        depth = fusion.depth(10)
        lists = fetch_lists(store, [request], depth=depth, leave_one_out=False, tools=index)
        fractions = avoid_fractions(store, [Probe(request)], index)
        table = CandidateTable(lists, index, [Judgement("q", (index.ids[0],))], depth, avoid=fractions)
        client = table.top_ids([weights[s] for s in SIGNALS], fusion.k_rrf, split=0.0, avoid=avoid)[0]
        routed = store.route(request, k=10, weights=weights, k_rrf=5.0, overfetch=depth, split=0.0, avoid=avoid)
        assert client == routed.ids[:10], (request, client, routed.ids)


def _false_split_catalog(second: bool) -> tuple[list[Tool], list[tuple[str, Judgement]]]:
    """Tools that each do one clue (two per clue), and tools that do two: a request naming two clues, in two clauses,
    wants the tool that does both, which each clause ranks third, so a weight on its clauses (``split``) can only cost
    there (from 1, the default, it ranks that tool under two others).
    ``second``: its judgement also names an unrelated tool, so it needs more than one tool."""
    clues = [f"zq{chr(97 + i)}x" for i in range(N)]
    tools = [Tool(id=f"t{i:02d}", name=f"t{i:02d}", description=f"does {clues[i]} work") for i in range(N)]
    tools += [Tool(id=f"u{i:02d}", name=f"u{i:02d}", description=f"{clues[i]} jobs") for i in range(N)]
    pairs = [(i, i + 1) for i in range(0, N, 2)]
    tools += [
        Tool(id=f"both{a:02d}", name=f"both{a:02d}", description=f"does {clues[a]} {clues[b]} work") for a, b in pairs
    ]
    examples = [
        (f"{filler} {clues[i]}", Judgement(f"q{i}-{n}", (f"t{i:02d}",)))
        for i in range(N)
        for n, filler in enumerate(["please", "kindly run"])
    ]
    for a, b in pairs:
        relevant = (f"both{a:02d}",) + ((f"t{(a + 5) % N:02d}",) if second else ())
        text = f"please fetch {clues[a]} records today, then fetch {clues[b]} records today"
        examples.append((text, Judgement(f"c{a}", relevant)))
    return tools, examples


def test_tune_keeps_the_default_split_without_compound_examples(dsn: str) -> None:
    """Split requests that each need one tool show only what a split costs, never what it wins: with fewer than
    MIN_COMPOUND_SPLITS split requests needing more than one tool, ``split`` keeps its default; with enough of them it
    is fit (here, where every split costs, lower)."""
    with ToolStore(dsn, embedder=None, catalog="falsesplits") as store:
        tools, examples = _false_split_catalog(second=False)
        store.upsert(tools)
        assert sum(bool(split_request(q)) for q, _ in examples) == N // 2
        assert tune(store, examples, folds=3, save=False).tuned.split == DEFAULT_FUSION.split
    with ToolStore(dsn, embedder=None, catalog="compound") as store:
        tools, examples = _false_split_catalog(second=True)
        store.upsert(tools)
        index = load_tool_index(store)
        lists = fetch_lists(store, [q for q, _ in examples], depth=40, leave_one_out=False, tools=index)
        table = CandidateTable(lists, index, [j for _, j in examples], 40)
        assert table.compound_splits() == N // 2
        report = tune(store, examples, folds=3, save=False)
        assert report.tuned.split == DEFAULT_FUSION.split  # 10 compound requests: under MIN_COMPOUND_SPLITS
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("toolstore._tune.MIN_COMPOUND_SPLITS", N // 2)
            assert tune(store, examples, folds=3, save=False).tuned.split < DEFAULT_FUSION.split
