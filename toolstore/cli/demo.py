"""``toolstore demo``: load the bundled demo catalog (115 tools across 18 providers, their intent examples) and
route its requests, printing the picked tools with each signal's rank."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .._examples import load_examples
from .._formats import load_tools_file
from .._input import MAX_K, MAX_TOKEN_BUDGET
from .._models import JSON_VERSION
from .._result import RouteResult
from .._store import DEFAULT, ToolStore
from .app import command, note, open_store, options, progress, wants_json
from .route import result_json, signal_headings, signal_ranks

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo"


def demo_requests() -> list[str]:
    lines = (DEMO_DIR / "requests.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


#: The one catalog the demo loads into: it is pruned to the demo's tools, so never the user's own catalog.
DEMO_CATALOG = "demo"


def load_demo(store: ToolStore) -> dict[str, int]:
    """Import the demo tools and intent examples into ``store``'s catalog, removing every other tool there (unchanged
    tools are skipped, cached vectors reused): give it a store on :data:`DEMO_CATALOG` only. One transaction, so an
    embedder that fails on the examples leaves the catalog as it was, not with the tools alone."""
    examples = load_examples(DEMO_DIR / "examples.jsonl") if store.embedder is not None else []
    return store.upsert(load_tools_file(DEMO_DIR / "tools.jsonl"), prune=True, examples=examples).as_dict()


def print_route(result: RouteResult) -> None:
    click.echo(f"\n> {result.query}")
    if result.degraded_reason:
        click.echo(f"  note: {result.degraded_reason}")
    click.echo("  " + f"{'tool':<36} {'score':>7}  " + signal_headings())
    for r in result.tools:
        mark = " (always on)" if r.always_on else ""
        click.echo(f"  {r.tool.id:<36} {r.score:7.4f}  {signal_ranks(r.signals)}{mark}")
    click.echo(f"  {result.tokens_used} of {result.token_budget} tokens")


@command()
@click.option("-k", "--k", "k", default=5, show_default=True, type=click.IntRange(1, MAX_K), help="Tools per request.")
@click.option(
    "--budget", default=1500, show_default=True, type=click.IntRange(0, MAX_TOKEN_BUDGET), help="Token budget."
)
@click.pass_context
def demo(ctx: click.Context, k: int, budget: int) -> None:
    """Load the bundled demo catalog (115 tools, 18 providers) into the catalog 'demo' and route a few real
    requests. --catalog and $TOOLSTORE_CATALOG are not used, so the demo never touches your own catalog (it removes
    any other tool from 'demo')."""
    if options(ctx)["catalog"] not in (DEFAULT, DEMO_CATALOG):
        note(ctx, f"demo: loading into catalog {DEMO_CATALOG!r}, not {options(ctx)['catalog']!r}")
    with open_store(ctx, catalog=DEMO_CATALOG) as store:
        with progress(ctx, "embedding demo catalog"):
            loaded = load_demo(store)
        results = [store.route(q, k=k, token_budget=budget) for q in demo_requests()]
        model = store.embedder.model if store.embedder is not None else "none (lexical only)"
    if wants_json(ctx):
        data = {"version": JSON_VERSION, "catalog": store.catalog, "loaded": loaded}
        data["routes"] = [result_json(r) for r in results]
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"catalog {store.catalog!r}, embedder {model}")
    click.echo(
        "  loaded: " + ", ".join(f"{n} {what.replace('examples', 'intent examples')}" for what, n in loaded.items())
    )
    for result in results:
        print_route(result)


COMMANDS = (demo,)
