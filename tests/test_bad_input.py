"""Bad input through the command line and the library: one clear line, a non-zero exit, nothing written."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolstore import (
    Anchor,
    AsyncToolStore,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    InvalidToolError,
    InvalidTypeError,
    Tool,
    ToolStore,
    _textfile,
    load_judgements,
    load_tools_file,
    migrate,
)


def run(dsn: str, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TOOLSTORE_DSN": dsn, "TOOLSTORE_EMBEDDER": "hashing"}
    return subprocess.run([sys.executable, "-m", "toolstore", *args], capture_output=True, env=env, timeout=120)


def one_clear_line(proc: subprocess.CompletedProcess[bytes], needle: str, status: int = 1) -> None:
    """``proc`` failed with exit ``status`` (1: the library's error, 2: a usage error) and one stderr line holding
    ``needle``."""
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == status, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert needle in err, err


def nested(depth: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


#: A parameter schema of 3,000 properties with long names.
WIDE = {"type": "object", "properties": {f"argument_number_{i}_of_a_wide_schema": {} for i in range(3000)}}


def tool_line(**fields: object) -> str:
    return json.dumps({"name": "send_email", "description": "Send an email", **fields})


BAD_FILES = {
    "deep schema": (tool_line(parameters=nested(40)), "parameters is nested deeper than 64 levels"),
    "deep document": (tool_line(parameters=nested(400)), "nested deeper than 100 levels"),
    "deeper than the parser": ('{"name": "x", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than 100"),
    "lone surrogate": ('{"name": "send_email", "description": "bad \\ud800 text"}', "not valid Unicode"),
    "huge integer": ('{"name": "x", "parameters": {"type": "object", "maximum": ' + "9" * 5000 + "}}", "invalid JSON"),
    "NaN": ('{"name": "x", "parameters": {"type": "object", "default": NaN}}', "NaN is not valid JSON"),
    "Infinity": ('{"name": "x", "parameters": {"type": "object", "maximum": Infinity}}', "Infinity is not valid"),
    "huge description": (tool_line(description="word " * 400_000), "the limit is 100,000"),
    "huge id": (json.dumps({"id": "x" * 100_000, "name": "x", "description": "y"}), "the limit is 256"),
    "NUL": (tool_line(description="a\u0000b"), "NUL"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_tool_files_are_one_line_and_write_nothing(dsn: str, tmp_path: Path, case: str) -> None:
    text, needle = BAD_FILES[case]
    path = tmp_path / "tools.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    one_clear_line(run(dsn, "-c", "bad", "import", str(path)), needle)
    with ToolStore(dsn, embedder=None, catalog="x") as store:
        assert "bad" not in [c["name"] for c in store.catalogs()]


def test_only_regular_files_and_pipes_are_read(dsn: str, tmp_path: Path) -> None:
    """A device other than /dev/null (an empty file: test_cli_stdin) is refused (a pipe is read: test_cli_pipes)."""
    device = tmp_path / "random.json"
    device.symlink_to("/dev/urandom")
    one_clear_line(run(dsn, "-c", "bad", "import", str(device)), "not a regular file or a pipe")
    with pytest.raises(InvalidToolError, match="not a regular file or a pipe"):
        load_tools_file(device)
    with pytest.raises(InvalidInputError, match="not a regular file or a pipe"):
        load_judgements("/dev/zero")


def test_a_file_that_grows_after_its_size_is_read_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_text_file looked at the file's size by its name, then read it whole: a file grown (or swapped for another,
    /dev/zero) in between was read past the limit (the first limit + 1 bytes of it taken as the file). It checks and
    reads the file it opened, at most the limit and a byte, and refuses one past it."""
    path = tmp_path / "queries.jsonl"
    path.write_text("x" * 50)
    monkeypatch.setattr(_textfile, "MAX_FILE_BYTES", 100)
    grown: list[int] = []

    def grow_after(real: Any) -> Any:
        def look(target: Any, *args: Any, **kwargs: Any) -> Any:
            info = real(target, *args, **kwargs)
            if not grown and (isinstance(target, int) or os.fspath(target) == str(path)):
                with path.open("a") as out:  # the same file, grown after its size was read
                    out.write("y" * 200)
                grown.append(1)
            return info

        return look

    monkeypatch.setattr(os, "stat", grow_after(os.stat))
    monkeypatch.setattr(os, "fstat", grow_after(os.fstat))
    with pytest.raises(InvalidInputError, match=r"queries\.jsonl: more than 100 bytes; the limit is 100"):
        _textfile.read_text_file(path)
    assert grown == [1]


def test_bad_command_line_text_is_one_line(dsn: str, tmp_path: Path) -> None:
    path = tmp_path / "tools.jsonl"
    path.write_text(tool_line() + "\n")
    assert run(dsn, "-c", "good", "import", str(path)).returncode == 0
    one_clear_line(run(dsn, "-c", "good", "route", b"send \xff\xfe email"), "not valid Unicode", 2)  # a usage error
    one_clear_line(run(dsn, "-c", "bad\x01name", "import", str(path)), "'-c': catalog name must be", 2)
    out_of_range = run(dsn, "-c", "good", "route", "x", "-k", str(10**9))  # click's range (36b4ef6): a usage error
    err = out_of_range.stderr.decode(errors="replace")
    assert out_of_range.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "error: Invalid value for '-k' / '--k': 1000000000 is not in the range 1<=x<=1000 (see " in err, err
    one_clear_line(run(dsn, "-c", "good", "route", "x", "--weights", "dense=1e308"), "weight for 'dense'", 2)


def test_the_library_refuses_bad_tools_naming_them(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="lib") as store:
        cases = [
            (Tool(id="a", name="n", parameters=nested(100)), "parameters is nested deeper"),
            (Tool(id="a", name="n", parameters={"type": "object", "default": float("nan")}), "NaN"),
            (Tool(id="a", name="n", parameters={"type": "object", "maximum": 10**5000}), "integer over"),
            (Tool(id="a", name="n", description="\udcff"), "description is not valid Unicode"),
            (Tool(id="a" * 300, name="n"), "id is 300 characters long"),
            (Tool(id="a", name="n", keywords=("k",) * 2000), "keywords must be a list of at most 1000"),
            (Tool(id="a", name="n", spec={"x": object()}), "spec holds a object"),
            (Tool(id="a", name="n", spec=[1, 2]), r"tool #1 \('a'\): spec must be a JSON object or None, got list"),  # type: ignore[arg-type]
            (Tool(id="a", name="n", spec="text"), "spec must be a JSON object or None, got str"),  # type: ignore[arg-type]
            (Tool(id="a", name="n", spec={"x": "y" * 10**6}), "spec is over 1,000,000 characters long as JSON"),
            (Tool(id="a", name="n", parameters={"enum": ["y" * 1000] * 1000}), "parameters is over 1,000,000"),
            # as an import refuses them: an export held a schema no SDK takes, which its re-import refused
            (Tool(id="a", name="n", parameters={"type": "string"}), r'must be .*"type": "object", got .string'),
            (Tool(id="a", name="n", parameters={"type": "object", "properties": []}), "parameters.properties must be"),
            # each field under its own cap; split identifiers and the schema's text push the indexed text over
            (Tool(id="a", name="n", description="ab_cd " * 16_000, parameters=WIDE), "description field is over"),
            (Tool(id="a", name="n", expansion="aBcDeFgH " * 11_000), "expansion field is over 200,000"),
        ]
        for tool, message in cases:
            with pytest.raises(InvalidToolError, match=message):
                store.upsert([tool])
        assert "lib" not in [c["name"] for c in store.catalogs()]


@pytest.mark.parametrize(
    ("bad", "message"),
    [("a\x00", "tool id contains a NUL byte"), (5, "tool id must be a string, got int"), ("a" * 300, "limit is 256")],
    ids=["NUL", "int", "long"],
)
def test_remove_checks_the_tool_id(store: ToolStore, bad: object, message: str) -> None:
    store.upsert([Tool(id="a", name="a", description="alpha")])
    with pytest.raises(InvalidInputError, match=message):
        store.remove(bad)  # type: ignore[arg-type]
    assert [t.id for t in store.tools()] == ["a"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.get("a\x00"), "tool id contains a NUL byte"),
        (lambda s: s.get(5), "tool id must be a string, got int"),
        (lambda s: s.tools(["a", "b" * 300]), "tool id #2 is 300 characters long"),
        (lambda s: s.tools("a"), "tool ids must be a list of strings, got str"),
        (lambda s: s.resolve("a", among=["a\x00"]), "tool id #1 contains a NUL byte"),
        (lambda s: s.resolve("a", among="a"), "tool ids must be a list of strings, got str"),
        # was read letter by letter: [None, None, None] for "abc"
        (lambda s: s.resolve_calls("abc"), "expected a list of call names, got 'abc'"),
        (lambda s: s.resolve_calls(5), "expected a list of call names, got 5"),  # a TypeError out of iteration
    ],
    ids=[
        "get NUL",
        "get int",
        "tools long",
        "tools str",
        "resolve among",
        "resolve among str",
        "resolve_calls str",
        "resolve_calls int",
    ],
)
def test_reads_by_id_check_the_ids(store: ToolStore, call: Any, message: str) -> None:
    store.upsert([Tool(id="a", name="a", description="alpha")])
    with pytest.raises(InvalidInputError, match=message):
        call(store)


