"""Each signal's ranked lists for tuning and evaluation, fetched once per labelled request (the fusion over them,
for any weighting, is ``_candidates``'s).

BM25, dense and intent lists come from ``sql/eval.sql`` with the statement's rounding and id tie-break; intent and
context lists are the nearest intent examples (``depth * EXAMPLES_PER_CANDIDATE``) of the request's vector and of it
mixed with the earlier turns' (``_route.context_vector``), each request's own examples left out (:class:`Probe`), and
their copies in tools' expansions too (:func:`_own_lines`); a compound request's sub-requests (``_split``) get lists
of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.rows import dict_row

from ._fusion import CONTEXT_TURNS, EXAMPLES_PER_CANDIDATE
from ._models import CatalogInfo, Tool
from ._route import context_vector
from ._split import split_request
from ._sql import query
from ._stored_tools import list_tools
from ._text import dense_text, expansion_doc, query_identifiers, query_text
from ._vectors import embed_cached, one_width

if TYPE_CHECKING:
    import psycopg

    from ._store import ToolStore

FETCH_THREADS = 2  # connections fetching retriever lists in parallel (the server does the work)


@dataclass(frozen=True)
class ToolIndex:
    """The catalog's tools in ``route``'s tie-break order (position = rank of ``t.id`` in ``order by id``)."""

    ids: tuple[str, ...]
    position: Mapping[str, int]
    by_identifier: Mapping[str, frozenset[str]]  # lower-cased id or name -> tool ids
    always_on: frozenset[str]
    avoid: Mapping[str, frozenset[str]] = field(default_factory=dict)  # the lexemes of tools' avoid-when text

    def exact(self, raw_query: str) -> frozenset[str]:
        """Tools the query names verbatim (id or name), as ``route``'s ``exact`` part finds them."""
        found: set[str] = set()
        for ident in query_identifiers(raw_query):
            found |= self.by_identifier.get(ident, frozenset())
        return frozenset(found)


@dataclass(frozen=True)
class Probe:
    """One labelled request as route() sees it: the request, the earlier turns' text and the tool ids called
    before it (both oldest first), and intent example texts never to match (the request's own, its session's)."""

    query: str
    earlier: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
    exclude: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Lists:
    """One request's retriever outputs, each ranked best first and at least ``depth`` deep."""

    query: str
    lexical: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # name, description, expansion
    dense: tuple[str, ...]
    neighbours: tuple[tuple[str, float], ...]  # (tool id, distance), nearest first, excluded examples dropped
    exact: frozenset[str]
    history: tuple[str, ...] = ()  # tool ids called before, oldest first
    context: tuple[tuple[str, float], ...] = ()  # neighbours of the context vector, as ``neighbours``
    parts: tuple[Lists, ...] = ()  # each sub-request's lists (no history, no context)
    dense_distance: float | None = None  # the nearest tool's cosine distance (None: no dense list)


def load_tool_index(store: ToolStore) -> ToolIndex:
    """Every tool of ``store``'s catalog, in the database's id order."""
    info = store.info()
    with store.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("eval_tools"), {"catalog": info.id}).fetchall()
    by_identifier: dict[str, set[str]] = {}
    for r in rows:
        by_identifier.setdefault(r["id_lower"], set()).add(r["id"])
        by_identifier.setdefault(r["name_lower"], set()).add(r["id"])
    ids = tuple(r["id"] for r in rows)
    always_on = frozenset(r["id"] for r in rows if r["always_on"])
    exact = {k: frozenset(v) for k, v in by_identifier.items()}
    avoid = {r["id"]: frozenset(r["avoid"]) for r in rows if r["avoid"]}
    position = {t: i for i, t in enumerate(ids)}
    return ToolIndex(ids=ids, position=position, by_identifier=exact, always_on=always_on, avoid=avoid)


