"""The bundled demo: a 115-tool catalog across 18 providers, its intent examples, and real requests."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._examples import load_examples
from ._formats import load_tools_file
from ._models import SIGNALS
from ._store import ToolStore

DEMO_DIR = Path(__file__).resolve().parent / "demo"


def demo_requests() -> list[str]:
    lines = (DEMO_DIR / "requests.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


def load_demo(store: ToolStore) -> dict[str, int]:
    """Import the demo tools and intent examples (unchanged tools are skipped, cached vectors reused)."""
    report = store.upsert(load_tools_file(DEMO_DIR / "tools.jsonl"), prune=True)
    examples = 0
    if store.embedder is not None:
        examples = store.add_examples(load_examples(DEMO_DIR / "examples.jsonl"))
    return {**report.as_dict(), "examples": examples}


def run_demo(store: ToolStore, *, as_json: bool, k: int = 5, token_budget: int = 1500) -> None:
    """Load the demo catalog and route each demo request, printing picked tools and their signal ranks."""
    loaded = load_demo(store)
    results = [store.route(q, k=k, token_budget=token_budget) for q in demo_requests()]
    if as_json:
        from .cli import result_json

        click.echo(
            json.dumps(
                {"catalog": store.catalog, "loaded": loaded, "routes": [result_json(r) for r in results]}, indent=2
            )
        )
        return
    model = store.embedder.model if store.embedder is not None else "none (lexical only)"
    click.echo(f"catalog {store.catalog!r}: {loaded}; embedder: {model}")
    for result in results:
        click.echo(f"\n> {result.query}")
        if result.degraded_reason:
            click.echo(f"  note: {result.degraded_reason}")
        click.echo("  " + f"{'tool':<36} {'score':>7}  " + " ".join(f"{s[:6]:>6}" for s in SIGNALS))
        for r in result.tools:
            ranks = " ".join(f"{getattr(r.signals, s) or '-':>6}" for s in SIGNALS)
            mark = " (always on)" if r.always_on else ""
            click.echo(f"  {r.tool.id:<36} {r.score:7.4f}  {ranks}{mark}")
        click.echo(f"  {result.tokens_used} of {result.token_budget} tokens")
