"""Catalog housekeeping: migrate, catalogs, drop-catalog, import, examples, list, remove, export, reembed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import _formats
from .._dsn import resolve_dsn
from .._embedders.factory import MODEL_SPECS, check_spec, make_embedder
from .._errors import InvalidInputError
from .._examples import load_examples
from .._input import check_catalog_name, check_tool_id
from .._migrate import migrate as run_migrations
from .app import (
    ask,
    command,
    counted,
    emit,
    note,
    open_store,
    options,
    plural,
    progress,
    reading,
    summary,
    wants_json,
)
from .files import write_file
from .params import Readable, ReadFile, Written, checked, http_url, not_empty, shown


@command()
@click.option(
    "--revision",
    default="head",
    show_default=True,
    callback=not_empty,
    help="Revision to reach: head, head-N, a revision such as 0017, or base (with --downgrade).",
)
@click.option("--downgrade", is_flag=True, help="Downgrade to --revision (give one: e.g. 0017 or base).")
@click.pass_context
def migrate(ctx: click.Context, revision: str, downgrade: bool) -> None:
    """Create or upgrade toolstore's schema (--schema; its own alembic version table)."""
    schema = options(ctx)["schema"]
    reached = run_migrations(options(ctx)["dsn"], schema=schema, revision=revision, downgrade=downgrade)
    data = {"migrated": revision, "revision": reached, "schema": schema, "downgrade": downgrade}
    emit(ctx, data, lambda: click.echo(f"{schema}: at {reached or 'base'}"))


@command()
@click.pass_context
def catalogs(ctx: click.Context) -> None:
    """List catalogs with their model and counts."""
    with open_store(ctx, create=False) as store:
        rows = store.catalogs()

    def human() -> None:
        for r in rows:
            model = r["embed_model"] or "-"
            tools, examples = r["n_tools"], r["n_examples"]
            counts = f"{tools:>6} {plural(tools, 'tool'):<5} {examples:>6} {plural(examples, 'example'):<8}"
            click.echo(f"{r['name']:<24} {counts}  {model}")

    emit(ctx, rows, human, key="catalogs", empty=f"no catalogs in schema {options(ctx)['schema']!r}")


