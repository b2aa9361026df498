"""What a user of the command line sees: a misspelt --schema refused, options named in errors, route's table and
JSON, empty lists, the demo's lines."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result
from terminal import answered, open_terminal, read_all

from toolstore import SIGNALS, AsyncToolStore, DatabaseError, InvalidInputError, SessionCall, ToolStore
from toolstore._migrate import HEAD_REVISION
from toolstore.cli import cli
from toolstore.cli import main as entry
from toolstore.cli.demo import DEMO_DIR

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "github.create_issue", "name": "create_issue", "description": "Open an issue in a GitHub repository"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]


def invoke(dsn: str, *args: str) -> Result:
    """The CLI on ``dsn`` with the hashing embedder; a library error is the result's exception (the entry point
    prints it as one line)."""
    return CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args])


def on_terminal(dsn: str, *args: str) -> tuple[int, str, str]:
    """The CLI with its stdout on a pseudo-terminal, as a user sees it: exit status, stdout, stderr."""
    leader, follower = open_terminal(200)
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args]
    proc = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    drawn = read_all(leader)
    err = proc.stderr.read().decode() if proc.stderr else ""
    return proc.wait(timeout=300), drawn.replace("\r\n", "\n"), err


def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TOOLS))
    return str(path)


def schemas(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute("select nspname from pg_namespace")}


READS = [
    ("list",),
    ("catalogs",),
    ("route", "send an email"),
    ("export",),
    ("remove", "gmail.send_email"),
    ("sessions", "list"),
    ("sessions", "show", "s1"),
    ("sessions", "retention"),
    ("anchors", "list"),
    ("cache", "prune"),
    ("grants",),
    ("serve", "mcp"),
]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a[:2]) for a in READS])
def test_a_misspelt_schema_is_refused_not_created(dsn: str, args: tuple[str, ...]) -> None:
    """A command that reads or changes a catalog, given --schema of a schema that does not exist, created and
    migrated it (ToolStore's migrate=True) and then said there was no catalog; it names the schema and `migrate`."""
    result = invoke(dsn, "--schema", "tolstore", *args)
    assert result.exit_code == 1 and isinstance(result.exception, DatabaseError), result.output
    assert str(result.exception) == (
        "schema 'tolstore' holds no toolstore catalog (never migrated: a misspelt --schema?); "
        "`toolstore migrate --schema tolstore` creates it"
    )
    assert "tolstore" not in schemas(dsn)


def test_the_default_schema_of_a_fresh_database_is_no_misspelt_one(empty_dsn: str) -> None:
    """The refusal is for a --schema given: on a fresh database, `catalogs` (the default schema, never migrated yet)
    lists none, as before, rather than asking whether `toolstore` was misspelt."""
    result = invoke(empty_dsn, "catalogs")
    assert result.exit_code == 0 and json.loads(result.stdout)["catalogs"] == [], result.output


def test_a_command_that_sets_up_still_creates_its_schema(empty_dsn: str, tmp_path: Path) -> None:
    result = invoke(empty_dsn, "--schema", "fresh", "import", tools_file(tmp_path))
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == 3, result.output
    assert "fresh" in schemas(empty_dsn)
    assert len(json.loads(invoke(empty_dsn, "--schema", "fresh", "list").stdout)["tools"]) == 3


def sessions_file(tmp_path: Path) -> str:
    path = tmp_path / "sessions.jsonl"
    turns = [{"query": "mail bob", "relevant": ["gmail.send_email"], "calls": ["gmail.send_email", "weather.forecast"]}]
    path.write_text(json.dumps({"sid": "s1", "turns": turns}) + "\n")
    return str(path)


def logged_calls(dsn: str) -> int:
    """How many calls the sessions of catalog ``log`` have logged."""
    return sum(s["calls"] for s in json.loads(invoke(dsn, "-c", "log", "sessions", "list").stdout)["sessions"])


def on_terminal_answering(dsn: str, answer: bytes, *args: str) -> tuple[int, str, str]:
    """The CLI with its stdin and stdout a terminal on which the user types ``answer``: exit status, what the terminal
    shows, stderr."""
    return answered([sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args], answer)


@pytest.mark.parametrize("zero", ["0", "0s", "0.0d"])
def test_sessions_prune_older_than_zero_deletes_every_call_as_the_library_does_once_confirmed(
    dsn: str, tmp_path: Path, zero: str
) -> None:
    """The library takes prune_sessions(older_than=timedelta(0)) for every call of the catalog, but `sessions prune
    --older-than 0` was refused ('not a duration over 0'): the two disagreed, and the command line could not do what
    the library does. It does it now, as drop-catalog drops: asked first on a terminal ('n' deletes nothing), with
    --yes elsewhere, where without it it is a usage error that deletes nothing (a slip of the finger still wipes no
    log); with --session it deletes that session's calls alone, without asking (as --session alone forgets it)."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--older-than", zero)
    said = "--older-than 0 deletes every logged call: it needs --yes when not asked on a terminal"
    assert result.exit_code == 2 and said in result.output, result.output
    assert logged_calls(dsn) == 2
    status, drawn, err = on_terminal_answering(dsn, b"n\n", "-c", "log", "sessions", "prune", "--older-than", zero)
    assert (status, err) == (130, "delete every logged call of catalog 'log'? [y/N]: aborted\n"), (status, err)
    assert logged_calls(dsn) == 2
    status, drawn, err = on_terminal_answering(dsn, b"y\n", "-c", "log", "sessions", "prune", "--older-than", zero)
    assert status == 0 and "calls: 2" in drawn, (status, drawn, err)
    assert logged_calls(dsn) == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--older-than", zero, "--session", "s1")
    assert result.exit_code == 0 and json.loads(result.stdout)["calls"] == 2, result.output
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--older-than", zero, "--yes")
    assert result.exit_code == 0 and json.loads(result.stdout)["calls"] == 2, result.output
    assert "asks first or needs --yes" in " ".join(invoke(dsn, "sessions", "prune", "--help").stdout.split())


OUT_OF_RANGE = [
    (("route", "weather", "--split", "-1"), "Invalid value for '--split': '-1' is not a number from 0 to 1e+06"),
    (("route", "weather", "--split", "nan"), "Invalid value for '--split': 'nan' is not a number from 0 to 1e+06"),
    (
        ("anchors", "add", "--pattern", "rain", "--tool", "weather.forecast", "--boost", "0"),
        "Invalid value for '--boost': '0' is not a non-zero number from -10 to 10",
    ),
    (("demo", "-k", "1001"), "Invalid value for '-k' / '--k': 1001 is not in the range 1<=x<=1000"),
    (("demo", "--budget", "10000001"), "Invalid value for '--budget': 10000001 is not in the range 0<=x<=10000000"),
    (("serve", "mcp", "-k", "1001"), "Invalid value for '-k' / '--k': 1001 is not in the range 1<=x<=1000"),
    (
        ("eval", "--tools", "TOOLS", "--queries", "TOOLS", "-k", "1001"),
        "Invalid value for '-k' / '--k': 1001 is not in the range 1<=x<=1000",
    ),
]


@pytest.mark.parametrize(("args", "message"), OUT_OF_RANGE, ids=[" ".join(a[:3]) for a, _ in OUT_OF_RANGE])
def test_an_option_out_of_the_librarys_range_names_the_option(
    dsn: str, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """These options reached the library's checks, which name its arguments ('split must be a finite number ...',
    'k must be an integer from 1 to 1000', 'token_budget must be None or ...', 'anchor #1 boost must be ...'),
    after the demo or eval had loaded its catalog, or at the MCP server's first find_tools; each is a usage error
    naming the option, before anything runs."""
    tools = tools_file(tmp_path)
    assert invoke(dsn, "-c", "ranged", "import", tools).exit_code == 0
    result = invoke(dsn, "-c", "ranged", *(tools if a == "TOOLS" else a for a in args))
    assert result.exit_code == 2 and message in result.output, (result.exit_code, result.output)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-calls", "0", "--max-calls: '0' is not a whole number or 'none' (calls, from 1 to 10,000,000)"),
        (
            "--max-age-days",
            "0",
            "--max-age-days: '0' is not a number or 'none' (days, from 1 second (1/86,400 of a day) to 100,000)",
        ),
        (
            "--max-age-days",
            "100001",
            "--max-age-days: '100001' is not a number or 'none' (days, from 1 second (1/86,400 of a day) to 100,000)",
        ),
    ],
)
def test_sessions_retention_out_of_range_names_the_option(
    dsn: str, tmp_path: Path, option: str, value: str, message: str
) -> None:
    """`sessions retention --max-calls 0` printed 'max_calls must be None or an integer from 1 to 10,000,000, got 0':
    the library's argument, and None, where the user wrote --max-calls and 'none'."""
    assert invoke(dsn, "-c", "kept", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "kept", "sessions", "retention", option, value)
    assert result.exit_code == 2 and f"Invalid value for {message}" in result.output, result.output
    kept = json.loads(invoke(dsn, "-c", "kept", "sessions", "retention").stdout)
    assert kept == {"version": 1, "max_calls": 1000, "max_age_days": None}


