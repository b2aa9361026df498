"""What the command line says of what it did, or refuses: an anchors import that replaces them all, an embedder wider
than pgvector, a migration below the current revision, a prune of an unknown session, a malformed line of a labelled
file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_user import invoke, migrate_refused, on_terminal, sessions_file, tools_file

from toolstore import Anchor, AsyncToolStore, ToolStore, _anchors
from toolstore._migrate import HEAD_REVISION
from toolstore.testing.fake_openai import FakeOpenAI

RULES = [
    {"pattern": r"\mmail\M", "tool": "gmail.send_email", "boost": 0.5},
    {"pattern": r"\missue\M", "tool": "github.create_issue", "boost": 0.5},
]


def anchored(dsn: str, tmp_path: Path) -> Path:
    """A catalog 'anchored' holding the two RULES; the path of an anchors file for the next import."""
    assert invoke(dsn, "-c", "anchored", "import", tools_file(tmp_path)).exit_code == 0
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    assert invoke(dsn, "-c", "anchored", "anchors", "import", str(rules)).exit_code == 0
    return tmp_path / "next.json"


def test_anchors_import_replace_says_what_it_removed(dsn: str, tmp_path: Path) -> None:
    """`anchors import FILE --replace` said only what it wrote ('no anchors written' for a file that removed every
    anchor); it says how many of the catalog's anchors went, in JSON ('removed') and on a terminal."""
    path = anchored(dsn, tmp_path)
    path.write_text(json.dumps(RULES[:1] + [{"pattern": r"\mforecast\M", "tool": "weather.forecast"}]))
    result = invoke(dsn, "-c", "anchored", "anchors", "import", str(path), "--replace")
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.stdout)
    assert report["removed"] == 1 and [a["tool"] for a in report["anchors"]] == ["gmail.send_email", "weather.forecast"]
    path.write_text(json.dumps(RULES))
    code, out, err = on_terminal(dsn, "-c", "anchored", "anchors", "import", str(path), "--replace")
    assert code == 0 and out.splitlines()[-1] == "removed 1 anchor, wrote 2", (out, err)
    result = invoke(dsn, "-c", "anchored", "anchors", "import", str(path))  # without --replace nothing goes
    assert result.exit_code == 0 and json.loads(result.stdout)["removed"] == 0, result.output


def test_anchors_import_replace_of_an_empty_file_is_refused_unless_allowed(dsn: str, tmp_path: Path) -> None:
    """`anchors import FILE --replace` with FILE `[]` (a failed export, say) deleted every anchor of the catalog and
    printed 'no anchors written'; it is refused, nothing removed, unless --allow-empty, and then says what went."""
    path = anchored(dsn, tmp_path)
    path.write_text("[]")
    result = invoke(dsn, "-c", "anchored", "anchors", "import", str(path), "--replace")
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "holds no anchors: --replace would remove every anchor of the catalog; give --allow-empty" in result.output
    assert len(json.loads(invoke(dsn, "-c", "anchored", "anchors", "list").stdout)["anchors"]) == 2
    result = invoke(dsn, "-c", "anchored", "anchors", "import", str(path), "--replace", "--allow-empty")
    assert result.exit_code == 0 and json.loads(result.stdout)["removed"] == 2, result.output
    assert json.loads(invoke(dsn, "-c", "anchored", "anchors", "list").stdout)["anchors"] == []


def test_anchors_import_replace_counts_what_its_write_removed(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`anchors import --replace` counted what went against `anchors list` read before the write, so an anchor another
    writer added in between was removed and not counted; the count is the write's own (its DELETE ... RETURNING)."""
    path = anchored(dsn, tmp_path)
    path.write_text(json.dumps(RULES[:1]))
    locking = _anchors.lock_catalog

    def another_writer_first(conn: Any, catalog: str, **options: Any) -> Any:  # before the import's write locks
        monkeypatch.setattr(_anchors, "lock_catalog", locking)
        with ToolStore(dsn, embedder=None, catalog="anchored") as other:
            other.add_anchors([Anchor(r"\mforecast\M", "weather.forecast")])
        return locking(conn, catalog, **options)

    monkeypatch.setattr(_anchors, "lock_catalog", another_writer_first)
    result = invoke(dsn, "-c", "anchored", "anchors", "import", str(path), "--replace")
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.stdout)
    assert report["removed"] == 2 and [a["tool"] for a in report["anchors"]] == ["gmail.send_email"], report
    with ToolStore(dsn, embedder=None, catalog="anchored") as store:
        assert [a.tool for a in store.anchors()] == ["gmail.send_email"]
        written, removed = store.replace_anchors([*store.anchors(), Anchor(r"\missue\M", "github.create_issue")])
        assert removed == 0 and len(written) == 2

    async def replaced_async() -> tuple[list[Anchor], int]:
        async with AsyncToolStore(dsn, embedder=None, catalog="anchored") as store:
            return await store.replace_anchors([Anchor(r"\mmail\M", "gmail.send_email")])

    written, removed = asyncio.run(replaced_async())
    assert removed == 1 and [a.tool for a in written] == ["gmail.send_email"]


