"""Usage errors of the global options: exit 2 and one line naming the option, where its value came from (the command
line or its environment variable) and the command's help, before anything is opened."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolstore.cli import main as entry
from toolstore.cli.demo import DEMO_DIR

#: A DSN that parses and reaches no server: a command that got as far as connecting fails there (exit 1).
NOWHERE = "postgresql:///none?host=/nonexistent"
DEMO_TOOLS = DEMO_DIR / "tools.jsonl"
VARIABLES = [f"TOOLSTORE_{name}" for name in ("DSN", "CATALOG", "SCHEMA", "EMBEDDER", "STATEMENT_TIMEOUT")]


def run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    env: dict[str, str] | None = None,
    embedder: tuple[str, ...] = ("--embedder", "none"),
) -> tuple[int, str]:
    """The entry point on ``args`` with the environment variables ``env`` (after ``embedder``: the embedder none,
    nothing to load): its exit status and stderr."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["toolstore", *embedder, *args])
    with pytest.raises(SystemExit) as exited:
        entry()
    return int(exited.value.code or 0), capsys.readouterr().err


def said_once(err: str, said: str) -> None:
    """``err`` is the one line ``error: {said}``, whose ``(see toolstore ... --help)`` names the program as it was run
    (``python -m pytest`` here)."""
    said, see = said.split(" (see ")
    assert err.startswith(f"error: {said} (see ") and len(err.splitlines()) == 1, err
    assert err.endswith(f"{see.removeprefix('toolstore')}\n"), err


TIMEOUT = "'0' is not a positive number of seconds up to 86,400"


