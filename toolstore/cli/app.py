"""The ``toolstore`` group and what every command shares: the global options in effect (:func:`options`; the options
themselves, taken before the subcommand and after it, are :mod:`.global_options`'), opening the store, printing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

import click

from .. import _formats
from .._dsn import resolve_dsn
from .._embedders.factory import make_embedder
from .._errors import DatabaseError, InvalidInputError, StoreClosedError, UnknownToolError, add_notes, first_line
from .._migrate import DEFAULT_SCHEMA, check_schema_name, schema_revision
from .._models import JSON_VERSION
from .._progress import reporting
from .._store import ToolStore
from .ask import confirm
from .global_options import global_options
from .params import Readable

#: What ``route --format`` prints: JSON, a table, or tool definitions in one of the SDK formats.
ROUTE_FORMATS = ("json", "table", *_formats.FORMATS)


class _Command(click.Command):
    """A command whose usage errors name it: click raises an option's missing value (``-k`` without a number) and a
    wrong count of arguments without the context, so the entry point could not say which command's help to see."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.ctx = exc.ctx or ctx
            raise


@contextmanager
def _interrupts_abort() -> Iterator[None]:
    """Ctrl-C (or a prompt's end of input) as click's Abort, raised here: click's own turns it into one after writing
    a blank line to stderr (to end a terminal's echoed ``^C``), which a pipe got before "aborted". The entry point
    says it, in one line (``main._abort_line``)."""
    try:
        yield
    except (KeyboardInterrupt, EOFError) as exc:
        raise click.exceptions.Abort() from exc


class Unanswered(click.exceptions.Abort):
    """A question (:func:`ask`) left without an answer, by Ctrl-C or the end of input (Ctrl-D): its line is still
    open after ``[y/N]: ``, wherever stderr goes (a terminal, or a log it is redirected to)."""


def ask(question: str) -> None:
    """Ask ``question`` on stderr (``[y/N]``), a yes to go on (:func:`.ask.confirm`: a Ctrl-C typed as it appears is
    not missed): an answer "no" is click's Abort, none :class:`Unanswered` (the entry point ends the question's line
    before it says "aborted")."""
    try:
        confirm(question)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, (KeyboardInterrupt, EOFError)):  # as click.confirm: raised from None in them
            raise Unanswered() from exc.__context__
        raise


class _Group(_Command, click.Group):
    """The ``toolstore`` group, its usage errors named as a :class:`_Command`'s; Ctrl-C while it parses or runs a
    command (its store's close included) is an Abort (:func:`_interrupts_abort`)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _interrupts_abort():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _interrupts_abort():
            return super().invoke(ctx)


@click.group(cls=_Group)
@global_options(group=True)
def cli() -> None:
    """toolstore: Postgres as the tool router for AI agents."""


def command(name: str | None = None, **settings: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """``click.command`` with the global options accepted after the subcommand too."""

    def decorate(fn: Callable[..., Any]) -> click.Command:
        return click.command(name, cls=_Command, **settings)(global_options()(fn))

    return decorate


def options(ctx: click.Context) -> dict[str, Any]:
    """The global options in effect for this command."""
    return ctx.ensure_object(dict)


def embedder_option(ctx: click.Context) -> Any:
    """The embedder the global ``--embedder`` names (None for ``none``)."""
    return make_embedder(options(ctx)["embedder"])


def store_dsn(ctx: click.Context, *, create: bool) -> str:
    """The DSN of the global options. Unless ``create`` (the commands that set up: import, sync mcp, demo, eval;
    `migrate` runs the migrations itself), a schema other than the default that was never migrated is refused, not
    created by the store's ``migrate=True``: a misspelt --schema. The default one is created as before (a fresh
    database: `toolstore catalogs` lists none)."""
    opts = options(ctx)
    dsn, schema = resolve_dsn(opts["dsn"]), check_schema_name(opts["schema"])
    if not create and schema != DEFAULT_SCHEMA and schema_revision(dsn, schema) is None:
        raise DatabaseError(
            f"schema {schema!r} holds no toolstore catalog (never migrated: a misspelt --schema?); "
            f"`toolstore migrate --schema {schema}` creates it"
        )
    return dsn


@contextmanager
def open_store(ctx: click.Context, *, create: bool = True, catalog: str | None = None) -> Iterator[ToolStore]:
    """A ToolStore on the global options' database, schema, catalog (or ``catalog``) and embedder; with
    ``create=False`` the catalog and its schema must exist (:func:`store_dsn`). It is closed when the command ends
    (its context closes: ``ctx.call_on_close``), after the command printed what it did: a close that fails (a pool's,
    or Ctrl-C while it waits for the pool's workers) is said after that output, not in place of it (an import that
    committed, a route). A command that fails closes it at once, and a close that fails then is a note on the
    command's error, not the error said in its place."""
    opts = options(ctx)
    store = ToolStore(
        store_dsn(ctx, create=create),
        catalog=catalog or opts["catalog"],
        schema=opts["schema"],
        embedder=embedder_option(ctx),
        create=create,
        statement_timeout=opts["statement_timeout"],
        transaction_pooling=opts["transaction_pooling"],
    )
    try:
        yield store
    except BaseException as exc:
        try:
            store.close()
        except BaseException as failure:  # said as a note on the command's error, which is raised
            add_notes(exc, f"closing the store failed too: {type(failure).__name__}: {first_line(failure)}")
        raise
    ctx.call_on_close(store.close)