def test_reads_by_id_take_any_sequence_or_set_of_ids(store: ToolStore) -> None:
    store.upsert([Tool(id="a", name="a", description="alpha")])
    assert [t.id for t in store.tools({"a": 1}.keys())] == ["a"]


def test_a_single_value_where_a_write_takes_a_list_is_named_by_both_stores(dsn: str, store: ToolStore) -> None:
    """store.upsert(Tool(...)) (one tool, not a list), add_examples(IntentExample(...)), add_anchors(Anchor(...)) and
    remove_anchors(3) were a TypeError ("'Tool' object is not iterable") out of list(), and a str or a mapping was read
    item by item (upsert("tools.json"): 'tool #1: expected a toolstore.Tool, got str'); each is an InvalidInputError
    naming what must be a list, alike on both stores, and nothing is written."""
    store.upsert([Tool(id="a", name="a", description="alpha")])
    refusals = [
        ("upsert", Tool(id="b", name="b", description="beta"), "tools must be a list, not a single Tool"),
        ("upsert", "tools.json", "tools must be a list, not a single str"),
        ("upsert", {"id": "b", "name": "b"}, "tools must be a list, not a single dict"),
        ("add_examples", IntentExample("a", "do alpha"), "intent examples must be a list, not a single IntentExample"),
        ("add_anchors", Anchor(r"\malpha", "a"), "anchors must be a list, not a single Anchor"),
        ("replace_anchors", Anchor(r"\malpha", "a"), "anchors must be a list, not a single Anchor"),
        ("remove_anchors", 3, "anchor ids must be a list, not a single int"),
        # None, an unset value, was 'not a single NoneType'
        ("upsert", None, "^tools must be a list, got None$"),
        ("add_examples", None, "^intent examples must be a list, got None$"),
        ("remove_anchors", None, "^anchor ids must be a list, got None$"),
    ]

    async def run_async() -> list[str]:
        errors = []
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="test", create=False) as astore:
            for method, value, _ in refusals:
                with pytest.raises(InvalidInputError) as refused:
                    await getattr(astore, method)(value)
                errors.append(str(refused.value))
        return errors

    for (method, value, message), async_error in zip(refusals, asyncio.run(run_async())):
        with pytest.raises(InvalidInputError, match=message) as refused:
            getattr(store, method)(value)
        assert async_error == str(refused.value), method
    assert [t.id for t in store.tools()] == ["a"] and store.info().n_examples == 0 and store.anchors() == []