@command("drop-catalog")
@click.argument("name", callback=checked(check_catalog_name))
@click.option("--yes", "-y", is_flag=True, help="Drop without asking (needed when not on a terminal, or with --json).")
@click.pass_context
def drop_catalog(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete catalog NAME with its tools, intent examples, anchors and session log. NAME is always given: never
    -c/--catalog or $TOOLSTORE_CATALOG, which a shell may hold for another purpose. Asks first on a terminal;
    elsewhere (piped, --json) it needs --yes."""
    asks = not yes and sys.stdin.isatty() and not wants_json(ctx)
    if not yes and not asks:
        raise click.UsageError(f"dropping catalog {name!r} needs --yes when not asked on a terminal", ctx)
    with open_store(ctx, create=False, catalog=name) as store:
        if asks:
            info = store.info()
            held = f"{counted(info.n_tools, 'tool')}, {counted(info.n_examples, 'intent example')}"
            ask(f"drop catalog {name!r} ({held})?")
        dropped = store.drop_catalog()  # its counts read under the drop's lock: what a writer since did included
    held = f"{counted(dropped.n_tools, 'tool')}, {counted(dropped.n_examples, 'intent example')}"
    data = {"dropped": name, "tools": dropped.n_tools, "examples": dropped.n_examples}
    emit(ctx, data, lambda: click.echo(f"dropped {name} ({held})"))


@command("import")
@click.argument("file", type=ReadFile("tools"))
@click.option("--provider", callback=not_empty, help="Provider (namespace) for tools that do not name one.")
@click.option("--prune", is_flag=True, help="Remove tools of the catalog that are not in FILE.")
@click.pass_context
def import_(ctx: click.Context, file: Readable, provider: str | None, prune: bool) -> None:
    """Import tools from JSON/JSONL (benchmark rows, OpenAI, Anthropic, MCP, OpenAPI; OpenAPI also as YAML): all
    or nothing. A FILE named without a suffix (a pipe: `toolstore import <(curl -s URL)`) is read by its text, and so
    is stdin, FILE -: `curl -s URL | toolstore import -`."""
    tools = _formats.load_tools_file(file, provider=provider)
    with open_store(ctx) as store, progress(ctx, "embedding tools"), reading(file):
        report = store.upsert(tools, prune=prune)
    data = {"catalog": store.catalog, "file": shown(file), **report.as_dict()}
    emit(ctx, data, summary(data))


@command()
@click.argument("file", type=ReadFile("intent examples"))
@click.pass_context
def examples(ctx: click.Context, file: Readable) -> None:
    """Add intent examples from JSONL ({"qid", "query", "relevant": [tool ids]} per line, train.jsonl's format; each
    qid a non-empty string): all or nothing. FILE - is stdin: `jq -c ... | toolstore examples -`."""
    found = load_examples(file)
    with open_store(ctx, create=False) as store, progress(ctx, "embedding examples"), reading(file):
        written = store.add_examples(found)
    data = {"catalog": store.catalog, "file": shown(file), "examples": written}
    emit(ctx, data, lambda: click.echo(f"{counted(written, 'intent example')} in {store.catalog}"))


@command("list")
@click.option("--long", "-l", "long_", is_flag=True, help="Show each tool's description (and title, endpoint).")
@click.pass_context
def list_(ctx: click.Context, long_: bool) -> None:
    """List the catalog's tools."""
    with open_store(ctx, create=False) as store:
        tools = store.tools()
    rows = []
    for t in tools:
        row: dict[str, object] = {"id": t.id, "name": t.name, "provider": t.provider, "always_on": t.always_on}
        if long_:
            row.update(title=t.title, description=t.description, http=_formats.http_endpoint(t))
        rows.append(row)

    def human() -> None:
        for r in rows:
            click.echo(f"{r['id']:<48} {r['provider'] or ''}".rstrip())
            if long_:
                http = r["http"]
                endpoint = f"{http['method']} {http['path']}  " if isinstance(http, dict) else ""
                text = " ".join(str(r["description"] or r["title"] or "").split())
                click.echo(f"    {endpoint}{text[:200]}")

    emit(ctx, rows, human, key="tools", empty=f"no tools in catalog {store.catalog!r}")


@command()
@click.argument("tool_id", callback=checked(check_tool_id))
@click.pass_context
def remove(ctx: click.Context, tool_id: str) -> None:
    """Remove one tool from the catalog."""
    with open_store(ctx, create=False) as store:
        store.remove(tool_id)
    emit(ctx, {"removed": tool_id}, lambda: click.echo(f"removed {tool_id}"))


@command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_formats.FORMATS),
    default="openai",
    show_default=True,
    help="The SDK format of the tool definitions.",
)
@click.option("--with-metadata", is_flag=True, help="Add an x-toolstore block so every field survives re-import.")
@click.option("-o", "--output", type=Written(dir_okay=False), help="File to write (else stdout).")
@click.pass_context
def export(ctx: click.Context, fmt: _formats.Format, with_metadata: bool, output: Path | None) -> None:
    """Write the whole catalog as {"tools": [...]} in an SDK's format; `toolstore import` reads it back. With -o, JSON
    output (--json, or stdout not a terminal) is a summary: {"path", "format", "tools": how many}."""
    with open_store(ctx, create=False) as store:
        tools = store.tools()
    document = _formats.export_catalog(tools, fmt, with_metadata=with_metadata)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    write_file(output, text)
    data = {"path": str(output), "format": fmt, "tools": len(tools)}
    emit(ctx, data, lambda: note(ctx, f"{counted(len(tools), 'tool')} written to {output}"))


def _target_model(spec: str) -> str:
    """A reembed --model: an embedder spec (:func:`check_spec`), but not ``none``; an unknown one is told the specs
    reembed takes."""
    if check_spec(spec, MODEL_SPECS) == "none":
        raise InvalidInputError(f"reembed needs a model, not 'none'; expected {MODEL_SPECS}")
    return spec


@command()
@click.option(
    "--model",
    "spec",
    required=True,
    callback=checked(_target_model),
    help=f"Target embedder, as --embedder but none: {MODEL_SPECS}.",
)
@click.option(
    "--base-url", callback=http_url, help="OpenAI-compatible server (http:// or https://: Azure OpenAI, vLLM, Ollama)."
)
@click.pass_context
def reembed(ctx: click.Context, spec: str, base_url: str | None) -> None:
    """Switch the catalog to another embedding model; tools and examples are kept."""
    embedder = make_embedder(spec, base_url=base_url)
    assert embedder is not None  # not 'none': _target_model
    with open_store(ctx, create=False) as store, progress(ctx, "re-embedding"):
        report = store.reembed(embedder)
    emit(ctx, report, summary(report))


@command("dsn")
@click.pass_context
def dsn(ctx: click.Context) -> None:
    """Print the DSN in use (for the embedded server, one psql accepts while it runs). Piped, the output is JSON, as
    every command's: psql "$(toolstore dsn | jq -r .dsn)"."""
    given = options(ctx)["dsn"]
    source = "option or $TOOLSTORE_DSN" if given else "embedded"
    value = resolve_dsn(given)
    emit(ctx, {"dsn": value, "source": source}, lambda: click.echo(value))


COMMANDS = (migrate, catalogs, drop_catalog, import_, examples, list_, remove, export, reembed, dsn)
