"""Workflow coverage: nDCG@10 and multi comp@10 for each ``split`` weight, on a shared set's train split (what the
default and ``tune`` may look at) and its queries (reported, never chosen on), with the fusion weights tuned on train.
Then the other lever issue 11 names, coverage-aware interleaving: each sub-request's best ``m`` tools (by its own
fused score) reserved a place in the top 10, the fused order otherwise kept (``--reserve``, m = 0 is route()).

    python bench/coverage.py seal_tools metatool [--splits 0,0.5,0.75,1,1.5,2] [--reserve 0,1,2,3,4,5]

Each set is loaded into a scratch catalog of the embedded database (under $TOOLSTORE_HOME), its train.jsonl stored
as intent examples; every request's retriever lists (and its sub-requests') are fetched once (``_candidates``,
train requests never matching their own example), then fused client-side exactly as route() fuses.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from toolstore import ToolStore
from toolstore._candidates import CandidateTable
from toolstore._examples import load_examples
from toolstore._formats import load_tools_file
from toolstore._fusion import SIGNALS
from toolstore._lists import fetch_lists, load_tool_index
from toolstore._metrics import aggregate, load_judgements, score_query
from toolstore._split import split_request
from toolstore._tune import tune

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("TOOLSTORE_BENCH", ROOT.parent / "shared" / "bench"))


def scores(tops: list[list[str]], pairs: list) -> tuple[float, ...]:
    summary = aggregate(score_query(top, j) for top, (_, j) in zip(tops, pairs))
    return summary["nDCG@10"], summary["multi comp@10"]


def reserved(
    table: CandidateTable, weights: list[float], k_rrf: float, split: float, m: int, k: int = 10
) -> list[list[str]]:
    """Each row's top ``k`` with every sub-request's best ``m`` tools in it: those missing from the fused top ``k``
    take the places of its last tools that no sub-request reserved (fused order kept, the reserved ones appended)."""
    tops = table.top_ids(weights, k_rrf, k=k, split=split)
    part_scores = list(table.part_scores(weights, k_rrf))
    for i, top in enumerate(tops):
        must: list[str] = []
        for score in (part[i] for part in part_scores):
            best = np.lexsort((table.position[i], -np.round(score * 1e9)))[:m]
            must += [table.candidates[i][c] for c in best if score[c] > 0]
        missing = [t for t in dict.fromkeys(must) if t not in top]
        if missing:
            droppable = [t for t in reversed(top) if t not in must][: len(missing)]
            tops[i] = [t for t in top if t not in droppable] + missing[: len(droppable)]
    return tops


def run(name: str, splits: list[float], reserves: list[int]) -> None:
    store = ToolStore(catalog=f"bench_coverage_{name}")
    try:
        store.upsert(load_tools_file(BENCH / name / "tools.jsonl"))
        store.add_examples(load_examples(BENCH / name / "train.jsonl"))
        store.analyze()
        train = load_judgements(BENCH / name / "train.jsonl")
        test = load_judgements(BENCH / name / "queries.jsonl")
        started = time.perf_counter()
        fusion = tune(store, train, save=False).tuned
        weights = [fusion.weights[s] for s in SIGNALS]
        depth = fusion.depth(10)
        tools = load_tool_index(store)
        tables = {}
        for part, pairs, loo in (("train", train, True), ("queries", test, False)):
            lists = fetch_lists(store, [q for q, _ in pairs], depth=depth, leave_one_out=loo, tools=tools)
            tables[part] = (CandidateTable(lists, tools, [j for _, j in pairs], depth), pairs)
        split_share = np.mean([bool(split_request(q)) for q, _ in test])
        print(
            f"\n{name}: tuned on train in {time.perf_counter() - started:.0f} s (tune's own split {fusion.split:g}); "
            f"{split_share:.0%} of queries split; weights "
            + ", ".join(f"{s}={fusion.weights[s]:g}" for s in SIGNALS)
            + f", k_rrf={fusion.k_rrf:g}"
        )
        print(f"{'split':>6}  {'train nDCG':>10} {'train comp':>10}  {'query nDCG':>10} {'query comp':>10}")
        for split in splits:
            row = [scores(table.top_ids(weights, fusion.k_rrf, split=split), pairs) for table, pairs in tables.values()]
            print(f"{split:6g}  {row[0][0]:10.3f} {row[0][1]:10.3f}  {row[1][0]:10.3f} {row[1][1]:10.3f}", flush=True)
        print(f"\nsplit {fusion.split:g}, each sub-request's best m tools reserved a place in the top 10:")
        print(f"{'m':>6}  {'train nDCG':>10} {'train comp':>10}  {'query nDCG':>10} {'query comp':>10}")
        for m in reserves:
            row = [scores(reserved(t, weights, fusion.k_rrf, fusion.split, m), pairs) for t, pairs in tables.values()]
            print(f"{m:6d}  {row[0][0]:10.3f} {row[0][1]:10.3f}  {row[1][0]:10.3f} {row[1][1]:10.3f}", flush=True)
    finally:
        store.drop_catalog()
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--splits", default="0,0.5,0.75,1,1.5,2")
    parser.add_argument("--reserve", default="0,1,2,3,4,5", help="places reserved per sub-request (0: none)")
    args = parser.parse_args()
    for name in args.sets:
        if not (BENCH / name / "train.jsonl").exists():
            sys.exit(f"no {BENCH / name}/train.jsonl (set TOOLSTORE_BENCH)")
        run(name, [float(s) for s in args.splits.split(",")], [int(m) for m in args.reserve.split(",")])


if __name__ == "__main__":
    main()
