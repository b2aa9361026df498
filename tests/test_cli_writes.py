"""A command that writes in steps (tools, then intent examples or sessions) leaves no half-written catalog: its
input is read and checked before the first write, and a step that fails later (an embedder outage) leaves the
catalog as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from toolstore import EmbedderUnavailableError, InvalidInputError, Tool, ToolStore
from toolstore.cli import cli
from toolstore.testing.fake_openai import FakeOpenAI

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]
QUERIES = [{"qid": "q1", "query": "mail my landlord", "relevant": ["gmail.send_email"]}]
TRAIN = [{"qid": "t1", "query": "send a note by email", "relevant": ["gmail.send_email"]}]


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _eval_args(tmp_path: Path, train: list[dict[str, Any]]) -> list[str]:
    tools, queries = _write(tmp_path / "tools.jsonl", TOOLS), _write(tmp_path / "q.jsonl", QUERIES)
    return ["eval", "--tools", tools, "--queries", queries, "--train", _write(tmp_path / "train.jsonl", train)]


def _catalogs(dsn: str) -> dict[str, tuple[int, int]]:
    with ToolStore(dsn, embedder=None, create=False, catalog="default") as store:
        return {c["name"]: (c["n_tools"], c["n_examples"]) for c in store.catalogs()}


def _on_fake(server: FakeOpenAI, dsn: str, *args: str) -> Result:
    env = {"OPENAI_API_KEY": server.api_key, "OPENAI_BASE_URL": server.base_url}
    return CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "openai/bge", *args], env=env)


def test_eval_training_data_naming_a_tool_the_tools_file_lacks_is_refused_before_any_write(
    dsn: str, tmp_path: Path
) -> None:
    """It failed after the tools were written, naming the scratch catalog, and --keep left that catalog half
    written (tools, no examples) under a name it never printed."""
    train = [*TRAIN, {"qid": "t2", "query": "book a flight", "relevant": ["travel.book_flight"]}]
    args = ["--dsn", dsn, "--embedder", "hashing", *_eval_args(tmp_path, train), "--keep"]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, InvalidInputError), result.exception
    train_file, tools_file = tmp_path / "train.jsonl", tmp_path / "tools.jsonl"
    said = f"{train_file} names 1 tool id(s) not in {tools_file}: 'travel.book_flight' (in 't2')"
    assert str(result.exception) == said
    assert _catalogs(dsn) == {}


def test_eval_whose_embedder_fails_on_the_examples_keeps_no_half_written_catalog(dsn: str, tmp_path: Path) -> None:
    """The tools' embedding answered, the examples' failed: with --keep the scratch catalog stayed with its tools
    alone."""
    with FakeOpenAI(models={"bge": 64}) as server:
        server.pass_next(1)  # the tools' one request
        server.fail_next(503, times=50)  # the examples' (retried)
        result = _on_fake(server, dsn, *_eval_args(tmp_path, TRAIN), "--keep")
        assert len(server.embedding_batches()) > 1  # it did get to the examples
    assert isinstance(result.exception, EmbedderUnavailableError), result.exception
    assert _catalogs(dsn) == {}


def test_eval_whose_embedder_fails_on_its_tools_says_the_embedders_error(dsn: str, tmp_path: Path) -> None:
    """Nothing was written, so dropping the scratch catalog failed, and its UnknownCatalogError ("no catalog named
    'eval-...'") replaced the embedder's error."""
    with FakeOpenAI(models={"bge": 64}) as server:
        server.fail_next(503, times=50)
        result = _on_fake(server, dsn, *_eval_args(tmp_path, TRAIN))
    assert isinstance(result.exception, EmbedderUnavailableError), result.exception
    assert _catalogs(dsn) == {}


def test_demo_whose_embedder_fails_on_the_examples_leaves_the_catalog_as_it_was(dsn: str) -> None:
    """The demo's tools were written (pruning the catalog's others) before its examples' embedding failed."""
    with ToolStore(dsn, embedder=None, catalog="demo") as store:
        store.upsert([Tool(id="mine.tool", name="mine", description="a tool of my own")])
    with FakeOpenAI(models={"bge": 64}) as server:
        server.pass_next(1)  # the demo tools' one request
        server.fail_next(503, times=50)
        result = _on_fake(server, dsn, "demo")
        assert len(server.embedding_batches()) > 1
    assert isinstance(result.exception, EmbedderUnavailableError), result.exception
    assert _catalogs(dsn) == {"demo": (1, 0)}
    with ToolStore(dsn, embedder=None, create=False, catalog="demo") as store:
        assert [t.id for t in store.tools()] == ["mine.tool"] and store.info().embed_model is None


def test_eval_with_a_malformed_training_line_writes_nothing(dsn: str, tmp_path: Path) -> None:
    """Every input file is read before the first write: a bad line fails naming it, and no catalog is made."""
    args = _eval_args(tmp_path, TRAIN)
    (tmp_path / "train.jsonl").write_text(json.dumps(TRAIN[0]) + "\n{not json\n")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args, "--keep"])
    assert isinstance(result.exception, InvalidInputError), result.exception
    assert str(result.exception).startswith(f"{tmp_path / 'train.jsonl'} line 2, "), result.exception
    assert _catalogs(dsn) == {}


def test_eval_keep_says_the_catalog_it_keeps_when_the_run_fails_after_writing_it(dsn: str, tmp_path: Path) -> None:
    """With --keep, a run that failed after its scratch catalog was whole (here tune, with one training request)
    kept the catalog but never printed its name, so it could not be found to drop; stderr names it."""
    args = ["--dsn", dsn, "--embedder", "hashing", *_eval_args(tmp_path, TRAIN), "--tune", "--keep"]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, InvalidInputError), result.exception
    assert "tuning needs at least 2" in str(result.exception)
    (kept,) = _catalogs(dsn)
    assert kept.startswith("eval-") and f"catalog kept: {kept} (--keep" in result.stderr, result.stderr
