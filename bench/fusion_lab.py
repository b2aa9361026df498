"""Fusion lab: every retriever's scored list per query, cached on disk, so that fusion variants, dense-document
variants and embedders can be compared in seconds (numpy), before the winners are measured through the real
``route()`` with ``toolstore eval``.

    PYTHONPATH=. python bench/fusion_lab.py fetch --split queries        # BM25 lists from Postgres, once
    PYTHONPATH=. python bench/fusion_lab.py fetch --split train
    PYTHONPATH=. python bench/fusion_lab.py loso [--embedder local]      # zero-shot defaults, leave one set out

Lexical lists come from Postgres (the ``bm25_field`` block of tests/retrievers.sql, the same BM25 as route); dense
and intent lists are exact cosine in numpy over vectors cached in ``bench/out/lab/vectors``. Intent scores a tool
like route: the sum of ``1 - distance`` over its nearest 3 of the query's nearest ``3 * depth`` examples. Nothing
here is a result to report: it is for choosing what to measure.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "lab"
BENCH = Path(os.environ.get("TOOLSTORE_BENCH", ROOT.parent / "shared" / "bench"))
DEPTH = 100  # retriever depth kept on disk (route uses max(4k, 40) = 40)


def vectors(embedder: Any, texts: Sequence[str], tag: str) -> np.ndarray:
    """Embeddings of ``texts``, cached by the embedder's ``cache_key`` (the shipped local model's names its build: an
    earlier build's vectors are not read) and a hash of the texts."""
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    key = re.sub(r"[^A-Za-z0-9._#=@-]", "_", embedder.cache_key)
    path = OUT / "vectors" / f"{key}-{tag}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = embedder.embed_many(list(texts))
    np.save(path, out)
    return out


def lab_tools(set_name: str, expand: bool = False) -> list[Any]:
    """The set's tools; with ``expand``, each with its offline expansion (``expand --offline``, no intents)."""
    from dataclasses import replace

    from toolstore._expand import offline_phrases
    from toolstore._formats import load_tools_file

    tools = load_tools_file(BENCH / set_name / "tools.jsonl")
    return [replace(t, expansion="\n".join(offline_phrases(t))) for t in tools] if expand else tools


def lexical_lists(
    set_name: str, split: str, refresh: bool = False, expand: bool = False
) -> list[list[list[tuple[str, float]]]]:
    """Per query, per field (name, description, expansion): [(tool id, BM25)] best first, DEPTH deep."""
    from toolstore import ToolStore
    from toolstore._metrics import load_judgements
    from toolstore._sql import parse_blocks
    from toolstore._text import query_text

    path = OUT / set_name / f"{split}-lexical{'-expanded' if expand else ''}.json"
    if path.is_file() and not refresh:
        return json.loads(path.read_text())
    blocks = parse_blocks((ROOT / "tests" / "retrievers.sql").read_text())
    tools = lab_tools(set_name, expand)
    queries = [q for q, _ in load_judgements(BENCH / set_name / f"{split}.jsonl")]
    out: list[list[list[tuple[str, float]]]] = []
    with ToolStore(catalog=f"lab-{uuid.uuid4().hex[:8]}", embedder=None) as store:
        try:
            store.upsert(tools)
            store.analyze()
            info = store.info()
            with store.pool.connection() as conn:
                for q in queries:
                    fields = []
                    for field in (1, 2, 3):
                        params = {"catalog": info.id, "query_text": query_text(q), "field": field}
                        rows = conn.execute(blocks["bm25_field"], params).fetchmany(DEPTH)
                        fields.append([(r[0], float(r[1])) for r in rows])
                    out.append(fields)
        finally:
            store.drop_catalog()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


@dataclass
class SetData:
    """One split of one set: queries, judgements, tools, and every retriever's scored lists."""

    name: str
    queries: list[str]
    judgements: list[Any]
    tool_ids: list[str]
    lexical: list[list[list[tuple[str, float]]]]
    dense: np.ndarray  # (queries, tools) cosine
    intent: list[list[tuple[str, float]]]  # per query, (tool, summed similarity), best first; [] without train


