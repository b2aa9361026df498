"""The CLI end to end: import, examples, route, list, remove, catalogs; errors are one line, no traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from namespaced import CRM, SCHEMA

from toolstore import SIGNALS

from benchdata import BENCH


def run(dsn: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOOLSTORE_DSN": dsn}
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore.cli", "--embedder", "hashing", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email to a recipient",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
        },
    },
    {
        "name": "create_issue",
        "description": "Open an issue in a GitHub repository",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "id": "weather.forecast",
        "name": "forecast",
        "description": "Weather forecast for a city",
        "provider": "weather",
        "parameters": None,
        "category": "weather",
    },
]


def test_reimporting_an_export_counts_the_vectors_the_cache_gave_apart(dsn: str, tmp_path: Path) -> None:
    """Importing `export --with-metadata` output (into another catalog, or back after an edit) said every tool new or
    changed was embedded, while the embedding cache gave their vectors and nothing was computed; the report counts
    them apart: `embedded`, computed, and `cached`."""

    def imported(catalog: str, path: Path) -> tuple[int, int, int, int]:
        report = json.loads(run(dsn, "-c", catalog, "import", str(path)).stdout)
        return report["inserted"], report["updated"], report["embedded"], report["cached"]

    assert imported("cli", write_jsonl(tmp_path / "tools.jsonl", TOOLS)) == (3, 0, 3, 0)
    exported = tmp_path / "export.json"
    run(dsn, "-c", "cli", "export", "--with-metadata", "-o", str(exported))
    assert imported("copy", exported) == (3, 0, 0, 3)
    document = json.loads(exported.read_text())
    document["tools"][0]["function"]["description"] = "Send an email message to someone"
    exported.write_text(json.dumps(document))
    assert imported("copy", exported) == (0, 1, 1, 0)  # the edited tool's new text
    _, updated, embedded, cached = imported("cli", exported)  # back: the edited text's vector cached since
    assert (embedded, cached) == (0, updated) and updated >= 1  # the edited tool at least


def test_cli_round_trip(dsn: str, tmp_path: Path) -> None:
    tools = write_jsonl(tmp_path / "tools.jsonl", TOOLS)
    imported = json.loads(run(dsn, "-c", "cli", "import", str(tools)).stdout)
    assert imported["inserted"] == 3
    again = json.loads(run(dsn, "-c", "cli", "import", str(tools)).stdout)
    assert again["unchanged"] == 3 and again["inserted"] == 0 and again["embedded"] == 0
    examples = write_jsonl(
        tmp_path / "train.jsonl",
        [{"qid": "1", "query": "what's it like outside tomorrow", "relevant": ["weather.forecast"]}],
    )
    assert json.loads(run(dsn, "-c", "cli", "examples", str(examples)).stdout)["examples"] == 1
    routed = json.loads(run(dsn, "-c", "cli", "route", "send an email to bob", "--k", "2").stdout)
    assert routed["tools"][0]["id"] == "send_email"
    assert set(routed["tools"][0]["signals"]) == set(SIGNALS)
    openai = json.loads(run(dsn, "-c", "cli", "route", "weather tomorrow", "--k", "1", "--format", "openai").stdout)
    assert openai["tools"][0]["function"]["name"] == "forecast"
    anthropic = json.loads(
        run(dsn, "-c", "cli", "route", "weather tomorrow", "--k", "1", "--format", "anthropic").stdout
    )
    assert "input_schema" in anthropic["tools"][0]
    table = run(dsn, "-c", "cli", "route", "open a github issue", "--format", "table", "--explain").stdout
    assert "create_issue" in table and "inten" in table
    listed = json.loads(run(dsn, "-c", "cli", "list").stdout)
    assert listed["version"] == 1 and list(listed)[0] == "version"
    assert [t["id"] for t in listed["tools"]] == ["create_issue", "send_email", "weather.forecast"]
    run(dsn, "-c", "cli", "remove", "create_issue")
    assert len(json.loads(run(dsn, "-c", "cli", "list").stdout)["tools"]) == 2
    catalogs = json.loads(run(dsn, "catalogs").stdout)["catalogs"]
    entry = next(c for c in catalogs if c["name"] == "cli")
    assert {"name": "cli", "n_tools": 2, "n_examples": 1}.items() <= entry.items()
    assert datetime.fromisoformat(entry["created_at"]).tzinfo is not None  # ISO 8601 with a zone


def test_cli_errors_are_one_line(dsn: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(TOOLS[0]) + "\n" + '{"name": "x", "parameters": [1, 2]}\n' + json.dumps(TOOLS[2]) + "\n")
    proc = run(dsn, "-c", "bad", "import", str(bad), check=False)
    assert proc.returncode == 1
    assert "line 2" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    # nothing was written: not even the catalog exists
    assert "bad" not in [c["name"] for c in json.loads(run(dsn, "catalogs").stdout)["catalogs"]]
    run(dsn, "-c", "bad", "import", str(write_jsonl(tmp_path / "ok.jsonl", TOOLS)))
    for args, needle in [
        (("-c", "bad", "route", "   "), "query is empty"),
        (("-c", "missing", "route", "hello"), "no catalog named 'missing'"),
        (("-c", "bad", "remove", "ghost"), "no tool 'ghost'"),
        (("-c", "bad", "route", "x", "--weights", "dense=abc"), "not a number"),
    ]:
        proc = run(dsn, *args, check=False)
        assert proc.returncode != 0, args
        assert needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_cli_bad_embedder_dimension_and_migrate_revision_are_one_line(dsn: str) -> None:
    for args, needle, status in [
        (("route", "send an email", "--embedder", "hashing-4"), "dimension must be at least 8, got 4", 2),
        (("migrate", "--revision", "nope"), "cannot migrate schema 'toolstore' to 'nope': Can't locate revision", 1),
        (("migrate", "--downgrade"), "a downgrade needs the revision to go down to", 1),
    ]:
        proc = run(dsn, *args, check=False)
        assert proc.returncode == status and proc.stderr.startswith("error: ") and needle in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_cli_migrate_says_the_revision_it_reached_and_never_claims_one_it_did_not(dsn: str) -> None:
    """``migrate --revision 0010`` on a schema at head did nothing (alembic's upgrade to a revision already passed)
    and printed "toolstore: at 0010"; a relative revision printed itself ("at -2") instead of where it went."""
    from toolstore._migrate import HEAD_REVISION

    def migrated(*args: str) -> dict[str, object]:
        return json.loads(run(dsn, "migrate", "--json", *args).stdout)

    assert migrated("--downgrade", "--revision", "-2")["revision"] == f"{int(HEAD_REVISION) - 2:04d}"
    assert migrated("--revision", "+1")["revision"] == f"{int(HEAD_REVISION) - 1:04d}"
    proc = run(dsn, "migrate", "--revision", "0010", check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"schema 'toolstore' is at {int(HEAD_REVISION) - 1:04d}, past '0010'" in proc.stderr, proc.stderr
    assert "--downgrade" in proc.stderr
    assert migrated()["revision"] == HEAD_REVISION
    assert migrated("--downgrade", "--revision", "base")["revision"] is None


def test_cli_reports_an_unreachable_database() -> None:
    proc = run("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "list", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot connect") and "Traceback" not in proc.stderr


@pytest.mark.skipif(not (BENCH / "seal_tools").is_dir(), reason="shared benchmarks not present")
def test_cli_imports_the_seal_tools_catalog_and_routes(dsn: str) -> None:
    proc = run(dsn, "--embedder", "none", "-c", "seal", "import", str(BENCH / "seal_tools" / "tools.jsonl"))
    assert json.loads(proc.stdout)["inserted"] == 4076
    routed = json.loads(
        run(dsn, "--embedder", "none", "-c", "seal", "route", "analyze the DNA evidence from the crime scene").stdout
    )
    assert routed["tools"][0]["id"] == "analyzeEvidence"
    assert "lexical retrieval only" in routed["degraded_reason"] and not routed["dense_used"]


OUTPUT = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(4)}}
TICKETS = {
    "tools": [
        {
            "name": f"{verb}_ticket",
            "description": f"{verb.title()} a ticket.",
            "inputSchema": SCHEMA,
            "outputSchema": OUTPUT,
        }
        for verb in ("find", "close")
    ]
}


@pytest.mark.parametrize(("fmt", "definitions"), [("openai-responses", CRM), ("mcp", TICKETS)])
def test_route_packs_the_budget_as_the_format_it_prints(
    dsn: str, tmp_path: Path, fmt: str, definitions: dict[str, object]
) -> None:
    """``route --budget B --format F`` prints definitions in F that fit B: a Responses namespace's description is
    counted (once), and so are an MCP tool's own keys (outputSchema), which the other formats drop. The budget holds
    both tools as Chat Completions definitions, not as F gives them: one is printed."""
    from toolstore import parse_tools
    from toolstore._packing import count_tokens, tool_tokens

    path = tmp_path / "tools.json"
    path.write_text(json.dumps(definitions))
    run(dsn, "-c", "formats", "import", str(path))
    budget = sum(tool_tokens(t) for t in parse_tools(definitions))
    printed = json.loads(
        run(dsn, "-c", "formats", "route", "customers tickets", "--budget", str(budget), "--format", fmt).stdout
    )
    sent = sum(count_tokens(json.dumps(d, ensure_ascii=False, separators=(",", ":"))) for d in printed["tools"])
    assert sent <= budget, (sent, budget, printed)
    assert len(printed["tools"][0].get("tools", printed["tools"])) == 1, printed


def test_serve_http_on_a_port_in_use_is_one_line(dsn: str, tmp_path: Path) -> None:
    """``serve mcp --transport http`` on a port another program listens on: uvicorn exited from inside the server
    (SystemExit in an exception group), an 80-line traceback; now one error line naming host and port, exit 1."""
    run(dsn, "-c", "served", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        proc = run(dsn, "-c", "served", "serve", "mcp", "--transport", "http", "--port", port, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: cannot serve HTTP on host '127.0.0.1', port {port}: Address already in use"
    ], proc.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_serve_refuses_a_call_timeout_that_is_no_positive_number(dsn: str, tmp_path: Path, seconds: str) -> None:
    """``serve mcp --gateway --call-timeout 0`` (or -1, nan) started a gateway whose every forwarded call timed out at
    once; it is refused before the server starts (and by build_server for a library caller)."""
    from typing import Any, cast

    from toolstore import InvalidInputError
    from toolstore._mcp_server import build_server

    run(dsn, "-c", "served", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore.cli", "--dsn", dsn, "--embedder", "hashing", "-c", "served"]
        + ["serve", "mcp", "--gateway", "--call-timeout", seconds],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,  # a stdio server that started would stop at once, exit 0
        timeout=300,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"Invalid value for '--call-timeout': '{seconds}' is not a positive number of seconds" in proc.stderr
    with pytest.raises(InvalidInputError, match="call_timeout must be a positive number of seconds"):
        build_server(cast(Any, None), call_timeout=float(seconds))


@pytest.mark.parametrize(
    "args", [("--prvider", "wx", "--", "true"), ("--url", "http://127.0.0.1:9/mcp", "--prvider", "wx")]
)
def test_sync_mcp_names_a_misspelt_option(dsn: str, args: tuple[str, ...]) -> None:
    """sync mcp keeps unknown options for the server's command line, so a misspelt option of its own became the command
    ('MCP server '--prvider': No such file or directory', or 'give either --url URL or -- COMMAND' beside --url); it
    is now named as no such option, before anything is started."""
    proc = run(dsn, "-c", "synced", "sync", "mcp", *args, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "error: No such option: --prvider" in proc.stderr, proc.stderr


def test_examples_help_names_every_field_a_line_needs(dsn: str, tmp_path: Path) -> None:
    """`examples --help` showed lines as {"query", "relevant": [...]}, which load_examples refuses ('missing field(s)
    qid'): the help names the fields a line needs."""
    run(dsn, "-c", "ex", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    line = {"query": "rain tomorrow?", "relevant": ["weather.forecast"]}
    proc = run(dsn, "-c", "ex", "examples", str(write_jsonl(tmp_path / "ex.jsonl", [line])), check=False)
    assert proc.returncode == 1 and "missing field(s) qid" in proc.stderr, proc.stderr
    help_text = " ".join(run(dsn, "examples", "--help").stdout.split())
    assert '{"qid", "query", "relevant": [tool ids]}' in help_text, help_text
    written = run(dsn, "-c", "ex", "examples", str(write_jsonl(tmp_path / "ok.jsonl", [{"qid": "q1", **line}])))
    assert json.loads(written.stdout)["examples"] == 1


@pytest.mark.parametrize("idle", ["0", "0s", "0.0d"])
def test_sessions_prune_forget_idle_of_nothing_names_the_option(dsn: str, tmp_path: Path, idle: str) -> None:
    """`sessions prune --forget-idle 0` printed the library's check, 'forget_idle must be a timedelta over 0 ...,
    got datetime.timedelta(0)': a Python repr, and no option named; it names the option and the value given."""
    run(dsn, "-c", "idle", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    proc = run(dsn, "-c", "idle", "sessions", "prune", "--forget-idle", idle, check=False)
    assert proc.returncode == 2, proc.stderr
    said = f"error: Invalid value for --forget-idle: {idle!r} is not a duration over 0 like 30d, 12h, 90m or 2w (see "
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said) and lines[0].endswith(" sessions prune --help)"), lines


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            ["sessions", "prune", "--older-than", ""],
            "error: Invalid value for --older-than: '' is not a duration like 30d, 12h, 90m or 2w (see ",
        ),
        (
            ["route", "weather", "--weights", ""],
            "error: Invalid value for --weights: '' is no name=value pair (pairs separated by commas) (see ",
        ),
    ],
    ids=["older-than", "weights"],
)
def test_an_empty_option_value_is_refused_not_taken_for_none(
    dsn: str, tmp_path: Path, command: list[str], message: str
) -> None:
    """An empty value (a script's unset variable) was taken for no value: `sessions prune --older-than ""` pruned by
    the retention instead, and `route --weights ""` routed with the catalog's weights. Each is refused like any other
    value that is no duration, or no name=value pair."""
    run(dsn, "-c", "empty", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    proc = run(dsn, "-c", "empty", *command, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stdout)
    lines = proc.stderr.strip().splitlines()  # and where the command's help is
    assert len(lines) == 1 and lines[0].startswith(message) and lines[0].endswith(" --help)"), lines


@pytest.mark.parametrize("provider", ["", " "])
def test_sync_mcp_with_an_empty_provider_says_so(dsn: str, provider: str) -> None:
    """`sync mcp --provider ""` (an unset variable) said 'the MCP server did not report a name (serverInfo.name); pass
    a provider' of a server that reported one; the provider given is named, and nothing is written: a usage error
    now, before the server is started."""
    server = str(Path(__file__).with_name("mcp_server.py"))
    proc = run(dsn, "-c", "synced", "sync", "mcp", "--provider", provider, "--", sys.executable, server, check=False)
    assert proc.returncode == 2, proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("error: Invalid value for '--provider': it is empty: give a value, or leave the option out")
    ), proc.stderr
    assert "synced" not in [c["name"] for c in json.loads(run(dsn, "catalogs").stdout)["catalogs"]]


