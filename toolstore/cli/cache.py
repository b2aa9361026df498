"""``toolstore cache``: the embedding cache, shared by every catalog of the schema."""

from __future__ import annotations

import click

from .app import command, counted, emit, open_store


@click.group("cache")
def cache_group() -> None:
    """The embedding cache: tool and example vectors by model and text (its sha256), shared by every catalog."""


@command("prune")
@click.pass_context
def prune(ctx: click.Context) -> None:
    """Delete the cached vectors no catalog's model reads: of models no catalog records (a dropped catalog's, the one a
    reembed left), a model directory's cached before their key named its max_tokens, and the shipped local model's of
    another build (or under its name alone, cached before their key named it); none written in the last hour (a
    catalog's first import caches them before recording their model). The tables' owner only."""
    with open_store(ctx, create=False) as store:
        deleted = store.prune_cache()
    emit(ctx, {"pruned": deleted}, lambda: click.echo(f"{counted(deleted, 'cached vector')} deleted"))


cache_group.add_command(prune)
COMMANDS = (cache_group,)
