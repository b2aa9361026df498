"""The ``toolstore`` entry point: every command on the group, and library errors turned into one line."""

from __future__ import annotations

import logging
import os
import sys

import click
import psycopg

from .._errors import ToolstoreError, first_line, redact
from . import access, anchors, cache, catalog, demo, ingest, quality, route, serve, sessions
from .app import Unanswered, cli

for _module in (catalog, route, demo, ingest, quality, serve, sessions, access, anchors, cache):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


class _OneLine(logging.Formatter):
    """A log record as one line: a library that logs an exception with its traceback (the mcp SDK reading a server
    that does not speak MCP) adds a line before the command's own error, not a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"


class _Said(logging.StreamHandler):
    """The stderr handler, which keeps what it said: a note of the command's error that was said as a warning while
    it ran (a failed bulk write's indexes not built again: logged, and noted on the write's error) is not said
    twice."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.said.add(record.getMessage())
        super().emit(record)


def _log_to_stderr() -> set[str]:
    """Warnings and errors of toolstore and the libraries it drives, one line each on stderr (where nothing else
    configured logging); the messages said, filled in as they are."""
    root = logging.getLogger()
    if root.handlers:
        return set()
    handler = _Said()
    handler.setFormatter(_OneLine())
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)
    return handler.said


def _say_notes(exc: BaseException, said: set[str]) -> None:
    """The notes of the command's error (PEP 678's ``__notes__``: how to build the HNSW indexes a failed bulk write
    left dropped, what else failed to close), a line ``note: ...`` each after its ``error:`` line, redacted as a
    usage error's text is; but for one said already as a warning."""
    for note in getattr(exc, "__notes__", ()):
        text = " ".join(str(note).split())
        if text and str(note) not in said:
            click.echo(f"note: {redact(text)}", err=True)


def usage_line(exc: click.UsageError) -> str:
    """A usage error as one line, as a library error prints, with where the command's help is (click's own takes four:
    the usage, a hint, a blank line and ``Error: ...``): ``Invalid value for '-k' / '--k': 0 is not in the range
    1<=x<=1000 (see toolstore route --help)``. Click quotes what was typed (a DSN given to the wrong option, an extra
    argument), so what looks like a credential in it is redacted as in a library error (``_errors.redact``)."""
    text = redact(" ".join(exc.format_message().split()).rstrip("."))
    ctx = exc.ctx
    if ctx is not None and ctx.help_option_names:
        text += f" (see {ctx.command_path} {ctx.help_option_names[0]})"
    return text


def _abort_line(exc: click.exceptions.Abort) -> str:
    """What an Abort says: ``aborted``, on a line of its own. A question left without an answer (Ctrl-C, or Ctrl-D,
    which a terminal does not echo: :class:`~.app.Unanswered`) left its line open after ``[y/N]: ``, so it is ended
    first, wherever stderr goes. Ctrl-C typed on a terminal that echoes control characters left ``^C`` where the
    cursor was, so the line starts past it; elsewhere (a pipe, a question answered "n", a SIGINT that no terminal
    sent: ``kill -INT`` of a command in the background) it is the one line."""
    interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
    return "\naborted" if isinstance(exc, Unanswered) or interrupted and _ctrl_c_echoed() else "aborted"


def _ctrl_c_echoed() -> bool:
    """Whether a Ctrl-C that interrupted the command can have been typed on stderr's terminal and echoed there as
    ``^C``: the terminal echoes control characters (its ECHO and ECHOCTL modes: a shell's default) and it is the
    command's controlling terminal, with the command's process group in its foreground, the one a typed Ctrl-C
    interrupts. A command in the background, or one whose stderr is a terminal that does not control it (a
    supervisor's), got its SIGINT from a ``kill``, which echoes nothing; a ``kill -INT`` of a command in the
    foreground cannot be told from a typed Ctrl-C (the signal does not say who sent it): a blank line then. False
    where there is no termios (Windows), whose console echoes nothing of it."""
    try:
        import termios  # POSIX only: imported here, so that the command line runs without it
    except ImportError:
        return False
    try:
        fd = sys.stderr.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return False
        lflag = termios.tcgetattr(fd)[3]
    except (OSError, ValueError, termios.error):  # no descriptor (a test's capture), or not our terminal (ENOTTY)
        return False
    return bool(lflag & termios.ECHO and lflag & termios.ECHOCTL)


def main() -> None:
    """Run the command line: library errors become one line on stderr (then their notes, a line each) and exit
    status 1, usage errors one line and exit status 2, never a traceback."""
    said = _log_to_stderr()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort as exc:
        click.echo(_abort_line(exc), err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # `toolstore` alone: its help
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        click.echo(f"error: {usage_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ToolstoreError as exc:
        click.echo(f"error: {exc}", err=True)
        _say_notes(exc, said)
        sys.exit(1)
    except psycopg.Error as exc:
        click.echo(f"database error: {first_line(exc)}", err=True)  # redacted, as DatabaseError's text
        _say_notes(exc, said)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        _say_notes(exc, said)
        sys.exit(1)
