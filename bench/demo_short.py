"""Short requests on the demo catalog: ``python bench/demo_short.py [--no-examples] [--explain] [--weights ...]``.

Routes each request of ``bench/demo_short/queries.jsonl`` (61 requests of 2 to 6 words, the way people type them,
written with their correct tools before toolstore was run on them: see ``bench/demo_short/SOURCE.md``) over the
bundled demo catalog in a scratch catalog of the embedded server (``$TOOLSTORE_HOME``) and prints hit@1, hit@3 and
hit@8 (the request's tool among the first k routed, always-on tools left out; lenient: any acceptable tool), then
each request whose tool is not first. ``--no-examples`` loads the tools without the demo's intent examples
(``toolstore/demo/examples.jsonl``); ``--explain`` prints each miss's signal ranks of the first tools and of the
right one. Tuning nothing on this set is the point of it: it is a check, never a train split.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from toolstore import ToolStore
from toolstore._examples import load_examples
from toolstore._formats import load_tools_file
from toolstore._fusion import SIGNALS

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "bench" / "demo_short" / "queries.jsonl"
DEMO = ROOT / "toolstore" / "demo"
K = (1, 3, 8)


def ranks(result: Any, tool_id: str) -> str:
    """``#2 name=1 desc=3 ...``: the tool's place among the routed tools (always-on ones left out) and its signals."""
    for i, r in enumerate((r for r in result.tools if not r.always_on), 1):
        if r.tool.id == tool_id:
            return f"#{i} " + " ".join(f"{s[:4]}={getattr(r.signals, s) or '-'}" for s in SIGNALS[:5])
    return "not routed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-examples", action="store_true", help="load the tools without the intent examples")
    parser.add_argument("--explain", action="store_true", help="signal ranks of each miss")
    parser.add_argument("--queries", type=Path, default=QUERIES)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.queries.read_text(encoding="utf-8").splitlines() if line.strip()]
    catalog = "bench_demo_short" + ("_noex" if args.no_examples else "")
    with ToolStore(catalog=catalog) as store:
        examples = [] if args.no_examples else load_examples(DEMO / "examples.jsonl")
        store.upsert(load_tools_file(DEMO / "tools.jsonl"), prune=True, examples=examples)
        hits = {k: 0 for k in K}
        lenient = {k: 0 for k in K}
        misses = []
        for row in rows:
            result = store.route(row["query"], k=max(K), token_budget=None)
            routed = [r.tool.id for r in result.tools if not r.always_on]
            for k in K:
                hits[k] += any(t in routed[:k] for t in row["relevant"])
                lenient[k] += any(t in routed[:k] for t in row["acceptable"] or row["relevant"])
            if routed[:1] != row["relevant"][:1]:
                misses.append((row, routed, result))
        store.drop_catalog()
    n = len(rows)
    examples_note = "without" if args.no_examples else "with"
    print(f"{n} requests, demo catalog {examples_note} its intent examples")
    print("  " + "  ".join(f"hit@{k} {hits[k] / n:.3f}" for k in K))
    print("  lenient " + "  ".join(f"hit@{k} {lenient[k] / n:.3f}" for k in K))
    for row, routed, result in misses:
        want = row["relevant"][0]
        print(f"- {row['query']!r}: want {want} ({ranks(result, want)}), got {', '.join(routed[:3])}")
        if args.explain:
            for r in [r for r in result.tools if not r.always_on][:3]:
                print(f"    {r.tool.id:<34} {ranks(result, r.tool.id)}")


if __name__ == "__main__":
    main()