def test_add_examples_names_a_bad_example(store: ToolStore) -> None:
    store.upsert([Tool(id="a", name="a", description="alpha")])
    with pytest.raises(InvalidInputError, match="intent example #1: expected an IntentExample, got dict"):
        store.add_examples([{"tool_id": "a", "query": "do alpha"}])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="intent example #2: expected an IntentExample, got list"):
        store.add_examples([IntentExample("a", "do alpha"), ["a", "do alpha"]])  # type: ignore[list-item]
    assert store.info().n_examples == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("sessions", "retention", "--max-calls", "nan"), "--max-calls: 'nan' is not a whole number or 'none'"),
        (("sessions", "retention", "--max-calls", "1e400"), "--max-calls: '1e400' is not a whole number or 'none'"),
        (("sessions", "retention", "--max-age-days", "inf"), "--max-age-days: 'inf' is not a number or 'none'"),
        (("sessions", "prune", "--older-than", "99999999999d"), "too long"),
    ],
    ids=["nan calls", "huge calls", "infinite days", "huge duration"],
)
def test_bad_session_arguments_are_one_line(dsn: str, args: tuple[str, ...], needle: str) -> None:
    """Found by bench/fuzz_inputs.py: these were OverflowError / ValueError tracebacks. Usage errors (exit 2)."""
    with ToolStore(dsn, embedder=None, catalog="conv") as store:
        store.upsert([Tool(id="a.send", name="send", description="Send a message")])
    one_clear_line(run(dsn, "-c", "conv", *args), needle, 2)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", math.inf),
        ("timeout", math.nan),
        ("timeout", "5"),
        ("timeout", None),
        ("timeout", 0),
        ("pool_size", 0),
        ("pool_size", -1),
        ("pool_size", "4"),
        ("pool_size", 2.5),
        ("embedder_cooldown", math.nan),
        ("embedder_cooldown", -1),
        ("embedder_cooldown", "30"),
    ],
)
def test_bad_store_options_are_invalid_input_naming_them(dsn: str, option: str, value: object) -> None:
    with pytest.raises(InvalidInputError, match=option):
        ToolStore(dsn, embedder=None, **{option: value})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=option):
        AsyncToolStore(dsn, embedder=None, **{option: value})  # type: ignore[arg-type]