@pytest.mark.parametrize("seconds", ["0", "-1", "nan"])
def test_sync_mcp_refuses_a_timeout_that_is_no_positive_number(dsn: str, seconds: str) -> None:
    """`sync mcp --timeout -1` (or 0, nan) listed the server with no time limit at all (the library takes a timeout
    that is not over 0 for none), where the help says seconds for the whole listing; it is refused before the server
    starts, as serve's --call-timeout."""
    server = str(Path(__file__).with_name("mcp_server.py"))
    proc = run(dsn, "-c", "synced", "sync", "mcp", "--timeout", seconds, "--", sys.executable, server, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"Invalid value for '--timeout': '{seconds}' is not a positive number of seconds" in proc.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--budget", "-5"), "'--budget': -5 is not in the range 0<=x<=10000000"),
        (("-k", "0"), "'-k' / '--k': 0 is not in the range 1<=x<=1000"),
        (("--turns", "101"), "'--turns': 101 is not in the range 1<=x<=100"),
        (("--seed", "-1", "--explore"), "'--seed': -1 is not in the range 0<=x<=9223372036854775807"),
    ],
)
def test_route_names_the_option_out_of_range(dsn: str, tmp_path: Path, args: tuple[str, ...], option: str) -> None:
    """route's integer options reached the library's checks, which name its arguments ('token_budget must be None or
    an integer from 0 to 10,000,000, got -5', 'seed is only used with explore=True'): a CLI user never wrote
    token_budget or None. The options now say their range (the library's limits) and name themselves."""
    run(dsn, "-c", "ranged", "import", str(write_jsonl(tmp_path / "tools.jsonl", TOOLS)))
    proc = run(dsn, "-c", "ranged", "route", "weather", *args, check=False)
    assert proc.returncode == 2 and f"Invalid value for {option}" in proc.stderr, proc.stderr
    proc = run(dsn, "-c", "ranged", "route", "weather", "--seed", "3", check=False)
    assert proc.returncode == 2 and "error: --seed is the draw's seed: it needs --explore" in proc.stderr, proc.stderr
