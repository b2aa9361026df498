"""Global options before or after the subcommand, ``--schema`` on every command, and the demo command."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import psycopg
from click.testing import CliRunner

from toolstore._expand import DEFAULT_MODEL
from toolstore.cli import cli
from toolstore.cli.demo import demo_requests

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "github.create_issue", "name": "create_issue", "description": "Open an issue in a GitHub repository"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if result.stdout.strip() else None


def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TOOLS))
    return str(path)


def test_global_options_work_after_the_subcommand(dsn: str, tmp_path: Path) -> None:
    late = ("--dsn", dsn, "--embedder", "hashing", "--catalog", "late")
    assert invoke("import", tools_file(tmp_path), *late, "--json")["inserted"] == 3
    routed = invoke("route", "send an email to bob", *late, "-k", "1")
    assert [t["id"] for t in routed["tools"]] == ["gmail.send_email"]
    # after the subcommand wins over before it
    routed = invoke(
        "--catalog", "nope", "--dsn", dsn, "route", "weather in Paris", "-c", "late", "--embedder", "hashing"
    )
    assert routed["tools"][0]["id"] == "weather.forecast"
    listed = invoke("list", "-c", "late", "--dsn", dsn, "--embedder", "none")
    assert len(listed["tools"]) == 3


def test_the_global_options_environment_variables_are_in_the_help() -> None:
    """-c/--catalog, --schema and --embedder are read from $TOOLSTORE_CATALOG, $TOOLSTORE_SCHEMA and
    $TOOLSTORE_EMBEDDER (as --dsn from $TOOLSTORE_DSN, which its help names), which neither `toolstore --help` nor
    README said: a user with one set in the environment saw another catalog than the default and no reason why."""
    text = " ".join(CliRunner().invoke(cli, ["--help"], catch_exceptions=False).output.split())
    for option, variable in (("--catalog", "CATALOG"), ("--schema", "SCHEMA"), ("--embedder", "EMBEDDER")):
        described = text.split(option, 1)[1].split(" --", 1)[0]
        assert f"env var: TOOLSTORE_{variable}" in described, (option, described)


def test_reembed_help_names_every_embedder_it_takes() -> None:
    """reembed --model takes what --embedder takes but none (local:DIR and static:DIR too); its help said "local,
    hashing[-DIM], openai/MODEL[@DIMS]", so a user with an exported model did not know it could switch to it."""
    text = " ".join(CliRunner().invoke(cli, ["reembed", "--help"], catch_exceptions=False).output.split())
    described = text.split("--model TEXT", 1)[1].split("--base-url", 1)[0]
    for spec in ("local", "local:DIR", "static:DIR", "hashing[-DIM]", "openai/MODEL[@DIMENSIONS]"):
        assert spec in described, spec
    assert "| none" not in described


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of ``group`` and of its subgroups, with the words that name it."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_option_of_every_command_says_what_it_is() -> None:
    """`--help` showed options with a default and nothing else (tune --folds, sessions list --limit, migrate
    --revision, export --format, serve mcp --transport, eval --tools): each says what it is now."""
    bare = [
        f"{' '.join(path)} {option.opts[-1]}"
        for path, command in commands(cli)
        for option in command.params
        if isinstance(option, click.Option) and not option.help
    ]
    assert bare == []


def test_the_help_says_what_readme_says_the_commands_take() -> None:
    """The help against README's CLI section: serve mcp's find_tools took abstain, which only README said; anchors
    remove named its ids IDS... where README writes ID...; expand's default model is the library's, named once."""
    text = " ".join(CliRunner().invoke(cli, ["serve", "mcp", "--help"], catch_exceptions=False).output.split())
    assert "find_tools(query, k?, token_budget?, abstain?)" in text
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    assert "`anchors remove ID...`" in readme and "`remove TOOL_ID`" in readme
    assert "anchors remove [OPTIONS] ID..." in CliRunner().invoke(cli, ["anchors", "remove", "--help"]).output
    assert "remove [OPTIONS] TOOL_ID" in CliRunner().invoke(cli, ["remove", "--help"]).output
    text = " ".join(CliRunner().invoke(cli, ["expand", "--help"], catch_exceptions=False).output.split())
    assert f"(default: {DEFAULT_MODEL})" in text


def test_schema_option_is_honoured_by_every_command(empty_dsn: str, tmp_path: Path) -> None:
    opts = ("--dsn", empty_dsn, "--embedder", "hashing", "-c", "s", "--schema", "agent_tools")
    assert invoke("migrate", *opts)["schema"] == "agent_tools"
    invoke("import", tools_file(tmp_path), *opts)
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"qid": "1", "query": "mail bob", "relevant": ["gmail.send_email"]}) + "\n")
    assert invoke("examples", str(train), *opts)["examples"] == 1
    assert invoke("route", "mail bob", *opts, "-k", "1")["tools"][0]["id"] == "gmail.send_email"
    assert len(invoke("list", *opts)["tools"]) == 3
    assert [c["name"] for c in invoke("catalogs", *opts)["catalogs"]] == ["s"]
    export = tmp_path / "export.json"
    invoke("export", *opts, "-o", str(export))
    assert len(json.loads(export.read_text())["tools"]) == 3
    invoke("remove", "github.create_issue", *opts)
    with psycopg.connect(empty_dsn) as conn:
        schemas = {r[0] for r in conn.execute("select nspname from pg_namespace")}
        assert "agent_tools" in schemas and "toolstore" not in schemas
        assert conn.execute("select count(*) from agent_tools.tools").fetchone() == (2,)