def load(
    set_name: str,
    split: str,
    embedder: Any,
    *,
    dense_text: Callable[[Any], str] | None = None,
    with_train: bool = False,
    query_prefix: str = "",
    expand: bool = False,
) -> SetData:
    from toolstore._metrics import load_judgements
    from toolstore._text import dense_text as default_dense_text

    tools = lab_tools(set_name, expand)
    pairs = load_judgements(BENCH / set_name / f"{split}.jsonl")
    queries = [q for q, _ in pairs]
    docs = [(dense_text or default_dense_text)(t) for t in tools]
    tv = vectors(embedder, docs, f"{set_name}-docs")
    qv = vectors(embedder, [query_prefix + q for q in queries], f"{set_name}-{split}{'-p' if query_prefix else ''}")
    intent: list[list[tuple[str, float]]] = [[] for _ in queries]
    if with_train:
        train = load_judgements(BENCH / set_name / "train.jsonl")
        ex_text = [q for q, j in train for _ in j.relevant]
        ex_tool = [t for _, j in train for t in j.relevant]
        ev = vectors(
            embedder, [query_prefix + q for q in ex_text], f"{set_name}-examples{'-p' if query_prefix else ''}"
        )
        sims = qv @ ev.T
        n_ex = 40 * 3
        for i, q in enumerate(queries):
            order = np.argsort(-sims[i], kind="stable")
            picked = [j for j in order[: n_ex + 5] if not (split == "train" and ex_text[j] == q)][:n_ex]
            per: dict[str, list[float]] = {}
            for j in picked:
                per.setdefault(ex_tool[j], []).append(float(sims[i, j]))
            scored = {t: sum(sorted(v, reverse=True)[:3]) for t, v in per.items()}
            intent[i] = sorted(scored.items(), key=lambda x: (-x[1], x[0]))
    return SetData(
        name=set_name,
        queries=queries,
        judgements=[j for _, j in pairs],
        tool_ids=[t.id for t in tools],
        lexical=lexical_lists(set_name, split, expand=expand),
        dense=qv @ tv.T,
        intent=intent,
    )


class Table:
    """One split as padded arrays (query x candidate): each signal's rank (inf when absent) and raw score, the
    relevance gains, and exact-identifier matches; candidates are every tool any signal returned ``depth`` deep."""

    def __init__(self, data: SetData, depth: int = 40) -> None:
        from toolstore._text import query_identifiers

        rows = []
        for i, q in enumerate(data.queries):
            order = np.argsort(-data.dense[i], kind="stable")[:depth]
            dense = [(data.tool_ids[j], float(data.dense[i, j])) for j in order]
            lists = [*(f[:depth] for f in data.lexical[i]), dense, data.intent[i][:depth]]
            idents = set(query_identifiers(q))
            exact = {t for t in data.tool_ids if t.lower() in idents}
            rows.append((sorted({t for lst in lists for t, _ in lst} | exact), lists, exact))
        n, width = len(rows), max(len(r[0]) for r in rows)
        self.rank = np.full((5, n, width), np.inf)
        self.score = np.full((5, n, width), np.nan)
        self.top, self.last = np.zeros((5, n, 1)), np.zeros((5, n, 1))
        self.valid, self.exact, self.gain = (np.zeros((n, width), bool) for _ in range(3))
        for i, ((cands, lists, exact), j) in enumerate(zip(rows, data.judgements)):
            col = {t: c for c, t in enumerate(cands)}
            for s, lst in enumerate(lists):
                for r, (t, score) in enumerate(lst, 1):
                    self.rank[s, i, col[t]], self.score[s, i, col[t]] = r, score
                if lst:
                    self.top[s, i], self.last[s, i] = lst[0][1], lst[-1][1]
            for c, t in enumerate(cands):
                self.valid[i, c], self.exact[i, c], self.gain[i, c] = True, t in exact, t in j.relevant
        self.ideal = np.array(
            [sum(1 / np.log2(r + 2) for r in range(min(len(j.relevant), 10))) for j in data.judgements]
        )

    def ndcg(self, fused: np.ndarray) -> float:
        """Mean nDCG@10 of a fused score per candidate (exact matches first, ties broken by tool id)."""
        key = np.where(self.valid, fused, -np.inf) + self.exact * 1e6
        top = np.argsort(-key, axis=1, kind="stable")[:, :10]
        gain = np.take_along_axis(self.gain, top, 1) * np.isfinite(np.take_along_axis(key, top, 1))
        return float(((gain / np.log2(np.arange(2, 12))).sum(1) / self.ideal).mean())

    def rrf(self, weights: Sequence[float], k: float) -> np.ndarray:
        return sum(w / (k + self.rank[s]) for s, w in enumerate(weights) if w)

    def margin(self, s: int, m: int = 5) -> np.ndarray:
        """Signal s's confidence per query: (top score - m-th score) / top score, in [0, 1] (0 without a list)."""
        ranked = np.sort(np.nan_to_num(self.score[s], nan=-np.inf), axis=1)[:, ::-1]
        mth = np.where(np.isfinite(ranked[:, m - 1 : m]), ranked[:, m - 1 : m], 0.0)
        top = self.top[s]
        return np.where(top > 0, (top - mth) / np.where(top > 0, top, 1), 0.0)

    def normalised(self, s: int, how: str) -> np.ndarray:
        """Signal s's scores scaled per query: ``minmax`` over its list, or ``max`` (divided by the top score)."""
        floor = self.last[s] if how == "minmax" else 0.0
        span = self.top[s] - floor
        return np.nan_to_num((self.score[s] - floor) / np.where(span > 0, span, 1), nan=0.0)


