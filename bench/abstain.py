"""Abstention on the shared sets: fit the shipped default and measure both error rates through route().

    PYTHONPATH=. python bench/abstain.py [--sets metatool,seal_tools,gorilla_torch] [--examples]

Each set's tools go into a catalog of their own (``--examples``: with the set's train.jsonl as intent examples).

1. Fit (train splits only). In catalog X, positives are X's train requests and negatives the other sets' train
   requests, their evidence read as ``tune`` reads it (``_calibrate.evidence``, a request's own intent example never
   matched). The shipped models (``_abstain.DEFAULT_ABSTAIN`` and ``RANK_ABSTAIN``; with ``--examples``
   ``EXAMPLES_ABSTAIN``; printed for pasting) are fitted on every catalog; the
   default *measured* on set X is fitted leaving X out entirely (its catalog and its requests), so no set calibrates
   the default it is scored with.
2. Measure (queries.jsonl only). In catalog X, route(abstain=True) every request of X's queries.jsonl (abstaining
   is an error: false abstention) and of the other sets' queries.jsonl (not abstaining is an error: false
   acceptance). ``default``: the default fusion, the leave-X-out model; ``calibrated``: after ``store.tune(X's
   train, negatives=the other sets' train requests)`` (fusion and abstention for the catalog), routed again.

The other sets' requests are "unserved" by construction; a few may in fact fit a tool of X (seal_tools' 4,076 tools
cover many domains), so false acceptance is an upper bound of the real rate.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from toolstore import ToolStore, load_examples, load_judgements, load_tools_file
from toolstore._abstain import DEFAULT_ABSTAIN, EXAMPLES_ABSTAIN, FEATURES, RANK_ABSTAIN, AbstainModel, fit
from toolstore._calibrate import evidence
from toolstore._fusion import DEFAULT_FUSION

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(os.environ.get("TOOLSTORE_BENCH") or ROOT.parent / "shared" / "bench")

SETS = ("metatool", "seal_tools", "gorilla_torch")
RANK_ONLY = np.array([f not in ("dense_sim", "intent_sim") for f in FEATURES], dtype=np.float64)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def texts(name: str, split: str) -> list[str]:
    return [q for q, _ in load_judgements(BENCH / name / f"{split}.jsonl")]


def routed(store: ToolStore, requests: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """route(abstain=True) on each request: its features, whether it named a tool, whether it abstained."""
    rows, exact, abstained = [], [], []
    for text in requests:
        result = store.route(text, abstain=True)
        a = result.abstention
        assert a is not None
        rows.append([a.features[f] for f in FEATURES])
        exact.append(a.reason == "the request names a tool")
        abstained.append(result.abstained)
    return np.asarray(rows), np.asarray(exact), np.asarray(abstained)


def rates(model: AbstainModel, pos: tuple[np.ndarray, np.ndarray], neg: tuple[np.ndarray, np.ndarray]) -> str:
    """False abstention on served, false acceptance on unserved (a request naming a tool is never abstained on)."""
    p_abstain = np.array([model.probability(r) < model.threshold for r in pos[0]]) & ~pos[1]
    n_abstain = np.array([model.probability(r) < model.threshold for r in neg[0]]) & ~neg[1]
    return f"{p_abstain.mean():>8.3f} {1 - n_abstain.mean():>8.3f}"


def constants(m: AbstainModel) -> str:
    """A model's constants as the source spells them."""
    coef = ", ".join(f"{c:.4f}" for c in m.coef)
    return f"coef=({coef}), intercept={m.intercept:.4f}, threshold={m.threshold:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--examples", action="store_true", help="load each set's train.jsonl as intent examples")
    parser.add_argument("--no-calibrated", action="store_true", help="skip the per-catalog calibration pass")
    args = parser.parse_args()
    sets = args.sets.split(",")
    tag = "-examples" if args.examples else ""
    stores = {}
    for name in sets:
        store = ToolStore(catalog=f"abstain-{name}{tag}")
        log(f"{name}: loading tools")
        store.upsert(load_tools_file(BENCH / name / "tools.jsonl"))
        if args.examples and store.info().n_examples == 0:
            store.add_examples(load_examples(BENCH / name / "train.jsonl"))
        store.set_abstain(None, fusion=DEFAULT_FUSION)
        store.analyze()
        stores[name] = store

    train: dict[tuple[str, str], np.ndarray] = {}  # (catalog, requests' set) -> evidence rows
    for cat in sets:
        for src in sets:
            log(f"evidence: {src} train requests in catalog {cat}")
            rows, exact = evidence(stores[cat], texts(src, "train"), DEFAULT_FUSION)
            train[cat, src] = rows[~exact]

    def fitted(catalogs: list[str], rank: bool = False) -> AbstainModel:
        pos = np.vstack([train[c, c] for c in catalogs])
        neg = np.vstack([train[c, s] for c in catalogs for s in catalogs if s != c])
        if rank:  # the rank features alone: similarities zeroed, so their coefficients stay 0
            pos, neg = pos * RANK_ONLY, neg * RANK_ONLY
        return fit(pos, neg, source="default-rank" if rank else "default")

    shipped = fitted(sets)
    shipped_rank = fitted(sets, rank=True)
    print("shipped defaults (all sets' train splits):")
    # with intent examples, the full fit is EXAMPLES_ABSTAIN (its rank-only fit is not shipped)
    shipping = [("EXAMPLES_ABSTAIN", shipped, EXAMPLES_ABSTAIN, "default-examples")] if args.examples else []
    if not args.examples:
        shipping += [("DEFAULT_ABSTAIN", shipped, DEFAULT_ABSTAIN, "default")]
        shipping += [("RANK_ABSTAIN", shipped_rank, RANK_ABSTAIN, "default-rank")]
    for name, model, known, source in shipping:
        tail = "" if source == "default" else f', source="{source}"'
        print(f"{name} = AbstainModel({constants(model)}{tail})")
        if constants(model) != constants(known):
            print(f"note: _abstain.{name} differs from this fit (which moves a little between fresh catalogs: README,")
            print("      Abstention); paste the line above to ship a fit of today's evidence")
    loso = {x: fitted([s for s in sets if s != x]) if len(sets) > 2 else shipped for x in sets}
    loso_rank = {x: fitted([s for s in sets if s != x], rank=True) if len(sets) > 2 else shipped_rank for x in sets}

    print()
    print("error rates on queries.jsonl: false abstention (own requests), false acceptance (other sets' requests)")
    print(f"{'catalog':<14} {'model':<24} {'n own':>6} {'n other':>8} {'f.abst':>8} {'f.acc':>8}")
    for cat in sets:
        store = stores[cat]
        log(f"{cat}: routing queries.jsonl requests with abstain=True")
        own = routed(store, texts(cat, "queries"))
        other_rows = [routed(store, texts(s, "queries")) for s in sets if s != cat]
        other = (np.vstack([o[0] for o in other_rows]), np.concatenate([o[1] for o in other_rows]))
        counts = f"{len(own[0]):>6} {len(other[0]):>8}"
        print(f"{cat:<14} {'default (' + cat + ' out)':<24} {counts} {rates(loso[cat], own[:2], other)}")
        print(f"{cat:<14} {'rank-only (' + cat + ' out)':<24} {counts} {rates(loso_rank[cat], own[:2], other)}")
        print(f"{cat:<14} {'shipped (in-sample)':<24} {counts} {rates(shipped, own[:2], other)}")
        if args.examples:  # the default fitted without intent examples, which route() used on these before
            print(f"{cat:<14} {'DEFAULT_ABSTAIN':<24} {counts} {rates(DEFAULT_ABSTAIN, own[:2], other)}")
        if not args.no_calibrated:
            log(f"{cat}: tune with negatives")
            negatives = [t for s in sets if s != cat for t in texts(s, "train")]
            report = store.tune(load_judgements(BENCH / cat / "train.jsonl"), negatives=negatives)
            assert report.abstain is not None
            own_c = routed(store, texts(cat, "queries"))
            other_c = [routed(store, texts(s, "queries")) for s in sets if s != cat]
            f_abstain = own_c[2].mean()
            f_accept = 1 - np.concatenate([o[2] for o in other_c]).mean()
            print(f"{cat:<14} {'calibrated (tune)':<24} {counts} {f_abstain:>8.3f} {f_accept:>8.3f}")
            print(f"{'':<14} tune's own CV on train: {report.abstain['cv']}, model {report.abstain['model']}")
            store.set_abstain(None, fusion=DEFAULT_FUSION)
        sys.stdout.flush()
    for store in stores.values():
        store.close()


if __name__ == "__main__":
    main()