@contextmanager
def reading(file: Readable | None) -> Iterator[None]:
    """Name ``file`` in what the library refuses of its content inside (a write of what it holds): ``FILE: anchor #1
    pattern ...``, as the readers' ``FILE line N: ...`` do. Only input errors, of the same class, and not one that
    starts with the file already (a reader's run inside); a closed store's and every other error are the library's
    own. None names no file: a command writing several files' content (``tune``) cannot tell which one an error is of
    (``tuning needs at least 2 labelled requests``: all together), so it blames none, and the library's message names
    the input (``examples name ...``, ``session 's1' turn 2 ...``, ``negative request #3 ...``)."""
    try:
        yield
    except StoreClosedError:
        raise
    except (InvalidInputError, UnknownToolError) as exc:
        if file is None or str(exc).startswith(f"{file} ") or str(exc).startswith(f"{file}:"):
            raise
        named = type(exc)(f"{file}: {exc}")
        add_notes(named, *getattr(exc, "__notes__", ()))  # what it says beside (an index not built again) kept
        raise named from exc


def wants_json(ctx: click.Context) -> bool:
    """JSON when ``--json`` was given or stdout is not a terminal."""
    return bool(options(ctx)["json"]) or not sys.stdout.isatty()


def json_text(data: Any) -> str:
    """JSON as the CLI prints it: indented, UTF-8, timestamps in ISO 8601."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def emit(
    ctx: click.Context,
    data: Any,
    human: Callable[[], None] | None = None,
    *,
    key: str = "items",
    empty: str | None = None,
) -> None:
    """JSON when asked or when stdout is not a terminal; else the human rendering, or the line ``empty`` when the list
    (``data``, or ``data[key]``) is empty.

    The JSON is an object whose first field is ``version`` (:data:`JSON_VERSION`); a list is put under ``key``."""
    if human is None or wants_json(ctx):
        body = data if isinstance(data, dict) else {key: data}
        click.echo(json_text({"version": JSON_VERSION, **body}))
    elif empty is not None and not (data.get(key) if isinstance(data, dict) else data):
        click.echo(empty)
    else:
        human()


def note(ctx: click.Context, text: str) -> None:
    """A remark on stderr, unless ``--quiet``."""
    if not options(ctx).get("quiet"):
        click.echo(text, err=True)


def width(values: Iterable[str], least: int) -> int:
    """The width of a table's column of ``values`` (tool or session ids): ``least``, or the longest value's, so that
    each is shown whole (an id cut short reads as another, and cannot be copied into the next command)."""
    return max([least, *map(len, values)])


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``noun`` as a count of ``n`` takes it: as given for one, else ``many`` (by default ``noun`` + "s")."""
    return noun if n == 1 else many or f"{noun}s"


def counted(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and its noun (:func:`plural`): ``1 tool``, ``0 tools``, ``2 queries``."""
    return f"{n} {plural(n, noun, many)}"


@contextmanager
def progress(ctx: click.Context, desc: str, unit: str = "text") -> Iterator[None]:
    """A tqdm bar on stderr for the library's progress reports inside the block: only on a terminal, never with
    ``--quiet``."""
    if options(ctx).get("quiet") or not sys.stderr.isatty():
        yield
        return
    from tqdm import tqdm

    with tqdm(desc=desc, unit=unit, file=sys.stderr, leave=False) as bar:

        def update(done: int, total: int) -> None:
            if bar.total != total:
                bar.reset(total=total)
            bar.update(done - bar.n)
            if done >= total:
                bar.refresh()  # the final count, even within tqdm's minimum interval

        with reporting(update):
            yield


def summary(data: dict[str, Any]) -> Callable[[], None]:
    """A human rendering of a flat report: ``key: value, key: value`` (None as ``none``, as options take it)."""
    return lambda: click.echo(", ".join(f"{k}: {'none' if v is None else v}" for k, v in data.items()))
