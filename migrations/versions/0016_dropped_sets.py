"""A filter that keeps most of a catalog is tested through the tools it drops, not the ones it keeps.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

``route_kept()`` (migration 0014) listed every kept tool, and route() tested each candidate's membership in that list
through a hash built per search: a block list keeping 9,170 of 10k tools made each request build three hashes of 9,170
pks (the lexical part's, and one in each of knn()'s iterative scans, dense and intent). Where ``route_kept()`` tests
every tool of the catalog anyway (no providers filter, and globs or blocks alone, or allow ids, categories and tags of
which even the narrowest matches more than 2,000 tools), it now returns whichever of the two sets is smaller, as ``(pks,
dropped)``: ``dropped`` is true when ``pks`` are the tools the filters leave out. ``knn()`` takes that flag
(``p_dropped``, default false): its iterative scan keeps a row when its membership differs from the flag, and the route
statement's lexical part does the same. A dropped set never takes the exact path (it is chosen only when most of the
catalog is kept).

Measured (bench/PROFILE.md, "Filtered routes that keep most of the catalog"): the route statement with ``block a*``
(9,170 of 10k tools kept) 13.0 against 16.0 ms p50, and at 100k tools 65.5 against 112.2 ms, the same rows; ``allow
a*`` (830 of 10k kept) 0.2-0.4 ms slower at 10k and 4.6 ms at 100k (it builds both sets); other filters unchanged.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _revision_0014() -> ModuleType:
    """Migration 0014, loaded by its path (a module name cannot start with a digit): the definitions this one edits
    are read from where they were written, and restored from there by the downgrade."""
    path = Path(__file__).with_name("0014_filtered_routes.py")
    spec = importlib.util.spec_from_file_location("toolstore_revision_0014", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R0014 = _revision_0014()


def edits(text: str, *changes: tuple[str, str]) -> str:
    """``text`` with each ``(old, new)`` of ``changes`` applied in turn (each ``old`` must occur exactly once)."""
    for old, new in changes:
        text = R0014.edited(text, old, new)
    return text


# route_kept(): one scan of every tool collects both sets (the test once per tool: OFFSET 0 keeps the subquery from
# being flattened, which would copy route_keeps() into both aggregates), and the smaller one is returned.
EVERY_TOOL_0014 = """\
            execute 'select coalesce(array_agg(t.pk), ''{}'') from tools t where t.catalog_id = $1 '
                    'and route_keeps(t.id, t.categories, t.provider, t.tags, $2)'
            into kept using p_catalog, f;
            return kept;"""
EVERY_TOOL = """\
            -- Both sets from one scan; the smaller is returned (dropped: the tools the filters leave out).
            execute 'select coalesce(array_agg(t.pk) filter (where t.keeps), ''{}''), '
                    'coalesce(array_agg(t.pk) filter (where not t.keeps), ''{}'') '
                    'from (select t.pk, route_keeps(t.id, t.categories, t.provider, t.tags, $2) as keeps '
                    'from tools t where t.catalog_id = $1 offset 0) t'
            into kept, left_out using p_catalog, f;
            if cardinality(left_out) < cardinality(kept) then
                return query select left_out, true;
            else
                return query select kept, false;
            end if;
            return;"""

ROUTE_KEPT = edits(
    R0014.ROUTE_KEPT,
    ("returns bigint[]\n", "returns table (pks bigint[], dropped boolean)\n"),
    ("    kept bigint[];\n", "    kept bigint[];\n    left_out bigint[];\n"),
    (EVERY_TOOL_0014, EVERY_TOOL),
    ("    return kept;\n", "    return query select kept, false;\n"),  # the list through an index: always kept
)

# knn(): the flag, a dropped set kept off the exact path, and the iterative scan's membership test against the flag.
KNN = edits(
    R0014.KNN,
    ("p_kept bigint[])\n", "p_kept bigint[], p_dropped boolean default false)\n"),
    (
        "    elsif cardinality(p_kept) <= 2000 then\n",
        "    elsif not coalesce(p_dropped, false) and cardinality(p_kept) <= 2000 then\n",
    ),
    (
        "        -- Many kept: an iterative HNSW scan whose rows are probed in a hash of the kept set (a hashed "
        "subplan; the\n        -- OR keeps the planner from making it a join, which would lose the index order).",
        "        -- Many kept, or a dropped set: an iterative HNSW scan whose rows are probed in a hash of the set (a "
        "hashed\n        -- subplan), kept when their membership differs from p_dropped: compared with the flag, the "
        "test is\n        -- no top-level IN the planner could make a join, which would lose the index order.",
    ),
    (
        "'and (v.tool_pk in (select unnest($3::bigint[])) or $3 is null) '",
        "'and (v.tool_pk in (select unnest($3::bigint[]))) <> $4 '",
    ),
    (
        "indexed)\n        using p_query, p_limit, p_kept;",
        "indexed)\n        using p_query, p_limit, p_kept, coalesce(p_dropped, false);",
    ),
)

SIGNATURE = "(integer, text[], text[], text[], text[], text[])"


def upgrade() -> None:
    op.execute(f"drop function route_kept{SIGNATURE}")
    op.execute(ROUTE_KEPT)
    op.execute("drop function knn(text, integer, integer, vector, integer, bigint[])")
    op.execute(KNN)


def downgrade() -> None:
    op.execute("drop function knn(text, integer, integer, vector, integer, bigint[], boolean)")
    op.execute(R0014.KNN)
    op.execute(f"drop function route_kept{SIGNATURE}")
    op.execute(R0014.ROUTE_KEPT)
