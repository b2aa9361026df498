"""The vector tables' per-catalog partitions and HNSW indexes, and the maintenance lock for index builds and ANALYZE;
after a write, each is a ``_commits.follow_up`` (``indexes_after_write``, ``analyze_after_write``,
``partitions_after_drop``), done once more on a fresh connection when the write's was lost before it.

``tool_vectors`` and ``intent_examples`` are LIST-partitioned by catalog (migration 0009): the catalog's partitions
(``<table>_c<id>``) are made by a trigger with its row, and its k-NN statements are pruned to them before the planner
looks at an index, so a database of thousands of catalogs plans a search like a database of one. A partition
holding at least :data:`HNSW_MIN_ROWS` vectors gets an HNSW index for the catalog's dimension; smaller ones are
searched exactly (a scan of the partition and a top-n sort).

Indexes and partitions are built and dropped outside write transactions (``CONCURRENTLY``): a DROP INDEX or a DROP
TABLE of a partition inside a transaction would lock the shared parent, and so every other catalog's routes, until
commit. Inside a caller's open transaction nothing is dropped, and a missing index is built in place (that blocks
writes to the catalog's own partition, never other catalogs' routes).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ._catalog_row import catalog_info
from ._commits import FollowUp, follow_up
from ._connect import retry_conflicts
from ._errors import DatabaseError, add_notes, first_line
from ._models import CatalogInfo
from ._observe import logger
from ._remedies import left_behind_pooler, owner_builds, partitions_left, rebuild
from ._rows import unknown_catalog
from ._setup import pooled
from ._sql import query

#: Above this many new vectors in one write, the catalog's HNSW indexes are dropped before it and built once after,
#: rather than updated row by row.
BULK_VECTORS = 1000
#: A catalog's partition gets an HNSW index from this many rows on (dropped below half of it). Smaller ones are
#: searched exactly (knn(), migration 0027): the exact neighbours, the same from every build, for about 1 ms more
#: than an index at 2,000 rows (bench/PROFILE.md, "Exact k-NN below the HNSW threshold"; past it the statement
#: grows fast: 2.3x at 4k tools).
HNSW_MIN_ROWS = 2000
#: HNSW build effort: pgvector's default. 32 builds faster but finds less (``python bench/hnsw_build.py``, 10k tools
#: and 30k examples, on vector before migration 0015: tools 1.8 vs 2.9 s, recall@40 .909 vs .935; examples 6.1 vs
#: 9.6 s, recall@120 .938 vs .964).
HNSW_EF_CONSTRUCTION = 64
#: The tables with a vector per row, partitioned by catalog, each partition with its HNSW index when large enough.
VECTOR_TABLES = ("tool_vectors", "intent_examples")
#: Seconds a write waits for another session's index build or ANALYZE before it gives up.
MAINTENANCE_WAIT = 600.0
#: A dropped catalog's detached partition waits this long (seconds) at a time for its lock on ``tools``, which stalls
#: every route meanwhile, at most DROP_TRIES times, DROP_PAUSE seconds or so apart; then a later drop drops it.
DROP_LOCK_WAIT, DROP_TRIES, DROP_PAUSE = 0.1, 20, 0.1
#: Most maintenance_work_mem (kB) an HNSW build is given: about 400,000 vectors of 384 dimensions.
HNSW_BUILD_MEMORY_CAP = 1024 * 1024


def partition_name(table: str, catalog_id: int) -> str:
    """The catalog's partition of a vector table (migration 0009's ``create_vector_partitions()`` names it so)."""
    return f"{table}_c{catalog_id}"


def index_name(table: str, catalog_id: int, dim: int) -> str:
    return f"{table}_hnsw_{catalog_id}_{dim}"


def in_transaction(conn: psycopg.Connection[Any]) -> bool:
    """True inside a transaction block, where CREATE/DROP INDEX CONCURRENTLY cannot run, and behind a transaction
    pooler (``_setup.pooled``), where :func:`maintenance_lock` opens one: the session's lock, and a build's memory,
    would stay on whichever server connection the pooler ran their statement on."""
    return conn.info.transaction_status != TransactionStatus.IDLE or not conn.autocommit or pooled(conn)


def _part(value: Any) -> sql.Composable:
    """Names as identifiers, numbers as literals; SQL keywords (already sql.SQL, from a fixed list) as they are."""
    if isinstance(value, sql.Composable):
        return value
    return sql.Identifier(value) if isinstance(value, str) else sql.Literal(value)


def _ddl(block: str, *, concurrently: bool = False, **parts: Any) -> sql.Composed:
    """A DDL template of ``sql/vectors.sql`` with names as identifiers, numbers as literals (:func:`_part`)."""
    return sql.SQL(query(block)).format(
        concurrently=sql.SQL("concurrently" if concurrently else ""),
        **{k: _part(v) for k, v in parts.items()},
    )


def create_index_ddl(
    table: str,
    catalog_id: int,
    dim: int,
    *,
    concurrently: bool,
    vtype: str,
    ef_construction: int = HNSW_EF_CONSTRUCTION,
) -> sql.Composed:
    """The HNSW index of the catalog's partition of ``table`` for dimension ``dim``, on the vectors cast to ``vtype``
    (:func:`index_type` says which; ``ef_construction``: only ``bench/hnsw_build.py`` builds another)."""
    if vtype not in ("vector", "halfvec"):
        raise ValueError(f"no HNSW index on {vtype!r}")
    return _ddl(
        "create_vector_index",
        concurrently=concurrently,
        name=index_name(table, catalog_id, dim),
        partition=partition_name(table, catalog_id),
        dim=dim,
        vtype=sql.SQL(vtype),
        ef_construction=ef_construction,
    )


@contextmanager
def maintenance_lock(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """Serialize toolstore's index builds and ANALYZEs across sessions and catalogs (one schema's): two of them on the
    same shared table deadlock or fail ("tuple concurrently updated") when run at once. Routes never take it.

    The (session-level) advisory lock is tried, never waited for inside a statement or a transaction: a CREATE
    INDEX CONCURRENTLY waits for every open transaction, a blocked lock request included, which would deadlock.
    Inside the caller's own transaction nothing is taken (Postgres' deadlock detection covers the rare clash); behind a
    transaction pooler the work runs in a transaction of its own, as it would in a caller's.
    """
    if pooled(conn) and conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            yield
        return
    if in_transaction(conn):
        yield
        return
    deadline = time.monotonic() + MAINTENANCE_WAIT
    pause = 0.02
    while not conn.execute(query("maintenance_try_lock")).fetchone()[0]:  # type: ignore[index]
        if time.monotonic() > deadline:
            raise DatabaseError(
                f"another index build or ANALYZE held toolstore's maintenance lock for {MAINTENANCE_WAIT:g} s"
            )
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.5)
    try:
        yield
    finally:
        try:
            conn.execute(query("maintenance_unlock"))
        except psycopg.Error:  # the connection is gone, and the session's lock with it
            pass


def build_memory_kb(rows: int, dim: int) -> int:
    """maintenance_work_mem (kB) that holds an HNSW build's whole graph of ``rows`` vectors: 4 bytes a dimension plus
    its graph node, about 830 bytes at m = 16 (Postgres' default 64 MB held 28,370 vectors of 384 dimensions on
    ``vector``), with headroom; the ``halfvec`` graphs built since migration 0015 need 2 bytes a dimension, so this is
    more than enough. At most :data:`HNSW_BUILD_MEMORY_CAP`."""
    return min(HNSW_BUILD_MEMORY_CAP, -(-rows * (4 * dim + 1024) // 1024))


@contextmanager
def build_memory(conn: psycopg.Connection[Any], table: str, catalog_id: int, dim: int) -> Iterator[None]:
    """Give the HNSW build of the catalog's ``table`` room for its whole graph (:func:`build_memory_kb`), for that build
    only: a graph that does not fit is finished on disk, slower (``python bench/hnsw_build.py --ef-construction 64
    --server-memory``, 30k vectors of 384 dimensions: 6.3 s against 7.0 s at Postgres' default 64 MB)."""
    row = conn.execute(_ddl("partition_vectors", partition=partition_name(table, catalog_id), dim=dim)).fetchone()
    assert row is not None
    local = in_transaction(conn)
    raised = conn.execute(query("raise_build_memory"), {"kb": build_memory_kb(row[0], dim), "local": local}).fetchone()
    assert raised is not None
    try:
        yield
    finally:
        if not local:
            conn.execute(query("restore_build_memory"), {"previous": raised[0]})


def owns_partitions(conn: psycopg.Connection[Any], catalog_id: int) -> bool:
    """Whether this session's role may build and drop the catalog's HNSW indexes: CREATE/DROP INDEX need the owner of
    its partitions, which a role granted write access (``ToolStore.grant(role, write=True)``) is not. Such a role's
    writes leave the indexes as they are (dense retrieval searches exactly where one is missing), with a warning."""
    partitions = [partition_name(table, catalog_id) for table in VECTOR_TABLES]
    row = conn.execute(query("owns_vector_partitions"), {"partitions": partitions}).fetchone()
    return row is None or bool(row[0])


def drop_indexes(conn: psycopg.Connection[Any], catalog_id: int, *, tables: Sequence[str] = VECTOR_TABLES) -> None:
    """Drop the catalog's HNSW indexes on ``tables``, concurrently unless inside a transaction, where nothing is
    dropped (that would lock every catalog's routes until commit); nor by a role that does not own them (then the
    bulk load goes into the index row by row)."""
    if in_transaction(conn):
        return
    found = [table for _, table, _ in conn.execute(query("vector_indexes"), {"catalog": catalog_id}).fetchall()]
    if not set(found) & set(tables):
        return
    if not owns_partitions(conn, catalog_id):
        logger.warning(
            "catalog id %s: HNSW indexes not dropped before a bulk load: role %r does not own the catalog's vector "
            "tables (DROP INDEX needs their owner); the load updates them row by row",
            catalog_id,
            conn.info.user,
        )
        return
    with maintenance_lock(conn):
        for name, table, _ in conn.execute(query("vector_indexes"), {"catalog": catalog_id}).fetchall():
            if table in tables:
                conn.execute(_ddl("drop_vector_index", name=name, concurrently=True))


def drop_partitions(conn: psycopg.Connection[Any]) -> None:
    """Detach (concurrently: routes of other catalogs never wait) and drop the partitions of catalogs that no longer
    exist, and finish any detach an interrupted session left pending. Outside a transaction only; inside one, they
    stay (empty) for the next drop."""
    if in_transaction(conn):
        return
    with maintenance_lock(conn):
        for name, parent, pending in conn.execute(query("orphan_partitions")).fetchall():
            if parent is not None:
                block = "finalize_detach" if pending else "detach_partition"
                conn.execute(_ddl(block, parent=parent, partition=name))
            if not _drop_detached(conn, name):
                logger.warning("%s", partitions_left(name))
                return


def _drop_detached(conn: psycopg.Connection[Any], name: str) -> bool:
    """Drop the detached partition ``name``; False when its lock on ``tools`` was not to be had. The DROP takes an
    ACCESS EXCLUSIVE lock on ``tools`` (its foreign key's triggers there go): a request waiting for it stalls every
    statement that reads ``tools`` (every catalog's routes) and deadlocks with a writer whose delete cascades into the
    partition, so it waits :data:`DROP_LOCK_WAIT` seconds at a time, :data:`DROP_TRIES` times at most."""
    for attempt in range(DROP_TRIES):
        try:
            with conn.transaction():
                conn.execute(query("drop_lock_wait"), {"wait": f"{DROP_LOCK_WAIT * 1000:g}ms"})
                conn.execute(_ddl("drop_partition", partition=name))
            return True
        except psycopg.errors.LockNotAvailable:
            time.sleep(DROP_PAUSE * (1 + attempt % 4) * (0.5 + random.random()))
    return False


def analyze_ddl(catalog_id: int, *, examples_only: bool = False) -> sql.Composed:
    """ANALYZE of the shared tables and of the catalog's partitions (not the parents: that would sample every
    catalog's partition), or of its intent examples' partition only."""
    tool_vectors, examples = (partition_name(t, catalog_id) for t in VECTOR_TABLES)
    if examples_only:
        return _ddl("analyze_examples", intent_examples=examples)
    return _ddl("analyze_tables", tool_vectors=tool_vectors, intent_examples=examples)


def index_type(conn: psycopg.Connection[Any], dim: int) -> str | None:
    """The type an HNSW index of ``dim``-dimension vectors is built on: ``vector_index_type()`` (migrations 0011 and
    0015), the rule's one home: ``halfvec`` up to 4,000 dimensions (pgvector's limit for it), None past that
    (searched exactly). The distances ``knn()`` returns come from the stored vectors, in full precision."""
    row = conn.execute(query("vector_index_type"), {"dim": dim}).fetchone()
    assert row is not None
    return row[0]


def wanted_indexes(conn: psycopg.Connection[Any], info: CatalogInfo, found: Mapping[str, bool]) -> dict[str, str]:
    """The catalog's HNSW indexes that should exist, each with the type it is built on: one per vector table holding
    at least :data:`HNSW_MIN_ROWS` of its rows, kept (if it exists) down to half that (no rebuilding back and forth
    around the threshold). The type is :func:`index_type`'s, which ``knn()`` orders by."""
    assert info.embed_dim is not None
    params = {"catalog": info.id, "cap": HNSW_MIN_ROWS, "dim": info.embed_dim}
    row = conn.execute(query("catalog_vector_rows"), params).fetchone()
    assert row is not None
    *counts, vtype = row
    wanted: dict[str, str] = {}
    for table, rows in zip(VECTOR_TABLES, counts):
        name = index_name(table, info.id, info.embed_dim)
        if vtype is not None and (rows >= HNSW_MIN_ROWS or (name in found and rows >= HNSW_MIN_ROWS // 2)):
            wanted[name] = vtype
    return wanted


def ensure_indexes(conn: psycopg.Connection[Any], info: CatalogInfo) -> None:
    """Make the catalog's HNSW indexes for its dimension (:func:`wanted_indexes`) exist and be valid, and drop the
    others (other dimensions after a model switch, tables grown small). Concurrently outside a transaction; inside
    one, missing indexes are built in place and nothing is dropped."""
    if info.embed_dim is None:
        return
    found = {name: valid for name, _, valid in conn.execute(query("vector_indexes"), {"catalog": info.id})}
    if found == dict.fromkeys(wanted_indexes(conn, info, found), True):
        return  # the usual case, decided without the maintenance lock
    if not owns_partitions(conn, info.id):
        logger.warning(
            "catalog %r: HNSW indexes not built or repaired: role %r does not own the catalog's vector tables "
            "(CREATE INDEX needs their owner), so dense retrieval searches them exactly meanwhile; %s",
            info.name,
            conn.info.user,
            owner_builds(info.name),
        )
        return
    with maintenance_lock(conn):
        _ensure_indexes(conn, info)


def _ensure_indexes(conn: psycopg.Connection[Any], info: CatalogInfo) -> None:
    assert info.embed_dim is not None
    concurrently = not in_transaction(conn)
    found = {name: valid for name, _, valid in conn.execute(query("vector_indexes"), {"catalog": info.id})}
    wanted = wanted_indexes(conn, info, found)
    for table in VECTOR_TABLES:
        name = index_name(table, info.id, info.embed_dim)
        if name not in wanted:
            continue
        if found.get(name) is False and concurrently:  # an interrupted concurrent build left it invalid
            conn.execute(_ddl("drop_vector_index", name=name, concurrently=True))
            found.pop(name)
        if name not in found:
            with build_memory(conn, table, info.id, info.embed_dim):
                ddl = create_index_ddl(table, info.id, info.embed_dim, concurrently=concurrently, vtype=wanted[name])
                conn.execute(ddl)
    if concurrently:
        for name in set(found) - wanted.keys():
            conn.execute(_ddl("drop_vector_index", name=name, concurrently=True))
    elif pooled(conn) and (left := sorted(name for name, valid in found.items() if name not in wanted or not valid)):
        logger.warning("%s", left_behind_pooler(info.name, left))


def ensure_catalog_indexes(conn: psycopg.Connection[Any], catalog: str) -> None:
    """The catalog's HNSW indexes built (or repaired); a concurrent build can be a deadlock victim (against an
    ANALYZE or another catalog's build on the same table), so it is retried: each try starts from what exists."""

    def build() -> None:
        info = catalog_info(conn, catalog)
        if info is not None:
            ensure_indexes(conn, info)

    retry_conflicts(build)


def restore_indexes(conn: psycopg.Connection[Any], catalog: str, error: BaseException) -> None:
    """After a bulk write failed with ``error``: put back the indexes dropped before it. ``error`` stays what the
    caller sees; when the build fails too (the database gone, a build that kept conflicting), ``error`` carries a
    note saying so and how to build them (PEP 678's ``__notes__``, which a traceback prints), also logged as a
    warning."""
    try:
        ensure_catalog_indexes(conn, catalog)
    except Exception as failure:  # never in place of the write's own error
        note = (
            f"catalog {catalog!r}'s HNSW indexes, dropped before this write, were not built again "
            f"({type(failure).__name__}: {first_line(failure)}): its dense retrieval searches exactly meanwhile; "
            f"{rebuild(catalog)}"
        )
        add_notes(error, note)
        logger.warning("%s", note)


def analyze(conn: psycopg.Connection[Any], catalog: str, *, examples_only: bool = False) -> None:
    """Fresh planner statistics of the shared tables and the catalog's partitions after a bulk write (of the columns
    statements select or join by: ``sql/catalog.sql``, ``analyze_tables``): without them the BM25 joins start from
    the postings. ``examples_only``: of the catalog's intent examples only (all that a
    write of examples changes; the tools' table alone took 0.25 s at 10k tools).

    Best effort after a committed write: ANALYZE can be a deadlock victim against a concurrent index build on the
    same table; it is retried, and then skipped (autovacuum catches up) rather than failing the write.
    """

    info = catalog_info(conn, catalog)
    if info is None:
        raise unknown_catalog(catalog)

    def run() -> None:
        with maintenance_lock(conn):
            conn.execute(analyze_ddl(info.id, examples_only=examples_only))

    try:
        retry_conflicts(run)
    except DatabaseError as exc:
        logger.info("ANALYZE after a bulk write skipped: %s", exc)


def indexes_after_write(conn: psycopg.Connection[Any], catalog: str) -> None:
    """:func:`ensure_catalog_indexes` after a write: done again on a fresh connection when the write's committed and its
    connection is lost (``_commits.follow_up``)."""
    what = f"building (or repairing) catalog {catalog!r}'s HNSW indexes"
    later = "the catalog's next write does it; dense retrieval searches its vectors exactly meanwhile"
    follow_up(conn, FollowUp(lambda c: ensure_catalog_indexes(c, catalog), what, later))


def analyze_after_write(conn: psycopg.Connection[Any], catalog: str, *, examples_only: bool = False) -> None:
    """:func:`analyze` after a bulk write, done again on a fresh connection as :func:`indexes_after_write`."""
    later = "autovacuum refreshes them in time (ToolStore.analyze() does it now)"
    step = partial(analyze, catalog=catalog, examples_only=examples_only)
    follow_up(conn, FollowUp(step, "refreshing the planner's statistics (ANALYZE)", later))


def partitions_after_drop(conn: psycopg.Connection[Any]) -> None:
    """:func:`drop_partitions` after a catalog's drop, done again on a fresh connection as
    :func:`indexes_after_write`."""

    def step(conn: psycopg.Connection[Any]) -> None:
        retry_conflicts(lambda: drop_partitions(conn))

    later = "the next drop_catalog detaches and drops them (they are empty)"
    follow_up(conn, FollowUp(step, "detaching and dropping the dropped catalog's vector partitions", later))
