"""The ``toolstore`` entry point: every command on the group, and library errors turned into one line."""

from __future__ import annotations

import logging
import sys

import click
import psycopg

from .._errors import ToolstoreError, first_line
from . import access, anchors, cache, catalog, demo, ingest, quality, route, serve, sessions
from .app import cli

for _module in (catalog, route, demo, ingest, quality, serve, sessions, access, anchors, cache):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


class _OneLine(logging.Formatter):
    """A log record as one line: a library that logs an exception with its traceback (the mcp SDK reading a server
    that does not speak MCP) adds a line before the command's own error, not a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"


def _log_to_stderr() -> None:
    """Warnings and errors of toolstore and the libraries it drives, one line each on stderr (where nothing else
    configured logging)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_OneLine())
        handler.setLevel(logging.WARNING)
        root.addHandler(handler)


def main() -> None:
    """Run the command line: library errors become one line on stderr and exit status 1, never a traceback."""
    _log_to_stderr()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ToolstoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except psycopg.Error as exc:
        click.echo(f"database error: {first_line(exc)}", err=True)  # redacted, as DatabaseError's text
        sys.exit(1)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        sys.exit(1)