def test_an_embedder_that_is_no_embedder_is_named_by_both_stores_and_reembed(dsn: str, store: ToolStore) -> None:
    """ToolStore(embedder=5) was taken and failed at the first route ('int' object has no attribute 'model'), and
    store.reembed("hashing") or reembed(None) (the CLI's spec, not an Embedder) ended in "'str' object has no attribute
    'cache_key'"; both stores name the value at once, and the catalog keeps its model."""
    store.upsert([Tool(id="a", name="a", description="alpha")])
    for value in (5, object()):
        for make in (ToolStore, AsyncToolStore):
            with pytest.raises(InvalidInputError, match="embedder must be an Embedder, 'default' or None, got "):
                make(dsn, embedder=value, catalog="test")  # type: ignore[arg-type]

    async def reembed_async(value: object) -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="test", create=False) as astore:
            await astore.reembed(value)  # type: ignore[arg-type]

    for value in ("hashing", None):
        for reembed in (store.reembed, lambda v: asyncio.run(reembed_async(v))):
            with pytest.raises(
                InvalidInputError, match=f"reembed needs an Embedder, such as LocalEmbedder\\(\\), got {value!r}"
            ):
                reembed(value)  # type: ignore[arg-type]
    assert store.info().embed_model == HashingEmbedder(64).model


def test_a_flag_that_is_no_bool_is_refused_not_taken_for_its_truth(dsn: str, store: ToolStore) -> None:
    """A setting read as text passed on as a flag, upsert(tools, prune="false"), was true: it pruned every tool the
    list left out (add_anchors(replace="no") removed the other anchors; migrate(revision="0017", downgrade="false")
    would go down). Every True/False argument of the stores and migrate() refuses anything else, naming it, before
    anything is written; route()'s (abstain, explore) did already."""
    store.upsert([Tool(id="a", name="a", description="alpha"), Tool(id="b", name="b", description="beta")])
    store.add_anchors([Anchor(r"\mbeta", "b")])
    refusals: list[tuple[str, Any]] = [
        ("prune", lambda: store.upsert([Tool(id="a", name="a", description="alpha")], prune="false")),
        ("replace", lambda: store.add_anchors([Anchor(r"\malpha", "a")], replace="no")),
        ("save", lambda: store.tune([], save="no")),
        ("write", lambda: store.grant("nobody_at_all", write="no")),
        ("tenant", lambda: store.revoke("nobody_at_all", tenant=0)),
        ("downgrade", lambda: migrate(dsn, revision="0017", downgrade="false")),
        ("create", lambda: ToolStore(dsn, embedder=None, catalog="new", create="false")),
        ("migrate", lambda: ToolStore(dsn, embedder=None, migrate="no")),
        ("create", lambda: AsyncToolStore(dsn, embedder=None, create=1)),
        ("migrate", lambda: AsyncToolStore(dsn, embedder=None, migrate="no")),
    ]
    for name, call in refusals:
        with pytest.raises(InvalidTypeError, match=f"^{name} must be True or False, got "):
            call()

    async def prune_async() -> None:
        async with AsyncToolStore(dsn, embedder=HashingEmbedder(64), catalog="test", create=False) as astore:
            with pytest.raises(InvalidTypeError, match="^prune must be True or False, got 'false'$"):
                await astore.upsert([Tool(id="a", name="a", description="alpha")], prune="false")  # type: ignore[arg-type]

    asyncio.run(prune_async())
    assert [t.id for t in store.tools()] == ["a", "b"] and [a.tool for a in store.anchors()] == ["b"]
    assert migrate(dsn) is not None and [c["name"] for c in store.catalogs()] == ["test"]