@pytest.mark.parametrize(
    "args, env, said",
    [
        (
            ("--statement-timeout", "0", "catalogs"),
            {},
            f"Invalid value for '--statement-timeout': {TIMEOUT} (see toolstore --help)",
        ),
        (
            ("--statement-timeout", "0", "catalogs"),
            {"TOOLSTORE_STATEMENT_TIMEOUT": "5"},
            f"Invalid value for '--statement-timeout': {TIMEOUT} (see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "catalogs"),
            {"TOOLSTORE_STATEMENT_TIMEOUT": "0"},
            f"Invalid value for '--statement-timeout' (from $TOOLSTORE_STATEMENT_TIMEOUT): {TIMEOUT} "
            "(see toolstore --help)",
        ),
        (
            ("catalogs", "--statement-timeout", "0"),
            {},
            f"Invalid value for '--statement-timeout': {TIMEOUT} (see toolstore catalogs --help)",
        ),
    ],
)
def test_a_usage_error_names_the_environment_variable_only_when_the_value_came_from_it(
    args: tuple[str, ...],
    env: dict[str, str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--statement-timeout 0` typed on the command line said "Invalid value for '--statement-timeout' (env var:
    'TOOLSTORE_STATEMENT_TIMEOUT')": click names an option's variable whenever its help shows it, so the error blamed
    the environment for what was typed. The variable is named only when the value was read from it."""
    code, err = run(monkeypatch, capsys, *args, env=env)
    assert code == 2, err
    said_once(err, said)


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--dsn", NOWHERE, "--schema", "BAD", "catalogs"),
            "Invalid value for '--schema': schema name must be lower case (Postgres folds unquoted names), got 'BAD' "
            "(see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "catalogs", "--schema", "bad-x"),
            "Invalid value for '--schema': schema name must be a plain identifier, got 'bad-x' "
            "(see toolstore catalogs --help)",
        ),
        (
            ("--dsn", NOWHERE, "migrate", "--schema", "1st"),
            "Invalid value for '--schema': schema name must be a plain identifier, got '1st' "
            "(see toolstore migrate --help)",
        ),
        (
            ("--dsn", NOWHERE, "-c", "bad\x01name", "list"),
            "Invalid value for '--catalog' / '-c': catalog name must be a non-empty string of at most 200 printable "
            "characters, got 'bad\\x01name' (see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "list", "-c", " "),
            "Invalid value for '--catalog' / '-c': catalog name must be a non-empty string of at most 200 printable "
            "characters, got ' ' (see toolstore list --help)",
        ),
        (
            ("--dsn", NOWHERE, "drop-catalog", "bad\x7fname", "--yes"),
            "Invalid value for 'NAME': catalog name must be a non-empty string of at most 200 printable characters, "
            "got 'bad\\x7fname' (see toolstore drop-catalog --help)",
        ),
        (
            ("--dsn", "postgresql+psycopg://app:Sup3rSecret@localhost/app", "catalogs"),
            "Invalid value for '--dsn': malformed DSN: 'postgresql+psycopg://' is SQLAlchemy's URL scheme, not "
            "libpq's: write 'postgresql://' (drop '+psycopg') (see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "catalogs", "--dsn", "postgresql://app:Sup3r%Secret@localhost/app"),
            "Invalid value for '--dsn': malformed DSN: invalid percent-encoded token: \"[redacted]\" "
            "(see toolstore catalogs --help)",
        ),
        (
            ("--dsn", "postgresql://app:Sup3r@Secret@localhost/app", "catalogs"),
            "Invalid value for '--dsn': malformed DSN: its host holds an '@' (percent-encode an '@' in a password as "
            "%40) (see toolstore --help)",
        ),
    ],
)
def test_a_schema_catalog_or_dsn_the_library_refuses_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README says a usage error exits 2 naming the command's help, but `--schema BAD`, `-c 'bad\\x01name'` (or
    drop-catalog's NAME) and a malformed --dsn exited 1 with the library's line ('error: schema name must be lower
    case ...'), the checks made once the store was being opened: a script could not tell a mistyped option from a
    failed command. Each is the option's usage error now, its text the library's, a DSN's password never in it."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)
    assert "Sup3r" not in err and "Secret" not in err, err


@pytest.mark.parametrize(
    "env, said",
    [
        (
            {"TOOLSTORE_DSN": NOWHERE, "TOOLSTORE_SCHEMA": "Bad"},
            "Invalid value for '--schema' (from $TOOLSTORE_SCHEMA): schema name must be lower case (Postgres folds "
            "unquoted names), got 'Bad' (see toolstore --help)",
        ),
        (
            {"TOOLSTORE_DSN": NOWHERE, "TOOLSTORE_CATALOG": "tab\there"},
            "Invalid value for '--catalog' / '-c' (from $TOOLSTORE_CATALOG): catalog name must be a non-empty string "
            "of at most 200 printable characters, got 'tab\\there' (see toolstore --help)",
        ),
        (
            {"TOOLSTORE_DSN": "postgresql://app:Sup3r%Secret@localhost/app"},
            "Invalid value for '--dsn' (from $TOOLSTORE_DSN): malformed DSN: invalid percent-encoded token: "
            '"[redacted]" (see toolstore --help)',
        ),
    ],
)
def test_a_schema_catalog_or_dsn_from_the_environment_is_a_usage_error_naming_the_variable(
    env: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad $TOOLSTORE_SCHEMA, $TOOLSTORE_CATALOG or $TOOLSTORE_DSN exited 1 with the library's line, which named no
    variable; it is a usage error naming the option and the variable its value came from."""
    code, err = run(monkeypatch, capsys, "list", env=env)
    assert code == 2, err
    said_once(err, said)
    assert "Sup3r" not in err and "Secret" not in err, err


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--dsn", NOWHERE, "route", "x", "--session", ""),
            "Invalid value for '--session': session id is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "sessions", "prune", "--session", " "),
            "Invalid value for '--session': session id is empty (see toolstore sessions prune --help)",
        ),
        (
            ("--dsn", NOWHERE, "sessions", "show", "s" * 201),
            "Invalid value for 'SESSION': session id is 201 characters long; the limit is 200 "
            "(see toolstore sessions show --help)",
        ),
    ],
)
def test_a_session_id_the_library_refuses_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`route --session ''` (a script's unset variable), `sessions prune --session ' '` or a session id over the
    library's 200 characters went to the library, which refused it once the store was open (exit 1), or never got that
    far; each is the option's (or argument's) usage error now, exit 2, in the library's words."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)


MODELS = "local | local:DIR | static:DIR | hashing[-DIM] | openai/MODEL[@DIMENSIONS]"
UNKNOWN = f"unknown embedder 'bogus'; expected {MODELS} | none"


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--embedder", "bogus", "--dsn", NOWHERE, "route", "x"),
            f"Invalid value for '--embedder': {UNKNOWN} (see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--embedder", "openai/"),
            "Invalid value for '--embedder': OpenAIEmbedder model must be a non-empty string "
            "(see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "list", "--embedder", "openai/text-embedding-3-small@0"),
            "Invalid value for '--embedder': OpenAIEmbedder dimensions must be a positive integer, got 0 "
            "(see toolstore list --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--embedder", "openai/text-embedding-3-small@"),
            "Invalid value for '--embedder': embedder 'openai/text-embedding-3-small@': dimensions after '@' must be "
            "a number (see toolstore route --help)",
        ),
        (
            ("--embedder", "hashing-4", "--dsn", NOWHERE, "route", "x"),
            "Invalid value for '--embedder': the hashing embedder's dimension must be at least 8, got 4 "
            "(see toolstore --help)",
        ),
        (
            ("--embedder", "hashing-", "--dsn", NOWHERE, "route", "x"),
            "Invalid value for '--embedder': embedder 'hashing-': the hashing dimension must be a number "
            "(see toolstore --help)",
        ),
        (
            ("--embedder", "local:", "--dsn", NOWHERE, "import", "tools.json"),
            "Invalid value for '--embedder': embedder 'local:': no model directory after 'local:' "
            "(see toolstore --help)",
        ),
        (
            ("--dsn", NOWHERE, "reembed", "--model", "bogus"),  # the specs reembed takes: not none, which it refuses
            f"Invalid value for '--model': unknown embedder 'bogus'; expected {MODELS} (see toolstore reembed --help)",
        ),
        (
            ("--dsn", NOWHERE, "reembed", "--model", "none"),
            f"Invalid value for '--model': reembed needs a model, not 'none'; expected {MODELS} "
            "(see toolstore reembed --help)",
        ),
    ],
)
def test_a_malformed_embedder_spec_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--embedder bogus` (or `openai/`, `hashing-4`...) exited 1 with the library's line, as a failed command does,
    once the store was being opened; `hashing-` and `openai/MODEL@` were taken (for 256 dimensions, for the model's
    own). A spec the embedder factory refuses is the option's usage error now (reembed's --model too), exit 2, in the
    library's words, before anything is opened. reembed's listed `| none` among the specs it expects, though it
    refuses none: it lists the models it takes."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)


def test_a_malformed_embedder_from_the_environment_is_a_usage_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad $TOOLSTORE_EMBEDDER is a usage error naming the variable it came from, even where the option given after
    the command would have replaced it (as a bad $TOOLSTORE_SCHEMA is)."""
    env = {"TOOLSTORE_DSN": NOWHERE, "TOOLSTORE_EMBEDDER": "openai/"}
    for args in (("list",), ("route", "x", "--embedder", "none")):
        code, err = run(monkeypatch, capsys, *args, env=env, embedder=())
        assert code == 2, err
        said_once(
            err,
            "Invalid value for '--embedder' (from $TOOLSTORE_EMBEDDER): OpenAIEmbedder model must be a non-empty "
            "string (see toolstore --help)",
        )


def test_a_model_directory_without_its_model_stays_the_commands_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`local:DIR` and `static:DIR` are well formed whatever DIR holds: a directory that lacks the model is what the
    command finds when it builds the embedder, its error (exit 1, one line naming what is missing), not a usage
    error."""
    for kind in ("local", "static"):
        spec = f"{kind}:{tmp_path / 'nothing'}"
        code, err = run(monkeypatch, capsys, "--dsn", NOWHERE, "route", "x", embedder=("--embedder", spec))
        assert code == 1 and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: embedder {spec!r}: {tmp_path / 'nothing'} lacks "), err


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--dsn", NOWHERE, "export", "-o", ""),
            "Invalid value for '-o' / '--output': it is empty: give a path, or leave the option out "
            "(see toolstore export --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS), "--queries", str(DEMO_TOOLS), "--report", " "),
            "Invalid value for '--report': it is empty: give a path, or leave the option out "
            "(see toolstore eval --help)",
        ),
    ],
)
def test_an_empty_path_to_write_is_a_usage_error(
    args: tuple[str, ...],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`export -o ""` (a script's unset variable) failed with a traceback (click takes "" for the current directory,
    which has no name to write a file beside), and `eval --report ""` wrote eval.md into the current directory
    without a word; an empty path to write is the option's usage error."""
    monkeypatch.chdir(tmp_path)
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, said",
    [
        (("--dsn", NOWHERE, "route"), "give a REQUEST or --messages FILE (see toolstore route --help)"),
        (("--dsn", NOWHERE, "tune"), "give --examples or --sessions (or both) (see toolstore tune --help)"),
        (
            ("--dsn", NOWHERE, "tune", "--negatives", str(DEMO_TOOLS), "--sessions", str(DEMO_TOOLS)),
            "--negatives needs --examples: abstention is calibrated on both (see toolstore tune --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS)),
            "give --queries or --sessions (one of them) (see toolstore eval --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS), "--queries", str(DEMO_TOOLS), "--tune"),
            "--tune needs --train or --train-sessions: weights are never fitted on what is evaluated "
            "(see toolstore eval --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS), "--queries", str(DEMO_TOOLS), "--config", "bm2"),
            "Invalid value for '--config': unknown config(s) 'bm2'; known: name, description, expansion, bm25, dense, "
            "intent, uniform, default, tuned (see toolstore eval --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS), "--sessions", str(DEMO_TOOLS), "--config", "x"),
            "Invalid value for '--config': unknown config(s) 'x' for sessions; known: turn, session, tuned "
            "(see toolstore eval --help)",
        ),
        (
            ("--dsn", NOWHERE, "eval", "--tools", str(DEMO_TOOLS), "--queries", str(DEMO_TOOLS), "--config", "tuned"),
            "config 'tuned' needs --tune (and --train or --train-sessions) (see toolstore eval --help)",
        ),
    ],
)
def test_a_command_given_too_little_or_an_unknown_config_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`route` without REQUEST or --messages, `tune` without --examples or --sessions, `eval` without --queries or
    --sessions, `--tune` without training data, `--negatives` without --examples, `eval --config` naming no config
    (or 'tuned' without --tune) exited 1, as a failed command does, where `sync mcp` given neither --url nor a
    COMMAND, `route --seed` without --explore exit 2; each is a usage error now, naming the command's help."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)