def test_route_table_summarises_the_tools_the_budget_skipped(dsn: str) -> None:
    """`route --budget 600 -k 3` printed one 'skipped (does not fit the budget)' line per candidate left out, about
    40 on the demo catalog, under a table of 3; the table says how many in one line, and --explain lists them."""
    assert invoke(dsn, "-c", "many", "import", str(DEMO_DIR / "tools.jsonl")).exit_code == 0
    args = ("-c", "many", "route", "send an email to the team about the release", "--budget", "600", "-k", "3")
    skipped = json.loads(invoke(dsn, *args, "--format", "json").stdout)["skipped"]
    assert len(skipped) > 3
    table = invoke(dsn, *args, "--format", "table").stdout.splitlines()
    assert f"{len(skipped)} tools skipped: over the token budget (--explain lists them)" in table
    assert len([line for line in table if "skipped" in line]) == 1, table
    explained = invoke(dsn, *args, "--format", "table", "--explain").stdout
    assert f"{len(skipped)} tools skipped: over the token budget" in explained
    for tool in skipped:
        assert f"    skipped (does not fit the budget): {tool['id']} ({tool['tokens']} tokens)" in explained


def test_tables_show_long_ids_whole(dsn: str, tmp_path: Path) -> None:
    """Route's table cut a tool id at 40 characters and `sessions list` a session id at 48, so a long one (an OpenAPI
    operation's: up to 128) read as another and could not be copied into the next command (`remove`, `sessions
    show`); they are shown whole, their column as wide as the longest. `list` ended a line without a provider in 49
    spaces."""
    long_tool = "billing." + "get_invoices_by_customer_and_period_" * 2
    tools = [*TOOLS, {"id": long_tool, "name": long_tool.split(".")[1], "description": "Invoices of a customer"}]
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tools))
    assert invoke(dsn, "-c", "wide", "import", str(path)).exit_code == 0
    table = invoke(dsn, "-c", "wide", "route", "invoices of a customer", "-k", "4", "--format", "table").stdout
    assert any(line.split()[1:2] == [long_tool] for line in table.splitlines()), table
    long_session = "conversation-" + "0123456789" * 6
    calls = {"sid": long_session, "turns": [{"query": "mail bob", "calls": ["gmail.send_email"]}]}
    (tmp_path / "sessions.jsonl").write_text(json.dumps(calls) + "\n")
    assert invoke(dsn, "-c", "wide", "sessions", "import", str(tmp_path / "sessions.jsonl")).exit_code == 0
    code, listed, err = on_terminal(dsn, "-c", "wide", "sessions", "list")
    assert (code, err, listed.split()[:1]) == (0, "", [long_session]), listed
    code, listed, err = on_terminal(dsn, "-c", "wide", "list")
    assert code == 0 and listed.splitlines() and all(line == line.rstrip() for line in listed.splitlines()), listed


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_route_explain_adds_its_object_to_the_definitions(dsn: str, tmp_path: Path, fmt: str) -> None:
    """`route --explain --format openai` printed the definitions alone: --explain was ignored, where its help and
    README say it adds an `explain` object to JSON output. It is the key beside `tools`; without --explain, none."""
    assert invoke(dsn, "-c", "why", "import", tools_file(tmp_path)).exit_code == 0
    args = ("-c", "why", "route", "weather in Paris", "-k", "2", "--format", fmt)
    plain = json.loads(invoke(dsn, *args).stdout)
    explained = json.loads(invoke(dsn, *args, "--explain").stdout)
    assert list(plain) == ["tools"] and list(explained) == ["tools", "explain"]
    assert explained["tools"] == plain["tools"]
    reference = json.loads(invoke(dsn, "-c", "why", "route", "weather in Paris", "-k", "2", "--explain").stdout)
    assert [t["id"] for t in explained["explain"]["tools"]] == [t["id"] for t in reference["explain"]["tools"]]