def fetch_lists(
    store: ToolStore,
    queries: Sequence[str | Probe],
    *,
    depth: int,
    leave_one_out: bool = True,
    tools: ToolIndex | None = None,
    lines: ExpansionLines | None = None,
) -> list[Lists]:
    """Each retriever's ranked list for every request, ``depth`` deep (intent and context: ``depth *
    EXAMPLES_PER_CANDIDATE`` neighbours).

    ``leave_one_out`` drops the stored intent examples whose text equals the request, so a training request is never
    matched to itself (a Probe's ``exclude`` drops more), and reads a tool whose expansion holds such a text as a
    line (``expand --offline`` copies intent examples there) without it: its expansion field with the field's
    statistics, and its vector embedded again (:func:`_own_lines`), from ``lines`` when it covers the requests'
    texts (:func:`expansion_lines`, read here otherwise). Dense, intent and context lists are empty when
    the store has no embedder or the catalog no embeddings; context also without earlier turns.
    """
    info = store.info()
    tools = tools or load_tool_index(store)
    probes = [Probe(q) if isinstance(q, str) else q for q in queries]
    if leave_one_out:
        probes = [Probe(p.query, p.earlier, p.history, p.exclude | {p.query}) for p in probes]
    parts = [split_request(p.query) for p in probes]
    vectors: dict[str, np.ndarray] | None = None
    if store.embedder is not None and info.embed_model is not None:
        info.require_model(store.embedder.model)  # as route(): another model's vectors would search the wrong space
        texts = [t for p, ps in zip(probes, parts) for t in (p.query, *ps, *p.earlier[-CONTEXT_TURNS:])]
        texts = list(dict.fromkeys(texts))
        with store.connection() as conn:  # its model's name served at another width since: refused from the first batch
            vectors = dict(zip(texts, embed_cached(conn, store.embedder, texts, require=info.require_dim)))
        if vectors:  # the width of the vectors got: the server's, or the cache's while it is down
            info.require_dim(one_width(store.embedder.model, list(vectors.values())))
    if lines is None or not lines.covers(probes):
        lines = expansion_lines(store, info, (text for p in probes for text in p.exclude))
    own = _own_lines(lines, probes)
    documents: dict[str, np.ndarray] = {}  # those tools' vectors without those lines, by text (not cached)
    if vectors is not None and store.embedder is not None:
        texts = list(dict.fromkeys(dense_text(t) for held in own for _, t in held.values()))
        documents = dict(zip(texts, store.embedder.embed_many(texts))) if texts else {}

    def one(conn: psycopg.Connection[Any], i: int) -> Lists:
        fetch = partial(
            _fetch_one, conn, info, vectors=vectors, documents=documents, depth=depth, tools=tools, own=own[i]
        )
        subs = (fetch(Probe(t, exclude=probes[i].exclude)) for t in parts[i])
        return replace(fetch(probes[i]), parts=tuple(subs))

    def chunk(part: int) -> list[Lists]:  # every FETCH_THREADS-th request, on its own connection
        with store.connection() as conn:
            return [one(conn, i) for i in range(part, len(probes), FETCH_THREADS)]

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        chunks = list(pool.map(chunk, range(FETCH_THREADS)))
    return [chunks[i % FETCH_THREADS][i // FETCH_THREADS] for i in range(len(probes))]


@dataclass(frozen=True)
class ExpansionLines:
    """The lines of tools' expansions that are one of ``texts`` (``toolstore expand --offline`` copies intent examples
    there; block ``eval_expansion_lines``), read once by :func:`expansion_lines` and passed on: a tune reads them for
    every request it fetches lists of, its negatives' too, and counts the copies with them."""

    texts: frozenset[str]
    lines: Mapping[str, Mapping[str, frozenset[int]]]  # text -> tool id -> the numbers of its lines that are the text
    pks: Mapping[str, int]  # those tools' pks
    stored: Mapping[str, Tool]  # and the tools as stored

    def covers(self, probes: Sequence[Probe]) -> bool:
        return all(p.exclude <= self.texts for p in probes)


def expansion_lines(store: ToolStore, info: CatalogInfo, texts: Iterable[str]) -> ExpansionLines:
    """The lines of the catalog's tools' expansions that are one of ``texts``, and those tools (one read of each)."""
    wanted = sorted(set(texts))
    lines: dict[str, dict[str, set[int]]] = {}
    pks: dict[str, int] = {}
    stored: dict[str, Tool] = {}
    if wanted:
        with store.connection() as conn:
            for text, pk, tool_id, n in conn.execute(
                query("eval_expansion_lines"), {"catalog": info.id, "texts": wanted}
            ):
                lines.setdefault(text, {}).setdefault(tool_id, set()).add(n)
                pks[tool_id] = pk
            stored = {t.id: t for t in list_tools(conn, info, sorted(pks))} if pks else stored
    frozen = {text: {t: frozenset(ns) for t, ns in held.items()} for text, held in lines.items()}
    return ExpansionLines(frozenset(wanted), frozen, pks, stored)


def _own_lines(held: ExpansionLines, probes: Sequence[Probe]) -> list[dict[str, tuple[int, Tool]]]:
    """Per probe, the tools whose expansion holds one of its ``exclude`` texts as a line (``held``, which covers
    them), by id: each one's pk and the tool without those lines, as the probe's lists read it (its own text never
    matches it, as it never matches its own intent example)."""
    out = []
    for probe in probes:
        drop: dict[str, set[int]] = {}
        for text in probe.exclude:
            for tool_id, numbers in held.lines.get(text, {}).items():
                drop.setdefault(tool_id, set()).update(numbers)
        out.append(
            {tool_id: (held.pks[tool_id], _without(held.stored[tool_id], numbers)) for tool_id, numbers in drop.items()}
        )
    return out


def _without(tool: Tool, numbers: set[int]) -> Tool:
    """``tool`` without the lines ``numbers`` (from 1) of its expansion."""
    kept = [line for n, line in enumerate(tool.expansion.split("\n"), start=1) if n not in numbers]
    return replace(tool, expansion="\n".join(kept))


def _fetch_one(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    probe: Probe,
    *,
    vectors: dict[str, np.ndarray] | None,
    documents: Mapping[str, np.ndarray],
    depth: int,
    tools: ToolIndex,
    own: Mapping[str, tuple[int, Tool]],
) -> Lists:
    """One request's lists; the tools ``own`` (:func:`_own_lines`) are read without the request's own lines (their
    vectors in ``documents``, by their text). Only tools of ``tools`` are listed: one another writer added since it was
    read is not (tune's fusion ranks by ``tools``, as route() ranks the catalog of one moment)."""
    raw = probe.query
    params: dict[str, Any] = {"catalog": info.id, "dim": info.embed_dim, "query_text": query_text(raw), "n": depth}
    replaced = {
        "replaced_pks": [pk for pk, _ in own.values()],
        "replaced_docs": [expansion_doc(t) for _, t in own.values()],
    }
    lexical: list[list[str]] = [[], [], []]
    for fld, tool_id, _rank in conn.execute(query("eval_lexical"), params | replaced):
        if tool_id in tools.position:  # not a tool written since ``tools`` was read (another writer's)
            lexical[fld - 1].append(tool_id)
    dense: tuple[str, ...] = ()
    nearest: float | None = None
    neighbours: tuple[tuple[str, float], ...] = ()
    context: tuple[tuple[str, float], ...] = ()
    if vectors is not None:
        qvec = vectors[raw]
        params["qvec"] = qvec
        rows = conn.execute(query("eval_dense"), params | {"n": depth + len(own)}).fetchall()
        found = [(tool_id, float(d)) for tool_id, d in rows if tool_id not in own and tool_id in tools.position]
        for tool_id, (_, tool) in own.items():  # the distance as knn() computes a stored vector's
            if tool_id not in tools.position:  # removed before ``tools`` was read
                continue
            row = conn.execute(query("eval_distance"), {"vector": documents[dense_text(tool)], "qvec": qvec}).fetchone()
            found.append((tool_id, float(row[0])))  # type: ignore[index]
        found = sorted(found, key=lambda f: (f[1], tools.position.get(f[0], len(tools.ids))))[:depth]
        dense, nearest = tuple(f[0] for f in found), (found[0][1] if found else None)
        neighbours = _neighbours(conn, params, qvec, depth, probe.exclude)
        cvec = context_vector(qvec, [vectors[t] for t in probe.earlier[-CONTEXT_TURNS:]])
        if cvec is not None:
            context = _neighbours(conn, params, cvec, depth, probe.exclude)
    lex = (tuple(lexical[0]), tuple(lexical[1]), tuple(lexical[2]))
    return Lists(raw, lex, dense, neighbours, tools.exact(raw), probe.history, context, dense_distance=nearest)


def _neighbours(
    conn: psycopg.Connection[Any], params: dict[str, Any], vector: np.ndarray, depth: int, exclude: frozenset[str]
) -> tuple[tuple[str, float], ...]:
    limit = depth * EXAMPLES_PER_CANDIDATE
    rows = conn.execute(query("eval_neighbours"), {**params, "qvec": vector, "limit": limit, "exclude": list(exclude)})
    return tuple((tool_id, float(d)) for tool_id, text, d in rows if text not in exclude)[:limit]