def test_an_openai_embedder_wider_than_pgvector_is_refused_before_its_server(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--embedder openai/MODEL@99999999999999` was taken until the server (or pgvector, past 16,000 dimensions)
    refused it; the width of every embedder's spec is checked where the hashing embedder's is, before any request
    (as the option is read: a usage error)."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        spec = "openai/text-embedding-3-large@99999999999999"
        result = invoke(dsn, "--embedder", spec, "-c", "wide", "import", tools_file(tmp_path))
        assert result.exit_code == 2 and (
            f"embedder '{spec}': its dimensions must be at most 16,000 (a pgvector column's), got 99999999999999"
        ) in " ".join(result.output.split()), (result.exception, result.output)
        assert server.requests == []
    assert "wide" not in [c["name"] for c in json.loads(invoke(dsn, "catalogs").stdout)["catalogs"]]


@pytest.mark.parametrize(
    ("revision", "number"),
    [
        ("head-1", f"{int(HEAD_REVISION) - 1:04d}"),
        ("base+1", "0001"),
        (f"{HEAD_REVISION}-2", f"{int(HEAD_REVISION) - 2:04d}"),
    ],
)
def test_migrate_below_the_current_revision_without_downgrade_says_so(dsn: str, revision: str, number: str) -> None:
    """`migrate --revision head-1` (a step below the current revision) without --downgrade did nothing and exited 0, as
    alembic's upgrade does; it is an error naming the current revision and --downgrade, nothing migrated."""
    assert migrate_refused(dsn, "migrate", "--revision", revision) == (
        f"schema 'toolstore' is at {HEAD_REVISION}, past {revision!r} ({number}): to go down to it, downgrade "
        "(--downgrade)"
    )


def test_migrate_downgrade_to_a_revision_above_the_current_one_says_so(dsn: str) -> None:
    """`migrate --revision 0026 --downgrade` on a schema at 0025 (or any revision on a schema never migrated) said
    alembic's "Destination 0026 is not a valid downgrade target from current head(s)"; as for the mirrored case (a
    revision below without --downgrade), it names the current revision and says to leave out --downgrade."""
    below = f"{int(HEAD_REVISION) - 1:04d}"
    assert invoke(dsn, "migrate", "--revision", below, "--downgrade").exit_code == 0
    for revision, named in ((HEAD_REVISION, repr(HEAD_REVISION)), ("base+2", "'base+2' (0002)")):
        at = "at " + below if revision == HEAD_REVISION else "not migrated"
        schema = "toolstore" if revision == HEAD_REVISION else "never_migrated"
        result = invoke(dsn, "--schema", schema, "migrate", "--revision", revision, "--downgrade")
        assert result.exit_code == 1 and str(result.exception) == (
            f"schema {schema!r} is {at}, below {named}: a downgrade cannot go up to it; to upgrade, leave out "
            "--downgrade"
        ), (result.exception, result.output)
    assert json.loads(invoke(dsn, "migrate").stdout)["revision"] == HEAD_REVISION


def test_sessions_prune_of_an_unknown_session_says_so(dsn: str, tmp_path: Path) -> None:
    """`sessions prune --session nosuch` exited 0 without a word, as for a session it forgot; it still exits 0 (a
    script may forget a session twice) but says there was no such session: on stderr on a terminal, and
    `session_found` in JSON."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--session", "nosuch")
    assert result.exit_code == 0 and json.loads(result.stdout)["session_found"] is False, result.output
    code, out, err = on_terminal(dsn, "-c", "log", "sessions", "prune", "--session", "nosuch")
    assert code == 0 and out == "calls: 0, sessions: 0\n", (out, err)
    assert err == "no session 'nosuch' in catalog 'log': nothing of it to prune\n"
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--session", "s1")
    assert result.exit_code == 0 and json.loads(result.stdout) == {
        "version": json.loads(result.stdout)["version"],
        "calls": 2,
        "sessions": 1,
        "session_found": True,
    }


LABELLED = {
    "eval --queries": {"qid": "q", "query": "mail bob", "relevant": ["gmail.send_email"]},
    "examples": {"qid": "q", "query": "mail bob", "relevant": ["gmail.send_email"]},
    "tune --examples": {"qid": "q", "query": "mail bob", "relevant": ["gmail.send_email"]},
    "sessions import": {"sid": "s", "turns": [{"query": "mail bob", "relevant": ["gmail.send_email"]}]},
    "tune --negatives": {"query": "bake a cake"},
}


@pytest.mark.parametrize("reader", list(LABELLED))
@pytest.mark.parametrize("line", ["{not json", "NUL"], ids=["not json", "a NUL byte"])
def test_a_malformed_line_of_a_labelled_file_names_the_file_and_line(
    dsn: str, tmp_path: Path, reader: str, line: str
) -> None:
    """The readers of labelled files (queries and train sets, sessions, negatives) named a bad line each their own
    way: a negatives request that route() refuses (a NUL byte) passed the reader and failed later as 'negative request
    #2', naming neither file nor line. One rule (`_input.json_lines` and `check_at`): an InvalidInputError starting
    'FILE line N[, column C]: '."""
    assert invoke(dsn, "-c", "labelled", "import", tools_file(tmp_path)).exit_code == 0
    good = LABELLED[reader]
    bad = json.dumps(good).replace("mail bob", "mail\\u0000bob").replace("bake a cake", "bake\\u0000a cake")
    path = tmp_path / "labelled.jsonl"
    path.write_text(json.dumps(good) + "\n" + (bad if line == "NUL" else line) + "\n")
    train = tmp_path / "train.jsonl"
    rows = [{"qid": f"q{i}", "query": f"send mail {i}", "relevant": ["gmail.send_email"]} for i in range(3)]
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = {
        "eval --queries": ["eval", "--tools", tools_file(tmp_path), "--queries", str(path)],
        "examples": ["examples", str(path)],
        "tune --examples": ["tune", "--examples", str(path)],
        "sessions import": ["sessions", "import", str(path)],
        "tune --negatives": ["tune", "--examples", str(train), "--negatives", str(path)],
    }[reader]
    result = invoke(dsn, "-c", "labelled", *args)
    where = f"{path} line 2: " if line == "NUL" else f"{path} line 2, column 2: "
    assert result.exit_code == 1 and str(result.exception).startswith(where), (
        result.exception,
        result.output,
    )
    with ToolStore(dsn, embedder=None, catalog="labelled") as store:
        assert "fusion" not in store.info().settings and store.sessions() == []


def test_counts_agree_with_their_noun_and_an_empty_route_says_no_tools(dsn: str, tmp_path: Path) -> None:
    """`toolstore catalogs` said "1 tools" (every count on a terminal took the plural), and a route on a catalog
    without tools printed a bare table header; one takes the singular, and an empty route says "no tools"."""
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps({"id": "weather.forecast", "name": "forecast", "description": "Weather forecast"}))
    for catalog in ("one_tool", "emptied"):
        assert invoke(dsn, "-c", catalog, "import", str(single)).exit_code == 0
    assert invoke(dsn, "-c", "emptied", "remove", "weather.forecast").exit_code == 0
    code, out, err = on_terminal(dsn, "catalogs")
    line = next(line for line in out.splitlines() if line.startswith("one_tool "))
    assert code == 0 and line.split()[1:3] == ["1", "tool"], (line, err)
    code, out, err = on_terminal(dsn, "-c", "one_tool", "export", "-o", str(tmp_path / "export.json"))
    assert code == 0 and f"1 tool written to {tmp_path / 'export.json'}" in err, (out, err)
    code, out, err = on_terminal(dsn, "-c", "emptied", "route", "weather tomorrow")
    assert code == 0 and "no tools" in out.splitlines() and "score" not in out, (out, err)


def _named_file_cases(tmp_path: Path) -> dict[str, tuple[list[str], str, str]]:
    """Each command that writes a file's content, with a file the library refuses at the database stage: its
    arguments, the file and the start of the library's own message."""
    one = {"qid": "q1", "query": "mail bob", "relevant": ["gmail.send_email"]}
    turn = {"query": "mail bob", "relevant": ["nope.tool"]}
    files = {
        "anchors.json": json.dumps([{"pattern": "(", "tool": "gmail.send_email"}]),
        "rules.json": json.dumps([{"pattern": "mail", "tool": "nope.tool"}]),
        "examples.jsonl": json.dumps({**one, "relevant": ["nope.tool"]}) + "\n",
        "sessions.jsonl": json.dumps({"sid": "s1", "turns": [{**turn, "calls": ["nope.tool"]}]}) + "\n",
        "one.jsonl": json.dumps(one) + "\n",
        "one_session.jsonl": json.dumps({"sid": "s1", "turns": [{**turn, "calls": []}]}) + "\n",
        "huge.json": json.dumps([{"name": "huge", "description": "x" * 100_001}]),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {
        "anchors import, a pattern": (["anchors", "import"], "anchors.json", "anchor #1 pattern"),
        "anchors import, a tool": (["anchors", "import"], "rules.json", "anchors name"),
        "examples": (["examples"], "examples.jsonl", "intent examples name 1 tool(s)"),
        "import": (["import"], "huge.json", "tool #1 ('huge'): description is 100,001 characters long"),
        "sessions import": (["sessions", "import"], "sessions.jsonl", "1 called tool(s) match no tool"),
        "tune --examples": (["tune", "--examples"], "one.jsonl", "tuning needs at least 2"),
        "tune --sessions": (["tune", "--sessions"], "one_session.jsonl", "session 's1' turn 1 names tool(s)"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "anchors import, a pattern",
        "anchors import, a tool",
        "examples",
        "import",
        "sessions import",
        "tune --examples",
        "tune --sessions",
    ],
)
def test_what_the_store_refuses_of_a_files_content_names_the_file(dsn: str, tmp_path: Path, case: str) -> None:
    """`anchors import`, `examples`, `import`, `sessions import` and `tune` said what the database stage refused of a
    file ("anchor #1 pattern '(' is not a regular expression", "intent examples name 1 tool(s) not in catalog ...", a
    description over the limit: "tool #1 ('huge'): description is 100,001 characters long") without the file; the
    error starts with it now, as a reader's "FILE line N: ..." does, and the library's message follows."""
    assert invoke(dsn, "-c", "named", "import", tools_file(tmp_path)).exit_code == 0
    args, name, message = _named_file_cases(tmp_path)[case]
    result = invoke(dsn, "-c", "named", *args, str(tmp_path / name))
    assert result.exit_code == 1 and str(result.exception).startswith(f"{tmp_path / name}: {message}"), (
        result.exception,
        result.output,
    )


def test_tune_blames_no_file_for_an_error_of_its_files_together(dsn: str, tmp_path: Path) -> None:
    """`tune --examples A --sessions B` put both files before any error it could not place in one: "A, B: tuning needs
    at least 2 labelled requests, got 1" of an examples file holding one request and a sessions file holding no
    labelled turn, and "A, B: session 's1' turn 1 names tool(s) ..." of a sessions file's error, blaming the examples
    file too. With several files no file is named: the message says which input (the sessions, the examples and the
    sessions together); with one, it names that file as before."""
    assert invoke(dsn, "-c", "together", "import", tools_file(tmp_path)).exit_code == 0
    one = {"qid": "q1", "query": "mail bob", "relevant": ["gmail.send_email"]}
    files = {
        "one.jsonl": json.dumps(one),
        "unlabelled.jsonl": json.dumps({"sid": "s1", "turns": [{"query": "hi there", "relevant": [], "calls": []}]}),
        "unknown.jsonl": json.dumps({"sid": "s1", "turns": [{"query": "mail bob", "relevant": ["nope.tool"]}]}),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    examples = ["--examples", str(tmp_path / "one.jsonl")]
    for sessions, said in [
        (
            "unlabelled.jsonl",
            "tuning needs at least 2 labelled requests (the examples and the sessions' labelled turns together), got 1",
        ),
        ("unknown.jsonl", "session 's1' turn 1 names tool(s) not in catalog 'together': 'nope.tool'"),
    ]:
        result = invoke(dsn, "-c", "together", "tune", *examples, "--sessions", str(tmp_path / sessions))
        assert result.exit_code == 1 and str(result.exception) == said, (result.exception, result.output)
    result = invoke(dsn, "-c", "together", "tune", *examples)
    assert str(result.exception) == f"{tmp_path / 'one.jsonl'}: tuning needs at least 2 labelled requests, got 1"


def test_only_input_errors_are_said_to_be_a_files() -> None:
    """A closed store and the database's errors are not the file's fault: they pass unchanged."""
    from toolstore._errors import DatabaseError, InvalidInputError, StoreClosedError
    from toolstore.cli.app import reading

    for error in (StoreClosedError("the store is closed"), DatabaseError("the database is down")):
        with pytest.raises(type(error)) as raised, reading(Path("f.json")):
            raise error
        assert raised.value is error
    with pytest.raises(InvalidInputError, match=r"^f\.json: bad$"), reading(Path("f.json")):
        raise InvalidInputError("bad")