def test_expand_max_tools_zero_needs_no_key(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`expand --max-tools 0` (no model call in this run) still asked for OPENAI_API_KEY and stopped; it writes the
    offline phrases and counts the tools the model would be asked about, with no key and no client."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert invoke(dsn, "-c", "exp", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "exp", "expand", "--max-tools", "0")
    assert result.exit_code == 0, (result.output, result.exception)
    report = json.loads(result.stdout)
    assert report["llm_calls"] == 0 and report["remaining"] == 3 and report["updated"] == 3, report
    refused = invoke(dsn, "-c", "exp", "expand", "--max-tools", "1")
    assert refused.exit_code == 1 and "set OPENAI_API_KEY" in str(refused.exception)


def test_eval_names_its_metrics_at_k(dsn: str, tmp_path: Path) -> None:
    """`eval -k 3` labelled its columns R@10, MRR@10, multi comp@10 over routes of 3 tools; they are named at k
    (R@3, MRR@3, ...: the @5 and @10 cutoffs of 3 tools are one), in the table, the JSON and eval.md, but nDCG@10
    (test_eval_keeps_ndcg_at_10_under_k). -k 10 keeps the names."""
    queries = tmp_path / "queries.jsonl"
    rows = [("q1", "mail bob", "gmail.send_email"), ("q2", "rain in Paris?", "weather.forecast")]
    queries.write_text("".join(json.dumps({"qid": q, "query": t, "relevant": [r]}) + "\n" for q, t, r in rows))
    args = ("eval", "--tools", tools_file(tmp_path), "--queries", str(queries), "--config", "default")
    out = json.loads(invoke(dsn, *args, "-k", "3", "--report", str(tmp_path / "r")).stdout)
    metrics = list(out["configs"]["default"])
    assert out["k"] == 3 and [m for m in metrics if m.endswith(("@5", "@10"))] == ["nDCG@10"], metrics
    assert {"R@1", "R@3", "MRR@3", "nDCG@10", "multi comp@3", "single hit@3"} <= set(metrics), metrics
    assert out["configs"]["default"]["R@3"] == 1.0
    report = (tmp_path / "r" / "eval.md").read_text()
    assert "| config | R@1 | R@3 | MRR@3 | nDCG@10 | multi R@3 | multi comp@3 |" in report and "R@10" not in report
    code, table, err = on_terminal(dsn, *args, "-k", "3")
    assert code == 0 and "R@3" in table and "R@10" not in table, (table, err)
    ten = json.loads(invoke(dsn, *args).stdout)
    assert ten["k"] == 10 and {"R@5", "R@10", "nDCG@10", "comp@5"} <= set(ten["configs"]["default"])


def test_eval_keeps_ndcg_at_10_under_k(dsn: str, tmp_path: Path) -> None:
    """nDCG's ideal ranking counts up to 10 relevant tools, so the nDCG@10 of a route of 2 tools is not nDCG@2 when
    more than 2 are relevant: here every tool is, both routed tools are hits, nDCG@2 would be 1. `eval -k 2` named
    that value nDCG@2; it keeps its name."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"qid": "q", "query": "mail bob", "relevant": [t["id"] for t in TOOLS]}) + "\n")
    args = ("eval", "--tools", tools_file(tmp_path), "--queries", str(queries), "--config", "default", "-k", "2")
    row = json.loads(invoke(dsn, *args).stdout)["configs"]["default"]
    gains = [1 / math.log2(rank + 1) for rank in range(1, len(TOOLS) + 1)]  # every tool relevant, 2 routed
    assert "nDCG@2" not in row and row["nDCG@10"] == pytest.approx(sum(gains[:2]) / sum(gains)), row
    assert row["R@2"] == pytest.approx(2 / len(TOOLS)), row


def test_export_to_a_file_says_what_it_wrote_in_json(dsn: str, tmp_path: Path) -> None:
    """`export -o FILE --json` printed nothing on stdout (a note on stderr only), so a script reading the JSON got
    none; it prints a summary, the path, format and count, and the file holds the catalog."""
    assert invoke(dsn, "-c", "out", "import", tools_file(tmp_path)).exit_code == 0
    path = tmp_path / "catalog.json"
    result = invoke(dsn, "-c", "out", "export", "-o", str(path), "--format", "mcp", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {
        "version": 1,
        "path": str(path),
        "format": "mcp",
        "tools": 3,
    }, result.output
    assert len(json.loads(path.read_text())["tools"]) == 3
    code, out, err = on_terminal(dsn, "-c", "out", "export", "-o", str(path))
    assert code == 0 and out == "" and err == f"3 tools written to {path}\n", (out, err)


EMPTY = [
    (("-c", "bare", "list"), "no tools in catalog 'bare'", "tools"),
    (("-c", "bare", "sessions", "list"), "no sessions logged in catalog 'bare'", "sessions"),
    (("-c", "bare", "sessions", "transitions"), "no transitions learned in catalog 'bare'", "transitions"),
    (
        ("-c", "bare", "sessions", "transitions", "--from", "a.b"),
        "no transitions from 'a.b' learned in catalog 'bare'",
        "transitions",
    ),
    (("-c", "bare", "anchors", "list"), "no anchors in catalog 'bare'", "anchors"),
    (("grants",), "no grants", "grants"),
    (("--schema", "blank", "catalogs"), "no catalogs in schema 'blank'", "catalogs"),
]


def test_an_empty_list_says_so_on_a_terminal(dsn: str, tmp_path: Path) -> None:
    """An empty list printed nothing at all on a terminal (no tools, sessions, anchors, grants, catalogs): a user could
    not tell it from a command that did nothing. It prints one line saying what is empty; piped, the JSON list is
    empty, as before."""
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(TOOLS[0]) + "\n")
    assert invoke(dsn, "-c", "bare", "import", str(path)).exit_code == 0
    assert invoke(dsn, "-c", "bare", "remove", TOOLS[0]["id"]).exit_code == 0
    assert invoke(dsn, "--schema", "blank", "migrate").exit_code == 0
    for args, line, key in EMPTY:
        code, out, err = on_terminal(dsn, *args)
        assert code == 0 and out == line + "\n", (args, out, err)
        piped = invoke(dsn, *args)
        assert piped.exit_code == 0 and json.loads(piped.stdout)[key] == [], (args, piped.output)


def test_sessions_show_of_an_unknown_session_fails_naming_it(dsn: str, tmp_path: Path) -> None:
    """`sessions show nosuch` printed nothing (an empty list in JSON) and exited 0, as for a real session: a typo went
    unnoticed. It exits 1 with one line naming the session and the catalog; a logged session shows as before."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "show", "nosuch")
    assert result.exit_code == 1 and str(result.exception) == (
        "no session 'nosuch' in catalog 'log' (`toolstore sessions list` lists the sessions)"
    ), result.output
    assert len(json.loads(invoke(dsn, "-c", "log", "sessions", "show", "s1").stdout)["calls"]) == 2


def test_sessions_show_of_a_pruned_session_is_not_an_unknown_one(dsn: str, tmp_path: Path) -> None:
    """`sessions show` exited 1, 'no logged calls', both for a session never logged and for one whose calls were all
    pruned (kept for the call ids it has seen, listed with 0 calls): the pruned one shows no calls, exit 0, and an
    unknown one is still an error. The stores' has_session() tells them apart."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    old = datetime.now(timezone.utc) - timedelta(days=2)
    with ToolStore(dsn, embedder=None, catalog="log") as store:
        store.record_calls("chat", [SessionCall("gmail.send_email", at=old, call_id="c1")])
    assert invoke(dsn, "-c", "log", "sessions", "prune", "--older-than", "1d").exit_code == 0
    piped = invoke(dsn, "-c", "log", "sessions", "show", "chat")
    assert piped.exit_code == 0 and json.loads(piped.stdout)["calls"] == [], piped.output
    code, out, err = on_terminal(dsn, "-c", "log", "sessions", "show", "chat")
    assert code == 0 and out == "no logged calls of session 'chat' (pruned: kept for the call ids it has seen)\n", err
    unknown = invoke(dsn, "-c", "log", "sessions", "show", "nosuch")
    assert unknown.exit_code == 1 and "no session 'nosuch' in catalog 'log'" in str(unknown.exception)
    with ToolStore(dsn, embedder=None, catalog="log") as store:
        assert store.session_log("chat") == [] and store.has_session("chat") and not store.has_session("nosuch")

    async def known(session: str) -> bool:
        async with AsyncToolStore(dsn, embedder=None, catalog="log") as store:
            return await store.has_session(session)

    assert asyncio.run(known("chat")) and not asyncio.run(known("nosuch"))


def test_demo_prints_what_it_loaded_as_lines_on_a_terminal(dsn: str) -> None:
    """The demo printed what it loaded on a terminal as a Python dict ("catalog 'demo': {'inserted': 115, ...}"); it
    prints readable lines, and JSON when piped."""
    code, out, err = on_terminal(dsn, "demo", "-k", "2")
    lines = out.splitlines()
    assert code == 0 and lines[:1] == ["catalog 'demo', embedder hashing-256"], (out, err)
    assert lines[1].startswith("  loaded: 115 inserted, 0 updated, 0 unchanged, 0 removed, 115 embedded, "), lines[1]
    assert lines[1].endswith(" intent examples") and "{" not in out and "'inserted'" not in out
    piped = json.loads(invoke(dsn, "demo", "-k", "2").stdout)
    assert piped["loaded"]["unchanged"] == 115


def test_demo_and_route_explain_head_the_signals_alike(dsn: str) -> None:
    """`toolstore demo` headed the signals' columns with their first six letters ("descri", "transi") and `route
    --explain` with their first five ("descr", "inten", "conte"): one signal, two headings. Both tables use one set."""
    code, demo_out, err = on_terminal(dsn, "demo", "-k", "2")
    assert code == 0, err
    code, route_out, err = on_terminal(dsn, "-c", "demo", "route", "open a github issue", "--explain")
    assert code == 0, err
    demo_head = next(line for line in demo_out.splitlines() if line.split()[:2] == ["tool", "score"])
    route_head = next(line for line in route_out.splitlines() if line.split()[:3] == ["#", "tool", "score"])
    headings = demo_head.split()[2:]
    assert headings == route_head.split()[3:] and len(set(headings)) == len(SIGNALS), (demo_head, route_head)


@pytest.mark.parametrize("command", ["list", "transitions"])
def test_sessions_limit_past_a_bigint_names_the_option(dsn: str, tmp_path: Path, command: str) -> None:
    """`sessions list --limit 99999999999999999999` failed in Postgres, 'database error: bigint out of range', naming
    neither the option nor its range; it is a usage error naming --limit."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", command, "--limit", str(2**63))
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for '--limit': {2**63} is not in the range 1<=x<={2**63 - 1}" in result.output
    assert invoke(dsn, "-c", "log", "sessions", command, "--limit", str(2**63 - 1)).exit_code == 0


WEIGHTS = [
    (("dense=-1",), "--weights: weight for 'dense' must be a finite number from 0 to 1e+06, got -1.0"),
    (("foo=1",), "--weights: unknown signal 'foo'; known: " + ", ".join(SIGNALS)),
    (("=1",), "--weights: unknown signal ''; known: " + ", ".join(SIGNALS)),
    (("dense=1,dense=2",), "--weights: 'dense' is given twice"),
    (("dense=1", "dense=2"), "--weights: 'dense' is given twice"),
    (
        ("name=0,description=0,expansion=0", "dense=0,intent=0"),
        "--weights: every weight of name, description, expansion, dense, intent is 0: at least one retriever of the "
        "request must be on",
    ),
]


@pytest.mark.parametrize(
    ("specs", "message"), WEIGHTS, ids=["negative", "unknown", "no name", "twice", "twice over", "all off"]
)
def test_route_weights_errors_name_the_option(dsn: str, tmp_path: Path, specs: tuple[str, ...], message: str) -> None:
    """`route --weights dense=-1` printed the library's 'weight for 'dense' ...' and foo=1 'unknown signal(s) in
    weights: foo', naming no option; a signal given twice (dense=1,dense=2) took the last value, and a second --weights
    replaced the first. Each is a usage error naming --weights, exit 2; the pairs of every --weights count together."""
    assert invoke(dsn, "-c", "weights", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "weights", "route", "send an email", *[a for s in specs for a in ("--weights", s)])
    said = message.replace("--weights: ", "Invalid value for --weights: ", 1)
    assert result.exit_code == 2 and " ".join(said.split()) in " ".join(result.output.split()), result.output
    both = invoke(dsn, "-c", "weights", "route", "send an email", "--weights", "name=2", "--weights", "dense=0")
    assert both.exit_code == 0, both.output


@pytest.mark.parametrize("args", [("import", "TOOLS"), ("reembed", "--model", "hashing-100000000000")])
def test_a_hashing_dimension_past_pgvectors_is_one_line(dsn: str, tmp_path: Path, args: tuple[str, ...]) -> None:
    """`--embedder hashing-100000000000` (or reembed --model so) was a MemoryError traceback (numpy asked for 745 GiB
    to embed two texts), and hashing-20000 a database error after embedding; a dimension past what a pgvector column
    holds is refused with one line before anything is embedded or written (as the option is read: a usage error)."""
    tools = tools_file(tmp_path)
    assert invoke(dsn, "-c", "wide", "import", tools).exit_code == 0
    argv = ["--embedder", "hashing-100000000000", "-c", "wide2"] if args[0] == "import" else ["-c", "wide"]
    result = CliRunner().invoke(cli, ["--dsn", dsn, *argv, *[tools if a == "TOOLS" else a for a in args]])
    assert result.exit_code == 2 and (
        "the hashing embedder's dimension must be at most 16,000 (a pgvector column's), got 100000000000"
    ) in " ".join(result.output.split()), (result.exception, result.output)
    assert "wide2" not in [c["name"] for c in json.loads(invoke(dsn, "catalogs").stdout)["catalogs"]]


def both_on_terminal(dsn: str, *args: str) -> tuple[int, str]:
    """The CLI with stdout and stderr on one pseudo-terminal: exit status and all it drew there."""
    leader, follower = open_terminal(200)
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args]
    proc = subprocess.Popen(cmd, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    drawn = read_all(leader)
    return proc.wait(timeout=300), drawn


def test_eval_quiet_draws_no_progress_bars(dsn: str, tmp_path: Path) -> None:
    """`eval --quiet` on a terminal drew a tqdm bar per config on stderr (the library was asked for progress whatever
    --quiet said, which its help says turns bars off); it draws none, and without --quiet the bars are drawn as
    before."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"qid": "q1", "query": "mail bob", "relevant": ["gmail.send_email"]}) + "\n")
    args = ("eval", "--tools", tools_file(tmp_path), "--queries", str(queries), "--config", "name", "--config", "dense")
    code, drawn = both_on_terminal(dsn, *args)
    assert code == 0 and "dense:" in drawn and "q/s" in drawn, drawn
    code, drawn = both_on_terminal(dsn, *args, "--quiet")
    assert code == 0 and "dense:" not in drawn and "q/s" not in drawn and "R@10" in drawn, drawn


def test_sessions_prune_forget_idle_with_session_names_the_options(dsn: str, tmp_path: Path) -> None:
    """`sessions prune --session s1 --forget-idle 90d` printed the library's 'forget_idle forgets every idle session
    of the catalog: give it without session', naming its arguments, not the options; it is a usage error naming
    --forget-idle and --session, nothing pruned."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--session", "s1", "--forget-idle", "90d")
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "--forget-idle forgets every idle session of the catalog: give it without --session" in result.output
    assert len(json.loads(invoke(dsn, "-c", "log", "sessions", "show", "s1").stdout)["calls"]) == 2


def test_anchors_remove_an_id_past_a_bigint_names_the_argument(dsn: str, tmp_path: Path) -> None:
    """`anchors remove 99999999999999999999` said 'an anchor id must be a positive integer, got 99999999999999999999'
    (it is one), naming neither the argument nor the range; it is a usage error naming IDS and the range of a bigint,
    and the library says its range too."""
    assert invoke(dsn, "-c", "anchored", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "anchored", "anchors", "remove", str(10**20))
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for 'ID...': {10**20} is not in the range 1<=x<={2**63 - 1}" in result.output
    with ToolStore(dsn, embedder=None, catalog="anchored") as store, pytest.raises(InvalidInputError) as raised:
        store.remove_anchors([2**63])
    assert str(raised.value) == f"an anchor id must be an integer from 1 to {2**63 - 1} (a bigint), got {2**63}"


@pytest.mark.parametrize("given", ["abc", "1.5"])
def test_anchors_remove_of_no_integer_says_it_is_no_anchor_id(dsn: str, given: str) -> None:
    """`anchors remove abc` said "'abc' is not a valid integer range" (click's IntRange's name); it says the value is
    not an anchor id, an integer as `anchors list` shows."""
    result = invoke(dsn, "-c", "anchored", "anchors", "remove", "1", given)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for 'ID...': {given!r} is not an anchor id (an integer, as `anchors list` shows)" in (
        result.output
    ), result.output
    assert "integer range" not in result.output


@pytest.mark.parametrize("args", [("--dsn", "", "dsn"), ("dsn", "--dsn", " ")], ids=["before", "after"])
def test_an_empty_dsn_is_refused_not_taken_for_the_embedded_server(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """`--dsn ""` (a script's unset variable) was taken for no DSN, so the command ran on the embedded server, another
    database, and exited 0; an empty --dsn is a usage error naming it (resolve_dsn, which would start the embedded
    server, is replaced here so the test starts none)."""
    monkeypatch.setattr("toolstore.cli.catalog.resolve_dsn", lambda given: f"resolved {given!r}")
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Invalid value for '--dsn': it is empty: give a Postgres DSN, or leave --dsn out" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--url", "http://127.0.0.1:1/mcp", "--header", "X-Key: a", "--header", "X-Key: b"),
            "Invalid value for --header: 'X-Key' is given twice",
        ),
        (("--env", "TOKEN=a", "--env", "TOKEN=b", "--", "true"), "Invalid value for --env: 'TOKEN' is given twice"),
    ],
    ids=["header", "env"],
)
def test_sync_mcp_a_header_or_env_given_twice_is_refused(dsn: str, args: tuple[str, ...], message: str) -> None:
    """`sync mcp --header 'X-Key: a' --header 'X-Key: b'` (or --env TOKEN=a --env TOKEN=b) kept one value and went on
    to the server, the other dropped without a word; a name given twice is a usage error naming the option, before
    any server is reached."""
    result = invoke(dsn, "-c", "synced", "sync", "mcp", "--timeout", "1", *args)
    assert result.exit_code == 2 and message in result.output, (result.exit_code, result.output, result.exception)


@pytest.mark.parametrize("revision", ["@", "head+1"])
def test_migrate_to_a_revision_alembic_cannot_resolve_is_one_line(dsn: str, revision: str) -> None:
    """`migrate --revision '@'` (or 'head+1' at head; '' too, now the option's usage error:
    test_an_empty_provider_tool_id_or_role_is_a_usage_error) was an AssertionError traceback from alembic's revision
    lookup; it is one line naming the schema and the revision and what a revision may be, nothing migrated."""
    assert migrate_refused(dsn, "migrate", "--revision", revision) == (
        f"cannot migrate schema 'toolstore' to {revision!r}: alembic cannot resolve that revision (give 'head', a "
        "revision such as '0017', a step such as '+1' or '-2', or 'base')"
    )


def migrate_refused(dsn: str, *args: str) -> str:
    """The one line a `migrate` (``args``, the command and its options) refused with, exit 1; the default schema still
    at head after it."""
    result = invoke(dsn, *args)
    assert result.exit_code == 1, (result.exception, result.output)
    assert json.loads(invoke(dsn, "migrate").stdout)["revision"] == HEAD_REVISION
    return str(result.exception)


def test_serve_mcp_an_empty_host_is_refused_not_every_interface(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve mcp --transport http --host ""` (a script's unset variable) listened on every interface, uvicorn's
    reading of '' ('http://:8000/mcp'), where the default is 127.0.0.1; an empty --host is a usage error naming it. (The
    server is never started here: check_address, the step before it, is replaced to stop there.)"""

    def listening(host: str, port: int) -> None:
        raise RuntimeError(f"would listen on host {host!r}")

    monkeypatch.setattr("toolstore.cli.serve.check_address", listening)
    result = invoke(dsn, "serve", "mcp", "--transport", "http", "--host", "")
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert (
        "Invalid value for '--host': it is empty: give an address (127.0.0.1; 0.0.0.0 or :: for every" in result.output
    )


EMPTY_VALUES = [
    ("expand", "--offline", "--model", ""),
    ("expand", "--offline", "--base-url", ""),
    ("reembed", "--model", "hashing-256", "--base-url", ""),
    ("sessions", "transitions", "--from", ""),
]


@pytest.mark.parametrize("args", EMPTY_VALUES, ids=["expand model", "expand base-url", "reembed base-url", "from"])
def test_an_empty_value_is_refused_not_taken_for_the_default(dsn: str, tmp_path: Path, args: tuple[str, ...]) -> None:
    """An empty value (a script's unset variable) was taken for no value, exit 0: `expand --model ""` used the default
    model, `--base-url ""` the default server, `sessions transitions --from ""` listed the transitions from a tool id
    '' (none). Each is a usage error naming the option, nothing done."""
    assert invoke(dsn, "-c", "values", "import", tools_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "values", *args)
    option = next(a for a in reversed(args) if a.startswith("--"))
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for '{option}': it is empty: give a value, or leave the option out" in result.output


def test_a_report_on_a_terminal_says_none_not_pythons_none(dsn: str, tmp_path: Path) -> None:
    """`sessions retention` on a terminal printed 'max_age_days: None', Python's spelling, where --max-age-days takes
    'none'; a report's empty value prints as 'none' (JSON keeps null)."""
    assert invoke(dsn, "-c", "kept", "import", tools_file(tmp_path)).exit_code == 0
    code, out, err = on_terminal(dsn, "-c", "kept", "sessions", "retention")
    assert code == 0 and out == "max_calls: 1000, max_age_days: none\n", (out, err)
    assert json.loads(invoke(dsn, "-c", "kept", "sessions", "retention").stdout)["max_age_days"] is None


def test_eval_report_a_directory_it_cannot_make_fails_before_evaluating(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`eval --report FILE/sub` (a path under a file) ran the whole evaluation, then failed writing eval.md, 'Not a
    directory', its results lost; the directory is made first, so the error comes before any evaluation."""
    evaluated: list[int] = []
    monkeypatch.setattr("toolstore.cli.quality.evaluate", lambda *a, **kw: evaluated.append(1) or {"configs": {}})
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"qid": "q1", "query": "mail bob", "relevant": ["gmail.send_email"]}) + "\n")
    tools = tools_file(tmp_path)
    result = invoke(dsn, "eval", "--tools", tools, "--queries", str(queries), "--report", f"{tools}/report")
    assert isinstance(result.exception, NotADirectoryError) and evaluated == [], (result.exception, evaluated)


def test_a_driver_error_reaching_the_entry_point_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A psycopg error that no layer turned into a DatabaseError was printed as its raw first line by the entry point,
    a password it quoted too; it goes through the same redacting first line as every DatabaseError."""

    class Failing:
        def main(self, **kwargs: object) -> None:
            raise psycopg.OperationalError(
                'invalid connection option "x" in "postgresql://app:hunter2@db/toolstore"\nsecond line'
            )

    monkeypatch.setattr(sys.modules["toolstore.cli.main"], "cli", Failing())
    with pytest.raises(SystemExit) as exited:
        entry()
    err = capsys.readouterr().err
    assert exited.value.code == 1 and "hunter2" not in err and "second line" not in err, err
    assert err.startswith("database error: invalid connection option") and "[redacted]" in err, err