def test_demo_loads_the_bundled_catalog_and_routes_its_requests(dsn: str) -> None:
    out = invoke("--dsn", dsn, "--embedder", "hashing", "demo", "-k", "3")
    assert out["catalog"] == "demo"
    assert out["loaded"]["inserted"] == 115 and out["loaded"]["examples"] > 300
    assert len(out["routes"]) == len(demo_requests()) >= 5
    for route in out["routes"]:
        routed = [t for t in route["tools"] if not t["always_on"]]
        assert len(routed) == 3 and route["tokens_used"] <= route["token_budget"], route["query"]
    again = invoke("--dsn", dsn, "--embedder", "hashing", "demo")
    assert again["loaded"]["unchanged"] == 115 and again["loaded"]["examples"] == 0


def test_demo_never_touches_the_users_catalog(dsn: str, tmp_path: Path) -> None:
    """With -c or $TOOLSTORE_CATALOG naming the user's catalog, the demo still loads into (and prunes) ``demo``."""
    invoke("--dsn", dsn, "--embedder", "hashing", "-c", "my-agent", "import", tools_file(tmp_path))
    result = CliRunner(env={"TOOLSTORE_CATALOG": "my-agent"}).invoke(
        cli, ["--dsn", dsn, "--embedder", "hashing", "demo", "-k", "1", "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["catalog"] == "demo" and out["loaded"]["removed"] == 0
    assert "loading into catalog 'demo', not 'my-agent'" in result.stderr
    listed = invoke("--dsn", dsn, "--embedder", "none", "-c", "my-agent", "list")
    assert sorted(t["id"] for t in listed["tools"]) == sorted(t["id"] for t in TOOLS)


def test_statement_timeout_from_the_command_line_caps_a_route(dsn: str, tmp_path: Path, monkeypatch: Any) -> None:
    """README tells a store routing catalogs that others write to set a statement_timeout, but neither `route` nor
    `serve mcp` could: --statement-timeout (or $TOOLSTORE_STATEMENT_TIMEOUT) gives the store one, so a route past it
    is a StatementTimeoutError naming the limit (one line from the entry point), exit 1; a bad value is a usage
    error."""
    from toolstore import _steps

    opts = ("--dsn", dsn, "--embedder", "hashing", "-c", "capped")
    invoke("import", tools_file(tmp_path), *opts)
    raw_query = _steps.raw_query

    def sleeping(block: str) -> tuple[str, list[str]]:
        text, names = raw_query(block)
        return (f"select pg_sleep(60) from ({text}) as routed", names) if block == "route" else (text, names)

    monkeypatch.setattr(_steps, "raw_query", sleeping)
    for args, env in (
        (("--statement-timeout", "0.3", "route", "send an email", *opts), {}),
        (("route", "send an email", *opts), {"TOOLSTORE_STATEMENT_TIMEOUT": "0.3"}),
    ):
        result = CliRunner().invoke(cli, list(args), env=env)
        assert result.exit_code == 1, result.output
        assert "statement ran past the store's statement_timeout of 0.3 s" in str(result.exception), result
    bad = CliRunner().invoke(cli, ["--statement-timeout", "0", "route", "x", *opts])
    assert bad.exit_code == 2 and "'0' is not a positive number of seconds" in bad.output, bad.output
    # past the store's bound: a usage error naming the option, not 'error: statement_timeout must be ...' once the
    # store was being made
    for value in ("86401", "1e9"):
        over = CliRunner().invoke(cli, ["--statement-timeout", value, "route", "x", *opts])
        assert over.exit_code == 2, over.output
        assert "'--statement-timeout'" in over.output, over.output
        assert f"'{value}' is not a positive number of seconds up to 86,400" in over.output, over.output


def test_host_or_port_without_http_is_refused_not_a_stdio_server_waiting_on_the_terminal() -> None:
    """`toolstore serve mcp --port 9000` (--transport http left out) served stdio, waiting silently on the terminal's
    stdin while the user waited for a port to open; --host or --port without --transport http is a usage error, before
    any database is reached (the DSN here reaches none)."""
    env = {"TOOLSTORE_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    for given, named in [
        (["--port", "9000"], "--port goes"),
        (["--host", "0.0.0.0"], "--host goes"),
        (["--host", "0.0.0.0", "--port", "9000"], "--host and --port go"),
    ]:
        result = CliRunner().invoke(cli, ["-c", "x", "serve", "mcp", *given], env=env, input="")
        assert result.exit_code == 2, result.output
        assert f"Error: {named} with --transport http; stdio serves on stdin and stdout" in result.output
