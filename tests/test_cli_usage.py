"""Usage errors of the global options: exit 2 and one line naming the option, where its value came from (the command
line or its environment variable) and the command's help, before anything is opened."""

from __future__ import annotations

import sys

import pytest

from toolstore.cli import main as entry

#: A DSN that parses and reaches no server: a command that got as far as connecting fails there (exit 1).
NOWHERE = "postgresql:///none?host=/nonexistent"
VARIABLES = [f"TOOLSTORE_{name}" for name in ("DSN", "CATALOG", "SCHEMA", "EMBEDDER", "STATEMENT_TIMEOUT")]


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """The entry point on ``args`` with the environment variables ``env`` (the embedder none, nothing to load): its
    exit status and stderr."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["toolstore", "--embedder", "none", *args])
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