@pytest.mark.parametrize(
    "args, said",
    [
        (("--dsn", NOWHERE, "route", ""), "Invalid value for 'REQUEST': query is empty (see toolstore route --help)"),
        (
            ("--dsn", NOWHERE, "route", " ", "--messages", str(DEMO_TOOLS)),
            "Invalid value for 'REQUEST': query is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--allow", "slack.*", "--allow", ""),
            "Invalid value for '--allow': allow value is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--block", " "),
            "Invalid value for '--block': block value is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--category", ""),
            "Invalid value for '--category': categories value is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--provider", ""),
            "Invalid value for '--provider': providers value is empty (see toolstore route --help)",
        ),
        (
            ("--dsn", NOWHERE, "route", "x", "--tag", "t" * 257),
            "Invalid value for '--tag': tags value is 257 characters long; the limit is 256 "
            "(see toolstore route --help)",
        ),
    ],
)
def test_a_request_or_filter_value_route_refuses_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`route ""` (a script's unset variable) or `--allow ""`, `--provider ""`... exited 1 with route()'s refusal
    ('query is empty', 'allow value is empty'), once the store was open, where an empty --session is a usage error;
    route()'s own check of the request and of each filter's values runs as they are read now: a usage error naming
    the argument or option, exit 2, before anything is opened (or a --messages file read)."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--dsn", NOWHERE, "import", str(DEMO_TOOLS), "--provider", " "),
            "Invalid value for '--provider': it is empty: give a value, or leave the option out "
            "(see toolstore import --help)",
        ),
        (
            ("--dsn", NOWHERE, "sync", "mcp", "--provider", "", "--", sys.executable, "-c", "pass"),
            "Invalid value for '--provider': it is empty: give a value, or leave the option out "
            "(see toolstore sync mcp --help)",
        ),
        (
            ("--dsn", NOWHERE, "remove", " "),
            "Invalid value for 'TOOL_ID': tool id is empty (see toolstore remove --help)",
        ),
        (
            ("--dsn", NOWHERE, "remove", "t" * 257),
            "Invalid value for 'TOOL_ID': tool id is 257 characters long; the limit is 256 "
            "(see toolstore remove --help)",
        ),
        (("--dsn", NOWHERE, "grant", ""), "Invalid value for 'ROLE': role is empty (see toolstore grant --help)"),
        (("--dsn", NOWHERE, "revoke", " "), "Invalid value for 'ROLE': role is empty (see toolstore revoke --help)"),
        (
            ("--dsn", NOWHERE, "migrate", "--revision", ""),
            "Invalid value for '--revision': it is empty: give a value, or leave the option out "
            "(see toolstore migrate --help)",
        ),
    ],
)
def test_an_empty_provider_tool_id_or_role_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`import --provider ""`, `remove ""` and `grant ""` (a script's unset variable) exited 1 with the library's
    refusal, as a failed command does; `sync mcp --provider ""` started the server first, to be refused once it was
    listed (or to fail on its own, "Connection closed", saying nothing of the provider); `migrate --revision ""`
    exited 1 with the migration's error. Each is a usage error now, exit 2, before anything is opened or started."""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, said)


@pytest.mark.parametrize(
    "url, said",
    [
        ("notaurl", "'notaurl' is not an http:// or https:// URL"),
        ("ftp://u:hunter2@mcp.example/x?token=hunter2", "'ftp://mcp.example' is not an http:// or https:// URL"),
        ("", "it is empty: give a value, or leave the option out"),
    ],
)
def test_a_sync_mcp_url_that_is_no_web_url_is_a_usage_error(
    url: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sync mcp --url notaurl` exited 1 with the library's refusal once the store was open, where `expand --base-url
    notaurl` is a usage error, and `--url ""` said to give --url or a COMMAND; --url is checked as --base-url is now:
    a usage error naming it, exit 2, quoting the URL's scheme and server only."""
    code, err = run(monkeypatch, capsys, "--dsn", NOWHERE, "sync", "mcp", "--url", url)
    assert code == 2, err
    said_once(err, f"Invalid value for '--url': {said} (see toolstore sync mcp --help)")
    assert "hunter2" not in err


@pytest.mark.parametrize(
    "args, said",
    [
        (("--pattern", "", "--tool", "gmail.send_email"), "anchor pattern is empty"),
        (("--pattern", "mail", "--tool", " "), "anchor tool is empty"),
        (
            ("--pattern", r"(a)\1", "--tool", "gmail.send_email"),
            r"anchor pattern '(a)\\1' uses a back-reference (\1 ... \9): refused, matching one can take exponential "
            "time",
        ),
    ],
)
def test_an_anchor_refused_without_the_database_is_a_usage_error(
    args: tuple[str, ...], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`anchors add --pattern ""` (or an empty --tool, a back-reference) exited 1 with the library's refusal ('anchor
    #1 pattern is empty') once the store was open; what the library refuses of an anchor without the database is a
    usage error now, exit 2, before anything is opened (a pattern Postgres refuses stays the command's error)."""
    code, err = run(monkeypatch, capsys, "--dsn", NOWHERE, "anchors", "add", *args)
    assert code == 2, err
    said_once(err, f"{said} (see toolstore anchors add --help)")


@pytest.mark.parametrize(
    "args",
    [
        ("--dsn", NOWHERE, "route", "ping the team", "--format", "table", "--json"),
        ("--dsn", NOWHERE, "--json", "route", "ping the team", "--format", "table"),
    ],
    ids=["after", "before the command"],
)
def test_route_format_table_with_json_is_a_usage_error_naming_both(
    args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`route --format table --json` printed a table, the --json (\"always print JSON\") dropped without a word, so a
    script that parses the output broke on a terminal only. The two ask for two outputs: a usage error naming both,
    exit 2, before anything is opened, as other commands' options that contradict each other are. (--json with a
    --format of tool definitions, which are JSON, stays what it was.)"""
    code, err = run(monkeypatch, capsys, *args)
    assert code == 2, err
    said_once(err, "--format table prints a table and --json JSON: give one of them (see toolstore route --help)")
