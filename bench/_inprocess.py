"""The route statement's five retrievers and its fusion, in-process: the reference the SQL is compared with.

Lexical: a dict inverted index per field built from the catalog's stored ``postings`` rows (so lexemes, term
frequencies and document lengths are the database's own) with the same BM25 (k1 1.2, b 0.75, idf
ln(1 + (N - df + .5) / (df + .5))). Dense and intent: exact cosine over float32 matrices with numpy.
Fusion: weighted RRF over ranks, ties broken by tool id (in the database's collation order), exact
identifier matches first: the statement's semantics, minus filters and always-on tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

K1 = 1.2
B = 0.75


@dataclass
class Postings:
    """One lexeme's posting list in one field: tool indexes, term frequencies, document lengths."""

    tools: np.ndarray
    tf: np.ndarray
    dl: np.ndarray


@dataclass
class Field:
    n: float
    avgdl: float
    index: dict[str, Postings]


def _ranked(idx: np.ndarray, score: np.ndarray, n: int, descending: bool = True) -> np.ndarray:
    """The first ``n`` of ``idx`` ordered by score (rounded at 1e-9 like the SQL), ties by tool index."""
    key = np.round(score * 1e9)
    order = np.lexsort((idx, -key if descending else key))
    return idx[order[:n]]


class Reference:
    """An in-memory copy of one catalog that routes like ``sql/route.sql``."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        catalog: int,
        vectors_by_id: Mapping[str, np.ndarray],
        example_vectors: np.ndarray,
        example_tools: Sequence[str],
    ) -> None:
        rows = conn.execute(
            "select pk, id, lower(id), lower(name) from tools where catalog_id = %s order by id", [catalog]
        ).fetchall()
        self.ids = [r[1] for r in rows]  # tool index = position in the database's id order (the tie-break)
        position = {r[0]: i for i, r in enumerate(rows)}
        by_id = {r[1]: i for i, r in enumerate(rows)}
        self.exact: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            for key in {r[2], r[3]}:
                self.exact.setdefault(key, []).append(i)
        stats = {
            f: (float(n), float(total) / max(n, 1))
            for f, n, total in conn.execute(
                "select field, n, total_len from field_stats where catalog_id = %s", [catalog]
            )
        }
        lists: dict[tuple[int, str], tuple[list[int], list[int], list[int]]] = {}
        with conn.transaction(), conn.cursor(name="postings") as cur:
            cur.itersize = 50_000
            cur.execute("select field, lexeme, tool_pk, tf, dl from postings where catalog_id = %s", [catalog])
            for field, lexeme, pk, tf, dl in cur:
                entry = lists.setdefault((field, lexeme), ([], [], []))
                entry[0].append(position[pk])
                entry[1].append(tf)
                entry[2].append(dl)
        self.fields: dict[int, Field] = {f: Field(n, avgdl, {}) for f, (n, avgdl) in stats.items()}
        for (field, lexeme), (t, tf, dl) in lists.items():
            self.fields[field].index[lexeme] = Postings(
                np.asarray(t, dtype=np.int64), np.asarray(tf, dtype=np.float64), np.asarray(dl, dtype=np.float64)
            )
        self.postings_rows = sum(len(p.tools) for f in self.fields.values() for p in f.index.values())
        self.matrix = np.stack([np.asarray(vectors_by_id[i], dtype=np.float32) for i in self.ids])
        self.examples = np.asarray(example_vectors, dtype=np.float32)
        self.example_tool = np.asarray([by_id[t] for t in example_tools], dtype=np.int64)

    # -- retrievers ------------------------------------------------------------------------------------

    def bm25(self, field: int, lexemes: Sequence[str], n: int) -> np.ndarray:
        """The top ``n`` tool indexes of one field by BM25."""
        f = self.fields.get(field)
        if f is None:
            return np.zeros(0, dtype=np.int64)
        hits = [f.index[q] for q in lexemes if q in f.index]
        if not hits:
            return np.zeros(0, dtype=np.int64)
        tools = np.concatenate([p.tools for p in hits])
        parts = []
        for p in hits:
            df = len(p.tools)
            idf = np.log(1 + (f.n - df + 0.5) / (df + 0.5))
            parts.append(idf * p.tf * (K1 + 1) / (p.tf + K1 * (1 - B + B * p.dl / f.avgdl)))
        uniq, inverse = np.unique(tools, return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(parts))
        return _ranked(uniq, scores, n)

    def dense(self, qvec: np.ndarray, n: int) -> np.ndarray:
        distance = 1.0 - (self.matrix @ qvec).astype(np.float64)
        top = (
            np.argpartition(distance, min(n, len(distance) - 1))[:n] if len(distance) > n else np.arange(len(distance))
        )
        return _ranked(top, distance[top], n, descending=False)

    def intent(self, qvec: np.ndarray, n_examples: int, per_tool: int, n: int) -> np.ndarray:
        if len(self.examples) == 0:
            return np.zeros(0, dtype=np.int64)
        distance = 1.0 - (self.examples @ qvec).astype(np.float64)
        k = min(n_examples, len(distance))
        nearest = np.argpartition(distance, k - 1)[:k] if len(distance) > k else np.arange(len(distance))
        nearest = nearest[np.argsort(distance[nearest], kind="stable")]
        score: dict[int, float] = {}
        count: dict[int, int] = {}
        for e in nearest:
            t = int(self.example_tool[e])
            if count.get(t, 0) < per_tool:
                count[t] = count.get(t, 0) + 1
                score[t] = score.get(t, 0.0) + 1.0 - float(distance[e])
        idx = np.fromiter(score, dtype=np.int64, count=len(score))
        return _ranked(idx, np.fromiter(score.values(), dtype=np.float64, count=len(score)), n)

    # -- fusion ----------------------------------------------------------------------------------------

    def route(
        self,
        lexemes: Sequence[str],
        identifiers: Sequence[str],
        qvec: np.ndarray | None,
        params: Mapping[str, Any],
    ) -> list[str]:
        """Tool ids in the order the ``route`` statement returns them (same bound parameters)."""
        n = params["n"]
        weights = {
            1: params["w_name"],
            2: params["w_description"],
            3: params["w_expansion"],
            4: params["w_dense"],
            5: params["w_intent"],
        }
        lists: dict[int, np.ndarray] = {}
        for field in (1, 2, 3):
            if weights[field] > 0:
                lists[field] = self.bm25(field, lexemes, n)
        if qvec is not None and weights[4] > 0:
            lists[4] = self.dense(qvec, n)
        if qvec is not None and weights[5] > 0:
            lists[5] = self.intent(qvec, params["n_examples"], params["per_tool"], n)
        fused: dict[int, float] = {}
        k_rrf = params["k_rrf"]
        for signal, ranked in lists.items():
            for rank, t in enumerate(ranked.tolist(), start=1):
                fused[t] = fused.get(t, 0.0) + weights[signal] / (k_rrf + rank)
        exact = {t for ident in identifiers for t in self.exact.get(ident, ())}
        top = sorted(fused, key=lambda t: (t not in exact, -fused[t], t))[: params["limit"]]
        score = {t: fused[t] for t in top}
        top += sorted(exact - set(top))  # exact matches outside the top come with score 0, as in the SQL
        top.sort(key=lambda t: (t not in exact, -score.get(t, 0.0), t))
        return [self.ids[t] for t in top]
