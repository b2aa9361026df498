"""What the CLI's options take, checked as click checks a value (a usage error naming the option, exit 2): the
value types, the callbacks running the library's checks, and an option class whose errors name where its value came
from."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .._embedders.openai_client import web_url
from .._errors import InvalidInputError, url_shown
from .._textfile import Stdin

#: A file a command reads: a path, or stdin (``-``).
Readable = Path | Stdin
#: Where a command notes the parameter that reads stdin (``ctx.meta``).
_STDIN_READER = "toolstore.stdin_reader"


class Seconds(click.ParamType):
    """A positive, finite number of seconds (click's FloatRange lets nan and inf through), up to ``high`` when given:
    the library's bound, named by the option in a usage error rather than by the library's argument."""

    name = "seconds"

    def __init__(self, high: float = math.inf) -> None:
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if not 0 < seconds < math.inf or seconds > self.high:
            bound = "" if self.high == math.inf else f" up to {self.high:,g}"
            self.fail(f"{value!r} is not a positive number of seconds{bound}", param, ctx)
        return seconds


class Number(click.ParamType):
    """A finite number from ``low`` to ``high`` (click's FloatRange lets nan through), not 0 with ``nonzero``: the
    library's range, named by the option in a usage error rather than by the library's argument."""

    name = "number"

    def __init__(self, low: float, high: float, *, nonzero: bool = False) -> None:
        self.low, self.high, self.nonzero = low, high, nonzero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not self.low <= number <= self.high or (self.nonzero and number == 0):
            kind = "a non-zero number" if self.nonzero else "a number"
            self.fail(f"{value!r} is not {kind} from {self.low:g} to {self.high:g}", param, ctx)
        return number


class Written(click.Path):
    """A path a command writes (``export -o``, ``eval --report``), refused when empty (a script's unset variable):
    click takes ``""`` for ``Path("")``, the current directory, where ``export -o ""`` failed with a traceback and
    ``eval --report ""`` wrote eval.md without a word."""

    def __init__(self, *, dir_okay: bool = True, file_okay: bool = True) -> None:
        super().__init__(dir_okay=dir_okay, file_okay=file_okay, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("it is empty: give a path, or leave the option out", param, ctx)
        return super().convert(value, param, ctx)


class ReadFile(click.Path):
    """A file a command reads (import's FILE, eval's --queries, route's --messages...), or ``-`` for stdin: a pipe
    (``jq ... | toolstore examples -``) or a file it is redirected from, read by its text as a file named without a
    suffix is, once (:class:`Stdin`). ``-`` with stdin a terminal or closed is a usage error, not a wait for typing,
    and so is a second ``-`` in one command: stdin holds one file. ``what`` names what is read (``tools``)."""

    def __init__(self, what: str) -> None:
        super().__init__(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Stdin) or value != "-":
            return value if isinstance(value, Stdin) else super().convert(value, param, ctx)
        if sys.stdin is None or sys.stdin.isatty():
            stdin = "closed" if sys.stdin is None else "a terminal"
            given = "" if param is None or isinstance(param, click.Argument) else f"{param.opts[0]} "
            command = ctx.command_path if ctx is not None else "toolstore"
            self.fail(
                f"- reads the {self.what} from stdin, {stdin} here: pipe them in (... | {command} {given}-) or name "
                "their file",
                param,
                ctx,
            )
        hint = param.get_error_hint(ctx) if param is not None else "-"
        if ctx is not None and ctx.meta.setdefault(_STDIN_READER, hint) != hint:
            self.fail(f"- reads stdin, which {ctx.meta[_STDIN_READER]} reads already: name a file for one", param, ctx)
        return Stdin()


def shown(file: Readable) -> str:
    """A file read as the command line names it (its JSON's ``file``): ``-`` for stdin."""
    return "-" if isinstance(file, Stdin) else str(file)


class Argument(click.Argument):
    """An argument its errors name as its help does in words: ``REQUEST``, where click names an optional one by its
    place in the usage line, brackets included (``Invalid value for '[REQUEST]'``)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        hint = super().get_error_hint(ctx)
        return hint.replace("'[", "'", 1).replace("]'", "'", 1) if not self.required else hint


def not_empty(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """An option callback refusing an empty value (a script's unset variable), which would be taken for no value: the
    default model, server or filter, without a word."""
    if isinstance(value, str) and not value.strip():
        raise click.BadParameter("it is empty: give a value, or leave the option out", ctx, param)
    return value


def http_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --base-url (or sync mcp --url) callback: not empty, and an http:// or https:// URL (the SDK takes ``notaurl``,
    to fail at the first model call), said as a usage error naming the option and quoting the URL's scheme and server
    only."""
    if not_empty(ctx, param, value) is not None and not web_url(value or ""):
        raise click.BadParameter(f"{url_shown(value or '')!r} is not an http:// or https:// URL", ctx, param)
    return value


class SourcedOption(click.Option):
    """An option whose usage error names where its value came from: click's names an option's environment variable
    whenever its help shows it (``Invalid value for '--statement-timeout' (env var: 'TOOLSTORE_STATEMENT_TIMEOUT')``),
    a value typed on the command line too; this one names the variable only when the value was read from it
    (``'--statement-timeout' (from $TOOLSTORE_STATEMENT_TIMEOUT)``), shown in the help or not (``--dsn``'s)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        hint = click.Parameter.get_error_hint(self, ctx)  # the option's names, without click's env var
        source = ctx.get_parameter_source(self.name or "") if ctx is not None else None
        if source is click.core.ParameterSource.ENVIRONMENT:
            names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or ())
            read = next((name for name in names if os.environ.get(name)), None)
            hint += f" (from ${read})" if read else ""
        return hint


def checked(check: Callable[[Any], object], then: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """A parameter callback running the library's ``check`` of a value given (a catalog, schema or DSN), its refusal a
    usage error naming the option or argument, as click's own checks are (exit 2), not a library error once the store
    is being opened (exit 1); then ``then``, if given."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            try:
                check(value)
            except InvalidInputError as exc:
                raise click.BadParameter(str(exc), ctx, param) from None
        return value if then is None else then(ctx, param, value)

    return callback
