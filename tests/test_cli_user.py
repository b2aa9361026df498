"""What a user of the command line sees: a misspelt --schema refused, options named in errors, route's table and
JSON, empty lists, the demo's lines."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from toolstore import DatabaseError
from toolstore.cli import cli

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "github.create_issue", "name": "create_issue", "description": "Open an issue in a GitHub repository"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]


def invoke(dsn: str, *args: str) -> Result:
    """The CLI on ``dsn`` with the hashing embedder; a library error is the result's exception (the entry point
    prints it as one line)."""
    return CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args])


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


@pytest.mark.parametrize("zero", ["0", "0s", "0.0d"])
def test_sessions_prune_older_than_zero_is_refused_not_every_call(dsn: str, tmp_path: Path, zero: str) -> None:
    """`sessions prune --older-than 0` deleted every logged call of every session (the library takes 0 as 'older than
    now'), exit 0: a slip of the finger wiped the log. A zero duration is refused, naming the option; nothing goes."""
    assert invoke(dsn, "-c", "log", "import", tools_file(tmp_path)).exit_code == 0
    assert invoke(dsn, "-c", "log", "sessions", "import", sessions_file(tmp_path)).exit_code == 0
    result = invoke(dsn, "-c", "log", "sessions", "prune", "--older-than", zero)
    assert result.exit_code == 1 and str(result.exception) == (
        f"--older-than wants a duration over 0 like 30d, 12h, 90m or 2w, got {zero!r}"
    ), result.output
    shown = json.loads(invoke(dsn, "-c", "log", "sessions", "show", "s1").stdout)
    assert [c["tool"] for c in shown["calls"]] == ["gmail.send_email", "weather.forecast"]
    assert "over 0" in invoke(dsn, "sessions", "prune", "--help").stdout
