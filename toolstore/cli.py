"""The ``toolstore`` command: a thin layer over the library. JSON on stdout unless it is a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
import psycopg

from ._errors import InvalidInputError, ToolstoreError
from ._examples import load_examples
from ._formats import load_tools_file, render
from ._models import SIGNALS, RouteResult
from ._store import DEFAULT, ToolStore

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ("json", "table", "openai", "openai-responses", "anthropic", "mcp")


def main() -> None:
    """Entry point: library errors become one line on stderr and exit status 1, never a traceback."""
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
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        click.echo(f"database error: {first}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        sys.exit(1)


def _embedder(spec: str) -> Any:
    from ._embedders.factory import make_embedder

    return make_embedder(spec)


@contextmanager
def open_store(ctx: click.Context, *, create: bool = True) -> Iterator[ToolStore]:
    opts = ctx.obj
    store = ToolStore(opts["dsn"], catalog=opts["catalog"], embedder=_embedder(opts["embedder"]), create=create)
    try:
        yield store
    finally:
        store.close()


def emit(ctx: click.Context, data: Any, human: Callable[[], None] | None = None) -> None:
    """JSON when asked or when stdout is not a terminal; else the human rendering."""
    if ctx.obj["json"] or human is None or not sys.stdout.isatty():
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        human()


@click.group()
@click.option("--dsn", envvar="TOOLSTORE_DSN", help="Postgres DSN; default: $TOOLSTORE_DSN, else the embedded server.")
@click.option("--catalog", "-c", envvar="TOOLSTORE_CATALOG", default=DEFAULT, show_default=True)
@click.option(
    "--embedder",
    envvar="TOOLSTORE_EMBEDDER",
    default="local",
    show_default=True,
    help="local (shipped MiniLM), hashing[-DIM] (test double), openai/MODEL[@DIMS], or none (lexical only).",
)
@click.option("--json", "as_json", is_flag=True, help="Always print JSON.")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, catalog: str, embedder: str, as_json: bool) -> None:
    """toolstore: Postgres as the tool router for AI agents."""
    ctx.obj = {"dsn": dsn, "catalog": catalog, "embedder": embedder, "json": as_json}


@cli.command()
@click.option("--schema", default="toolstore", show_default=True)
@click.option("--revision", default="head", show_default=True)
@click.option("--downgrade", is_flag=True, help="Downgrade to --revision instead of upgrading.")
@click.pass_context
def migrate(ctx: click.Context, schema: str, revision: str, downgrade: bool) -> None:
    """Create or upgrade toolstore's schema (its own alembic version table)."""
    from ._migrate import migrate as run

    run(ctx.obj["dsn"], schema=schema, revision=revision, downgrade=downgrade)
    emit(
        ctx,
        {"migrated": revision, "schema": schema, "downgrade": downgrade},
        lambda: click.echo(f"{schema}: at {revision}"),
    )


@cli.command()
@click.pass_context
def catalogs(ctx: click.Context) -> None:
    """List catalogs with their model and counts."""
    with open_store(ctx, create=False) as store:
        rows = store.catalogs()

    def human() -> None:
        for r in rows:
            click.echo(
                f"{r['name']:<24} {r['n_tools']:>6} tools {r['n_examples']:>6} examples  {r['embed_model'] or '-'}"
            )

    emit(ctx, rows, human)


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--provider", help="Provider (namespace) for tools that do not name one.")
@click.option("--prune", is_flag=True, help="Remove tools of the catalog that are not in FILE.")
@click.pass_context
def import_(ctx: click.Context, file: Path, provider: str | None, prune: bool) -> None:
    """Import tools from JSON/JSONL (benchmark rows, OpenAI, Anthropic, MCP, OpenAPI): all or nothing."""
    tools = load_tools_file(file, provider=provider)
    with open_store(ctx) as store:
        report = store.upsert(tools, prune=prune)
    data = {"catalog": ctx.obj["catalog"], "file": str(file), **report.as_dict()}
    emit(ctx, data, lambda: click.echo(", ".join(f"{k}: {v}" for k, v in data.items())))


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def examples(ctx: click.Context, file: Path) -> None:
    """Add intent examples from JSONL ({"query", "relevant": [tool ids]} per line): all or nothing."""
    found = load_examples(file)
    with open_store(ctx, create=False) as store:
        written = store.add_examples(found)
    data = {"catalog": ctx.obj["catalog"], "file": str(file), "examples": written}
    emit(ctx, data, lambda: click.echo(f"{written} intent examples in {ctx.obj['catalog']}"))


def _parse_weights(spec: str | None) -> dict[str, float] | None:
    if not spec:
        return None
    weights: dict[str, float] = {}
    for part in spec.split(","):
        name, sep, value = part.partition("=")
        if not sep:
            raise InvalidInputError(f"--weights wants name=value pairs separated by commas, got {part!r}")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise InvalidInputError(f"--weights: {value!r} is not a number (for {name.strip()!r})") from None
    return weights


def result_json(result: RouteResult) -> dict[str, Any]:
    def item(r: Any) -> dict[str, Any]:
        return {
            "id": r.tool.id,
            "name": r.tool.name,
            "provider": r.tool.provider,
            "score": round(r.score, 6),
            "always_on": r.always_on,
            "exact": r.exact,
            "tokens": r.tokens,
            "signals": {s: getattr(r.signals, s) for s in SIGNALS},
        }

    return {
        "query": result.query,
        "tools": [item(r) for r in result.tools],
        "skipped": [item(r) for r in result.skipped],
        "tokens_used": result.tokens_used,
        "token_budget": result.token_budget,
        "dense_used": result.dense_used,
        "degraded_reason": result.degraded_reason,
    }


