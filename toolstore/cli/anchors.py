"""``toolstore anchors``: the catalog's routing rules ``pattern -> tool, boost`` (add, list, remove, import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from .._anchors import check_anchor, load_anchors
from .._errors import InvalidInputError
from .._input import MAX_BOOST
from .._models import Anchor
from .app import command, counted, emit, open_store, reading
from .params import Number, Readable, ReadFile


class AnchorId(click.IntRange):
    """An anchor id, a bigint from 1: what is no integer is said to be no anchor id (click's IntRange said "'abc' is
    not a valid integer range")."""

    name = "anchor id"

    def __init__(self) -> None:
        super().__init__(1, 2**63 - 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                int(value)
            except ValueError:
                self.fail(f"{value!r} is not an anchor id (an integer, as `anchors list` shows)", param, ctx)
        return super().convert(value, param, ctx)


def _echo(anchors: Sequence[Anchor]) -> None:
    for a in anchors:
        click.echo(f"{a.id:>6}  {a.boost:+g}  {a.tool}  {a.pattern}")


def _emit(ctx: click.Context, anchors: Sequence[Anchor], empty: str) -> None:
    emit(ctx, [a.as_dict() for a in anchors], lambda: _echo(anchors), key="anchors", empty=empty)


@click.group("anchors")
def anchors_group() -> None:
    """Routing rules: a request that PATTERN (a Postgres regular expression, case-insensitive) matches adds BOOST
    to the tool's fused score, inside the route statement. An anchor goes with its tool when the tool is removed."""


@command("add")
@click.option("--pattern", required=True, help="Postgres regular expression matched (~*) against the request.")
@click.option("--tool", "tool_id", required=True, help="The tool id the rule boosts.")
@click.option(
    "--boost",
    default=1.0,
    show_default=True,
    type=Number(-MAX_BOOST, MAX_BOOST, nonzero=True),
    help=f"Added to the fused score: a non-zero number from {-MAX_BOOST:g} to {MAX_BOOST:g}.",
)
@click.pass_context
def add(ctx: click.Context, pattern: str, tool_id: str, boost: float) -> None:
    """Add an anchor (or change the boost of the same pattern and tool)."""
    try:  # what needs no database (an empty --pattern or --tool, a back-reference) is a usage error
        anchor = check_anchor(Anchor(pattern=pattern, tool=tool_id, boost=boost))
    except InvalidInputError as exc:
        raise click.UsageError(str(exc)) from None
    with open_store(ctx, create=False) as store:
        written = store.add_anchors([anchor])
    _emit(ctx, written, "no anchors written")


@command("list")
@click.pass_context
def list_(ctx: click.Context) -> None:
    """The catalog's anchors, oldest first: id, boost, tool, pattern."""
    with open_store(ctx, create=False) as store:
        found = store.anchors()
    _emit(ctx, found, f"no anchors in catalog {store.catalog!r}")


@command("remove")
@click.argument("ids", nargs=-1, required=True, type=AnchorId(), metavar="ID...")
@click.pass_context
def remove(ctx: click.Context, ids: tuple[int, ...]) -> None:
    """Remove anchors by id (as `anchors list` shows them); none is removed when one is unknown."""
    with open_store(ctx, create=False) as store:
        n = store.remove_anchors(ids)
    emit(ctx, {"removed": n}, lambda: click.echo(f"removed {counted(n, 'anchor')}"))


@command("import")
@click.argument("file", type=ReadFile("anchors"))
@click.option("--replace", is_flag=True, help="The file's anchors replace all of the catalog's.")
@click.option(
    "--allow-empty", is_flag=True, help="With --replace, let an empty FILE remove every anchor of the catalog."
)
@click.pass_context
def import_(ctx: click.Context, file: Readable, replace: bool, allow_empty: bool) -> None:
    """Anchors from a JSON FILE: a list of {"pattern", "tool", "boost"} objects (or `anchors list --json` output).
    All or nothing: one bad rule and nothing is written. With --replace, says how many of the catalog's anchors went;
    an empty FILE (a failed export?) would remove them all, and is refused unless --allow-empty. FILE - is stdin."""
    if allow_empty and not replace:
        raise click.UsageError("--allow-empty goes with --replace (an import without it removes nothing)")
    rules = load_anchors(file)
    if replace and not rules and not allow_empty:
        raise click.UsageError(
            f"{file} holds no anchors: --replace would remove every anchor of the catalog; give --allow-empty too to "
            "do that (or remove them with `anchors remove`)"
        )
    with open_store(ctx, create=False) as store, reading(file):  # what went, as the write removed it: a rule written
        written, removed = store.replace_anchors(rules) if replace else (store.add_anchors(rules), 0)

    def human() -> None:
        _echo(written)
        if replace:
            click.echo(f"removed {counted(removed, 'anchor')}, wrote {len(written)}")
        elif not written:
            click.echo("no anchors written")

    emit(ctx, {"anchors": [a.as_dict() for a in written], "removed": removed}, human)


for _command in (add, list_, remove, import_):
    anchors_group.add_command(_command)
COMMANDS = (anchors_group,)
