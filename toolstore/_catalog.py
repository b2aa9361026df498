"""The write path: tools, vectors and intent examples go in as one transaction, all or nothing.

Connection-level functions; :class:`toolstore.ToolStore` says when to call them. Every write takes the catalog's row
lock first (``lock_catalog``), creating the catalog in that same transaction when allowed, so writers of one catalog
queue in one order, a failed first write leaves no empty catalog behind, and what changed is decided under the lock
(two concurrent imports end as one of them, never a mix). Work that may be slow (embedding) happens before the lock,
from a first unlocked look; the locked look only embeds what changed in between (both looks: ``_stored_tools``). What
a row looks like and what input is refused lives in ``_rows``; vectors and their indexes in ``_vectors``; a large
write's index drop and build around it in ``_bulk_load``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import psycopg

from ._bulk_load import ANALYZE_AFTER, bulk_tables, loaded, may_drop, to_drop
from ._catalog_row import catalog_info, lock_catalog
from ._connect import retry_conflicts
from ._embedders.base import Embedder
from ._errors import InvalidToolError, UnknownToolError
from ._formats.build import namespace_conflicts, namespace_error, namespace_record
from ._indexes import analyze_after_write
from ._models import CatalogInfo, ImportReport, IntentExample, Tool
from ._rows import CREATE_IT, NOT_CREATED, check_examples, check_tools, json_batches, tool_row, unknown_catalog
from ._sql import query
from ._stored_tools import Changes, tool_changes
from ._text import dense_text
from ._vectors import embed_cached, record_model, write_examples, write_tool_vectors

#: Tools per ``upsert_tools`` statement, and the most JSON one takes (one jsonb value: Postgres caps it at 256 MB).
UPSERT_BATCH = 2000
UPSERT_BYTES = 64 * 2**20
#: What a caller writes with the tools, in their locked transaction (``upsert_tools(locked=...)``: an MCP sync's).
Locked = Callable[[psycopg.Connection[Any], CatalogInfo, ImportReport], None]


@dataclass(frozen=True)
class FirstLook:
    """A tool write's look before its transaction (:func:`look_first`): the catalog's row then (None: not created
    yet), the dense texts of the tools it embeds (by tool id, with the tool they are of), their vectors (by text), the
    texts the embedder computed (the others were cached) and how many texts it embedded."""

    info: CatalogInfo | None
    known: Mapping[str, tuple[Tool, str]]
    vectors: dict[str, np.ndarray]
    computed: set[str]
    n_texts: int


def look_first(
    conn: psycopg.Connection[Any],
    catalog: str,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    *,
    prune_scope: tuple[bool, str | None] = (False, None),
    create: bool = True,
    changes: Changes | None = None,
) -> FirstLook:
    """What :func:`upsert_tools` does before its transaction: the input checked (unless ``changes``, a first look
    taken already, :func:`~._stored_tools.tool_changes`, input checked), what the tools change, and their texts
    embedded, the cache's new rows committed when ``conn`` is in no transaction. A write that takes it before a
    transaction of its own (:func:`upsert_with_examples`) waits for the catalog's lock holding no embedding cache row:
    one uncommitted would make a lock holder caching the same text wait for it, a deadlock."""
    if changes is None:
        check_tools(tools)
    info = catalog_info(conn, catalog)
    if info is None and not create:
        raise unknown_catalog(catalog, NOT_CREATED)
    if embedder is not None and info is not None:
        info.require_model(embedder.model)
    if changes is None:  # a catalog's first write changes every tool
        changes = tool_changes(conn, info, tools, embedder, prune_scope) if info is not None else None
    looked = (changes.changed + changes.repair if changes is not None else list(tools)) if embedder is not None else []
    texts = [dense_text(t) for t in looked]
    require = None if info is None else info.require_dim  # the width it records, checked from the first batch
    computed: set[str] = set()  # the texts the embedder was asked for, at both looks: the others were cached
    vectors: dict[str, np.ndarray] = {}
    if embedder is not None and texts:
        vectors = dict(zip(texts, embed_cached(conn, embedder, texts, require=require, computed=computed)))
    known = {t.id: (t, text) for t, text in zip(looked, texts)}  # the write reuses them for the same tools
    return FirstLook(info, known, vectors, computed, len(texts))


def upsert_tools(
    conn: psycopg.Connection[Any],
    catalog: str,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    *,
    prune: bool = False,
    prune_upstream: str | None = None,
    if_unchanged: Mapping[str, str] | None = None,
    create: bool = True,
    indexes: bool = True,
    first_look: FirstLook | None = None,
    locked: Locked | None = None,
) -> ImportReport:
    """Insert new tools, update changed ones (by content hash), optionally remove the catalog's others.

    ``prune`` removes the catalog's tools absent from ``tools`` (only those ``prune_upstream`` synced when given: the
    ``tools.upstream`` a sync sets, migration 0022).
    ``if_unchanged`` (id -> content hash when read) skips tools changed or removed by someone else since.
    Incoming tools without an expansion keep the one ``toolstore expand`` generated for them. With an embedder,
    new and changed tools get vectors, and so does every other tool of the catalog that has none (repair): the report
    counts those the embedder computed in ``embedded``, and those of a text the embedding cache held in ``cached``
    (a re-import of an export, a catalog's tools imported into another); without one, a changed tool's old vector is
    deleted (never left stale) and the report counts it in ``unembedded``.
    One transaction (a savepoint inside the caller's), retried when Postgres picks it as a deadlock victim; ``locked``
    is called in it, under the catalog's lock, once the tools are written (at each try).
    ``indexes=False``: the catalog's HNSW indexes are left as they are, for the caller to make whole after its
    transaction (:func:`upsert_with_examples`), which passes its ``first_look`` (:func:`look_first`, taken before its
    transaction).
    """
    prune_scope = (prune, prune_upstream)
    if first_look is None:
        first_look = look_first(conn, catalog, tools, embedder, prune_scope=prune_scope, create=create)
    info = first_look.info
    first = (first_look.known, first_look.vectors, first_look.computed)
    write = partial(_write_tools, conn, catalog, tools, embedder, first, prune_scope, if_unchanged, create, locked)
    tables = to_drop(conn, info, "tool_vectors", first_look.n_texts)
    report = loaded(conn, catalog, info, tables, partial(retry_conflicts, write), indexes)
    if len(report.inserted) + len(report.updated) + len(report.removed) > ANALYZE_AFTER:
        analyze_after_write(conn, catalog)
    return report


def upsert_with_examples(
    conn: psycopg.Connection[Any],
    catalog: str,
    tools: Sequence[Tool],
    examples: Sequence[IntentExample],
    embedder: Embedder,
    *,
    prune: bool = False,
    create: bool = True,
) -> ImportReport:
    """:func:`upsert_tools` then :func:`add_examples` in one transaction: both written or neither. The tools' first
    look (:func:`look_first`: their texts embedded, and cached) is taken before it. The catalog's HNSW index of each
    table the write loads more than BULK_VECTORS new vectors into (an unlocked look) is dropped before the transaction
    (concurrently, as each write alone drops it: meanwhile the catalog's dense retrieval searches exactly), and its
    indexes are made whole once after the commit, or after a failure. The transaction is retried when Postgres picks
    it as a deadlock victim."""
    info = catalog_info(conn, catalog)
    bulk = may_drop(conn, info)
    tables, changes = bulk_tables(conn, info, tools, examples, embedder, prune) if bulk and info else ([], None)
    first_look = look_first(conn, catalog, tools, embedder, prune_scope=(prune, None), create=create, changes=changes)
    options: dict[str, Any] = {"prune": prune, "create": create, "indexes": False, "first_look": first_look}

    def write() -> ImportReport:
        with conn.transaction():
            report = upsert_tools(conn, catalog, tools, embedder, **options)
            report.examples = add_examples(conn, catalog, examples, embedder, indexes=False)
        return report

    return loaded(conn, catalog, info, tables, partial(retry_conflicts, write))


def _write_tools(
    conn: psycopg.Connection[Any],
    catalog: str,
    tools: Sequence[Tool],
    embedder: Embedder | None,
    looked: tuple[Mapping[str, tuple[Tool, str]], dict[str, np.ndarray], set[str]],
    prune_scope: tuple[bool, str | None],
    if_unchanged: Mapping[str, str] | None,
    create: bool,
    locked: Locked | None,
) -> ImportReport:
    """The locked write. ``looked``: the first look's dense texts (by tool id, with the tool they are of), their
    vectors (by text) and the texts of those the embedder computed (added to here); ``locked``: called in it once the
    tools are written."""
    known, vectors, computed = looked
    with conn.transaction():
        info = lock_catalog(conn, catalog, create=create, hint=NOT_CREATED)
        if embedder is not None:
            info.require_model(embedder.model)
        if if_unchanged is not None:
            current = dict(conn.execute(query("tool_hashes"), {"catalog": info.id}).fetchall())
            tools = [t for t in tools if t.id in if_unchanged and current.get(t.id) == if_unchanged[t.id]]
        changes = tool_changes(conn, info, tools, embedder, prune_scope)
        report = ImportReport(unchanged=len(changes.tools) - len(changes.changed))
        for tool_id, inserted in _upsert(conn, info.id, changes.changed, changes.hashes):
            (report.inserted if inserted else report.updated).append(tool_id)
        embed = changes.changed + changes.repair
        if embedder is not None and embed:
            texts = [_dense_text(t, known) for t in embed]
            missing = [t for t in dict.fromkeys(texts) if t not in vectors]  # changed by someone since the first look
            if missing:
                found = embed_cached(conn, embedder, missing, require=info.require_dim, computed=computed)
                vectors.update(zip(missing, found))
            record_model(conn, info, embedder.model, [vectors[t] for t in texts])
            write_tool_vectors(conn, info.id, [t.id for t in embed], [vectors[t] for t in texts])
            report.embedded = sum(t in computed for t in texts)
            report.cached = len(embed) - report.embedded
        elif embedder is None and info.embed_model is not None and changes.changed:
            ids = [t.id for t in changes.changed]
            conn.execute(query("delete_tool_vectors"), {"catalog": info.id, "ids": ids})
            report.unembedded = len(ids)
        prune, upstream = prune_scope
        if prune:
            params = {"catalog": info.id, "keep": [t.id for t in changes.tools], "upstream": upstream}
            report.removed = [r[0] for r in conn.execute(query("prune_tools"), params)]
        _check_namespaces(conn, info.id, changes.changed)
        if locked is not None:
            locked(conn, info, report)
    return report


def _dense_text(tool: Tool, known: Mapping[str, tuple[Tool, str]]) -> str:
    """``dense_text(tool)``, taken from ``known`` when it holds an equal tool (building 10k tools' texts takes about
    0.2 s: a first write computed them for the first look)."""
    seen = known.get(tool.id)
    return seen[1] if seen is not None and seen[0] == tool else dense_text(tool)


def _check_namespaces(conn: psycopg.Connection[Any], catalog_id: int, written: Sequence[Tool]) -> None:
    """InvalidToolError (the write rolled back) when a tool ``written`` is in a Responses namespace that another of the
    catalog's tools has another record of (a description, keys): a Responses export gives a namespace once."""
    names = sorted({record["name"] for record in map(namespace_record, written) if record is not None})
    rows = conn.execute(query("namespace_records"), {"catalog": catalog_id, "names": names}).fetchall() if names else []
    ours = {t.id for t in written}
    for name, difference, first_id, tool_id in namespace_conflicts(rows):
        label = {i: f"tool {i!r} ({'this write' if i in ours else 'in the catalog'})" for i in (first_id, tool_id)}
        raise InvalidToolError(namespace_error(name, difference, label[first_id], label[tool_id]))


def _upsert(
    conn: psycopg.Connection[Any], catalog_id: int, tools: Sequence[Tool], hashes: Mapping[str, str]
) -> Iterator[tuple[str, bool]]:
    """``upsert_tools`` by batches of UPSERT_BATCH tools, cut further at UPSERT_BYTES of JSON: (id, inserted) of each
    tool written. With several batches, the next batch's rows are built in a thread while Postgres writes one
    (building 10k tools' rows takes about 0.6 s, and their content hashes, not in ``hashes`` for a catalog's first
    tools, 0.3 s more); a write of one batch (most writes) starts no thread."""

    def rows(batch: Sequence[Tool]) -> list[str]:
        return [json.dumps(tool_row(t, hashes.get(t.id)), ensure_ascii=False) for t in batch]

    batches = [tools[i : i + UPSERT_BATCH] for i in range(0, len(tools), UPSERT_BATCH)]
    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolstore-rows") if len(batches) > 1 else None
    try:
        for built in builder.map(rows, batches) if builder is not None else map(rows, batches):
            for batch in json_batches(built, UPSERT_BYTES):
                yield from conn.execute(query("upsert_tools"), {"catalog": catalog_id, "rows": batch})
    finally:
        if builder is not None:
            builder.shutdown(cancel_futures=True)  # a failed batch: the rows not built yet never will be


def add_examples(
    conn: psycopg.Connection[Any],
    catalog: str,
    examples: Sequence[IntentExample],
    embedder: Embedder,
    *,
    indexes: bool = True,
) -> int:
    """Store new intent examples (embedded) for tools of the catalog; returns how many were added.

    Examples already stored are skipped (nothing re-embedded); unknown tools are an error and then
    nothing is written. ``indexes`` as for :func:`upsert_tools`.
    """
    check_examples(examples)  # first: a bad item may not be hashable
    examples = list(dict.fromkeys(examples))
    info = catalog_info(conn, catalog)
    if info is None:
        raise unknown_catalog(catalog, CREATE_IT)
    info.require_model(embedder.model)
    _check_known(conn, info, examples)  # before embedding anything for a write that cannot succeed
    existing = {(r[0], r[1]) for r in conn.execute(query("existing_examples"), {"catalog": info.id})}
    texts = list(dict.fromkeys(ex.query for ex in examples if (ex.tool_id, ex.query) not in existing))
    vectors = dict(zip(texts, embed_cached(conn, embedder, texts, require=info.require_dim))) if texts else {}
    write = partial(retry_conflicts, partial(_write_examples, conn, catalog, examples, embedder, vectors))
    written = loaded(conn, catalog, info, to_drop(conn, info, "intent_examples", len(texts)), write, indexes)
    if written > ANALYZE_AFTER:
        analyze_after_write(conn, catalog, examples_only=True)
    return written


def _write_examples(
    conn: psycopg.Connection[Any],
    catalog: str,
    examples: Sequence[IntentExample],
    embedder: Embedder,
    vectors: dict[str, np.ndarray],
) -> int:
    with conn.transaction():
        info = lock_catalog(conn, catalog, hint=CREATE_IT)
        info.require_model(embedder.model)
        _check_known(conn, info, examples)
        existing = {(r[0], r[1]) for r in conn.execute(query("existing_examples"), {"catalog": info.id})}
        new = [ex for ex in examples if (ex.tool_id, ex.query) not in existing]
        if not new:
            return 0
        missing = [q for q in dict.fromkeys(ex.query for ex in new) if q not in vectors]
        if missing:
            vectors.update(zip(missing, embed_cached(conn, embedder, missing, require=info.require_dim)))
        record_model(conn, info, embedder.model, [vectors[ex.query] for ex in new])
        write_examples(conn, info.id, [(ex.tool_id, ex.query, vectors[ex.query]) for ex in new])
        return len(new)


def _check_known(conn: psycopg.Connection[Any], info: CatalogInfo, examples: Sequence[IntentExample]) -> None:
    ids = sorted({ex.tool_id for ex in examples})
    known = {r[0] for r in conn.execute(query("tool_pks"), {"catalog": info.id, "ids": ids})}
    unknown = [i for i in ids if i not in known]
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5])
        raise UnknownToolError(f"intent examples name {len(unknown)} tool(s) not in catalog {info.name!r}: {shown}")