def print_table(result: RouteResult, *, explain: bool) -> None:
    if result.degraded_reason:
        click.echo(f"note: {result.degraded_reason}")
    head = f"{'#':>2}  {'tool':<40} {'score':>7}"
    if explain:
        head += "  " + " ".join(f"{s[:5]:>5}" for s in SIGNALS)
    click.echo(head)
    for i, r in enumerate(result.tools, 1):
        line = f"{'*' if r.always_on else i:>2}  {r.tool.id[:40]:<40} {r.score:7.4f}"
        if explain:
            line += "  " + " ".join(f"{getattr(r.signals, s) or '-':>5}" for s in SIGNALS)
        click.echo(line)
    for r in result.skipped:
        click.echo(f"    skipped (does not fit the budget): {r.tool.id} ({r.tokens} tokens)")
    click.echo(
        f"tokens: {result.tokens_used}" + (f" of {result.token_budget}" if result.token_budget is not None else "")
    )


@cli.command("route")
@click.argument("request")
@click.option("--k", "k", default=8, show_default=True, type=int, help="Routed tools (always-on tools come on top).")
@click.option("--budget", type=int, help="Token budget for the packed tool definitions.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="Output: json (default off a terminal), table, or tool definitions.",
)
@click.option("--explain", is_flag=True, help="Show each signal's rank per tool in the table.")
@click.option("--weights", help="Per-signal weights, e.g. name=1,description=1,expansion=1,dense=1,intent=1")
@click.option("--category", "categories", multiple=True, help="Only tools in this category (repeatable).")
@click.option("--allow", multiple=True, help="Only these tool ids (repeatable).")
@click.option("--block", multiple=True, help="Never these tool ids (repeatable).")
@click.pass_context
def route_cmd(
    ctx: click.Context,
    request: str,
    k: int,
    budget: int | None,
    fmt: str | None,
    explain: bool,
    weights: str | None,
    categories: tuple[str, ...],
    allow: tuple[str, ...],
    block: tuple[str, ...],
) -> None:
    """Route REQUEST: the tools that matter, best first."""
    with open_store(ctx, create=False) as store:
        result = store.route(
            request,
            k=k,
            token_budget=budget,
            weights=_parse_weights(weights),
            categories=list(categories) or None,
            allow=list(allow) or None,
            block=list(block) or None,
        )
    if fmt in ("openai", "openai-responses", "anthropic", "mcp"):
        click.echo(json.dumps({"tools": render([r.tool for r in result.tools], fmt)}, indent=2, ensure_ascii=False))
    elif fmt == "table" or (fmt is None and not ctx.obj["json"] and sys.stdout.isatty()):
        print_table(result, explain=explain)
    else:
        click.echo(json.dumps(result_json(result), indent=2, ensure_ascii=False))


@cli.command("list")
@click.pass_context
def list_cmd(ctx: click.Context) -> None:
    """List the catalog's tools."""
    with open_store(ctx, create=False) as store:
        tools = store.tools()
    rows = [{"id": t.id, "name": t.name, "provider": t.provider, "always_on": t.always_on} for t in tools]

    def human() -> None:
        for r in rows:
            click.echo(f"{r['id']:<48} {r['provider'] or ''}")

    emit(ctx, rows, human)


@cli.command()
@click.argument("tool_id")
@click.pass_context
def remove(ctx: click.Context, tool_id: str) -> None:
    """Remove one tool from the catalog."""
    with open_store(ctx, create=False) as store:
        store.remove(tool_id)
    emit(ctx, {"removed": tool_id}, lambda: click.echo(f"removed {tool_id}"))


@cli.command()
@click.option("--model", "spec", required=True, help="Target embedder: local, hashing[-DIM], openai/MODEL[@DIMS].")
@click.option("--base-url", help="OpenAI-compatible server (Azure OpenAI, vLLM, Ollama).")
@click.pass_context
def reembed(ctx: click.Context, spec: str, base_url: str | None) -> None:
    """Switch the catalog to another embedding model; tools and examples are kept."""
    from ._embedders.factory import make_embedder

    embedder = make_embedder(spec, base_url=base_url)
    if embedder is None:
        raise InvalidInputError("reembed needs a model, not 'none'")
    with open_store(ctx, create=False) as store:
        report = store.reembed(embedder)
    emit(ctx, report, lambda: click.echo(", ".join(f"{k}: {v}" for k, v in report.items())))


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Load the bundled demo catalog (115 tools, 18 providers) and route a few real requests."""
    from ._demo import run_demo

    if ctx.obj["catalog"] == DEFAULT:
        ctx.obj["catalog"] = "demo"
    with open_store(ctx) as store:
        run_demo(store, as_json=ctx.obj["json"] or not sys.stdout.isatty())


# Commands defined in their own modules (they import helpers from this one).
from ._cli_eval import eval_cmd, tune_cmd  # noqa: E402
from ._cli_ingest import expand_cmd, export_cmd, sync_group  # noqa: E402

for _command in (sync_group, expand_cmd, export_cmd, eval_cmd, tune_cmd):
    cli.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