Fuse = Callable[[Table], np.ndarray]


def families() -> dict[str, dict[str, Fuse]]:
    """Zero-shot fusion candidates over (name, description, expansion, dense): weighted RRF with its constant
    (dense-leaning and per-field weights included), RRF whose votes a retriever's score margin at the top scales,
    and a convex combination of per-query normalised scores (score-aware fusion)."""
    grid = list(itertools.product((0, 0.25, 0.5, 1), (0.5, 1, 1.5), (0.5, 1, 1.5, 2, 3)))
    rrf: dict[str, Fuse] = {}
    convex: dict[str, Fuse] = {}
    confident: dict[str, Fuse] = {}
    for wn, wd, wv in grid:
        for k, a in itertools.product((2, 5, 10), (1, 4)):
            confident[f"rrf*(1+{a}*margin) k={k} name={wn} desc={wd} dense={wv}"] = (
                lambda t, w=(wn, wd, 1, wv), k=k, a=a: sum(
                    x * (1 + a * t.margin(s)) / (k + t.rank[s]) for s, x in enumerate(w) if x
                )
            )
        for k in (2, 5, 10, 20, 60):
            rrf[f"rrf k={k} name={wn} desc={wd} dense={wv}"] = lambda t, w=(wn, wd, 1, wv), k=k: t.rrf(w, k)
        for how in ("minmax", "max"):
            convex[f"convex {how} name={wn} desc={wd} dense={wv}"] = lambda t, w=(wn, wd, 1, wv), how=how: sum(
                x * t.normalised(s, how) for s, x in enumerate(w)
            )
    return {"weighted RRF": rrf, "RRF scaled by confidence": confident, "score-aware (convex)": convex}


def loso(queries: dict[str, Table], train: dict[str, Table], family: dict[str, Fuse]) -> list[str]:
    """Leave one set out: for each set, the config with the best mean train nDCG@10 on the other sets, scored on the
    held-out set's queries; then the config chosen on every set's train split."""
    names = list(family)
    tr = {s: np.array([train[s].ndcg(family[n](train[s])) for n in names]) for s in train}
    lines = []
    held = []
    for s in train:
        others = [o for o in train if o != s]
        best = names[int(np.argmax(sum(tr[o] for o in others)))]
        score = queries[s].ndcg(family[best](queries[s]))
        held.append(score)
        lines.append(f"  held out {s:<14} chose {best:<40} -> {score:.3f}")
    best = names[int(np.argmax(sum(tr.values())))]
    lines.append(
        f"  mean held-out nDCG@10 {np.mean(held):.3f}; chosen on all train splits: {best} -> queries "
        + " ".join(f"{s} {queries[s].ndcg(family[best](queries[s])):.3f}" for s in queries)
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "loso"])
    parser.add_argument("--set", action="append", help="set(s) (default: metatool, seal_tools, gorilla_torch)")
    parser.add_argument("--split", default="queries")
    parser.add_argument("--embedder", default="local", help="toolstore embedder spec (vectors cached by model name)")
    parser.add_argument("--refresh", action="store_true")
    parser.add_argument("--expand", action="store_true", help="tools with their offline expansions")
    args = parser.parse_args()
    sets = args.set or ["metatool", "seal_tools", "gorilla_torch"]
    if args.command == "fetch":
        for s in sets:
            lexical_lists(s, args.split, refresh=args.refresh, expand=args.expand)
        return
    from toolstore._embedders.factory import make_embedder

    embedder = make_embedder(args.embedder)
    queries = {s: Table(load(s, "queries", embedder, expand=args.expand)) for s in sets}
    train = {s: Table(load(s, "train", embedder, expand=args.expand)) for s in sets}
    uniform = [queries[s].ndcg(queries[s].rrf((1, 1, 1, 1), 5)) for s in sets]
    print(f"zero-shot nDCG@10 on queries.jsonl, {embedder.model}; defaults chosen on train.jsonl of the other sets")
    print(
        "uniform RRF, k=5 (no choosing): "
        + " ".join(f"{s} {x:.3f}" for s, x in zip(sets, uniform))
        + f"; mean {np.mean(uniform):.3f}"
    )
    for label, family in families().items():
        print(f"{label} ({len(family)} configs):")
        print("\n".join(loso(queries, train, family)))


if __name__ == "__main__":
    main()
