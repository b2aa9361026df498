"""Precomputed imports side by side: toolstore from two checkouts, alternated, each into a fresh database.

    python bench/import_ab.py --before /tmp/old-checkout --rounds 4

Each round imports the synthetic catalog's 10k tools (vectors precomputed) and then its 30k intent examples, once
with the toolstore package of ``--before`` and once with ``--after`` (default: this checkout), in a child process
each (so each imports its own package and migrates its database with its own migrations); the order within a
round alternates. Prints each round and the medians: machines here are shared, so only side-by-side figures
compare.

``--combined``: the first half of the tools with their examples go in first (untimed: the catalog gets its HNSW
indexes), then ``upsert(tools, examples=examples)`` of all of them, timed, brings the other half and their examples in
one transaction (the "tools" column; "examples" is 0).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import os, sys
sys.path[:0] = [os.environ["AB_TOOLSTORE"], os.environ["AB_BENCH"]]
import toolstore, _synth
assert toolstore.__file__.startswith(os.environ["AB_TOOLSTORE"]), toolstore.__file__
from _harness import OUT, Precomputed, admin_dsn, fresh_database, timed
from toolstore import LocalEmbedder, ToolStore
from toolstore._text import dense_text
model, n = LocalEmbedder(), int(os.environ["AB_TOOLS"])
cat = _synth.catalog(n)
tv, ev = _synth.load_vectors(n, model, OUT)
table = {dense_text(t): v for t, v in zip(cat.tools, tv)} | {e.query: v for e, v in zip(cat.examples, ev)}
with ToolStore(fresh_database(admin_dsn(), "bench_import_ab"), embedder=Precomputed(table, model.model, model.dim),
               catalog="bench") as store:
    if os.environ.get("AB_COMBINED"):
        half = n // 2
        store.upsert(cat.tools[:half], examples=cat.examples[: half * _synth.EXAMPLES_PER_TOOL])
        tools, _ = timed(lambda: store.upsert(cat.tools, examples=cat.examples))
        examples = 0.0
    else:
        tools, _ = timed(lambda: store.upsert(cat.tools))
        examples, _ = timed(lambda: store.add_examples(cat.examples))
print(tools, examples)
"""


def run(checkout: Path, tools: int, combined: bool = False) -> tuple[float, float]:
    env = {**os.environ, "AB_TOOLSTORE": str(checkout), "AB_BENCH": str(HERE), "AB_TOOLS": str(tools)}
    env["AB_COMBINED"] = "1" if combined else ""
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, check=True, capture_output=True, text=True)
    a, b = out.stdout.split()[-2:]
    return float(a), float(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of toolstore (its top directory)")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="another one (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--combined", action="store_true", help="time upsert(tools, examples=...) into a half catalog")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for i in range(args.rounds):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for name in order:
            times[name].append(run(sides[name], args.tools, args.combined))
            tools, examples = times[name][-1]
            print(f"round {i + 1} {name:6s} tools {tools:6.2f} s  examples {examples:6.2f} s", flush=True)
    for name, values in times.items():
        tools, examples = (statistics.median(v) for v in zip(*values))
        print(f"median  {name:6s} tools {tools:6.2f} s  examples {examples:6.2f} s  ({sides[name]})")
    ratios = [a[0] / b[0] for a, b in zip(times["after"], times["before"])]
    print("tools, after / before, each round: " + " ".join(f"{r:.2f}" for r in ratios), end="")
    print(f"; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
