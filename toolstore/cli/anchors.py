"""``toolstore anchors``: the catalog's routing rules ``pattern -> tool, boost`` (add, list, remove, import)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from .._input import MAX_BOOST
from .._models import Anchor
from .app import Number, command, emit, open_store

FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _emit(ctx: click.Context, anchors: Sequence[Anchor], empty: str) -> None:
    def human() -> None:
        for a in anchors:
            click.echo(f"{a.id:>6}  {a.boost:+g}  {a.tool}  {a.pattern}")

    emit(ctx, [a.as_dict() for a in anchors], human, key="anchors", empty=empty)


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
    with open_store(ctx, create=False) as store:
        written = store.add_anchors([Anchor(pattern=pattern, tool=tool_id, boost=boost)])
    _emit(ctx, written, "no anchors written")


@command("list")
@click.pass_context
def list_(ctx: click.Context) -> None:
    """The catalog's anchors, oldest first: id, boost, tool, pattern."""
    with open_store(ctx, create=False) as store:
        found = store.anchors()
    _emit(ctx, found, f"no anchors in catalog {store.catalog!r}")


@command("remove")
@click.argument("ids", nargs=-1, required=True, type=click.IntRange(1, 2**63 - 1))  # an anchor id is a bigint
@click.pass_context
def remove(ctx: click.Context, ids: tuple[int, ...]) -> None:
    """Remove anchors by id (as `anchors list` shows them); none is removed when one is unknown."""
    with open_store(ctx, create=False) as store:
        n = store.remove_anchors(ids)
    emit(ctx, {"removed": n}, lambda: click.echo(f"removed {n} anchor{'s' * (n != 1)}"))


@command("import")
@click.argument("file", type=FILE)
@click.option("--replace", is_flag=True, help="The file's anchors replace all of the catalog's.")
@click.pass_context
def import_(ctx: click.Context, file: Path, replace: bool) -> None:
    """Anchors from a JSON FILE: a list of {"pattern", "tool", "boost"} objects (or `anchors list --json` output).
    All or nothing: one bad rule and nothing is written."""
    with open_store(ctx, create=False) as store:
        written = store.add_anchors(file, replace=replace)
    _emit(ctx, written, "no anchors written")


for _command in (add, list_, remove, import_):
    anchors_group.add_command(_command)
COMMANDS = (anchors_group,)
