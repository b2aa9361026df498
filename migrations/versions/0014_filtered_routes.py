"""Filtered routes: knn()'s search over a few kept tools is exact again, and the kept set is always listed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24

**A bug.** route() with a filter that keeps at most 2,000 tools searches their vectors exactly (migration 0008): a
HNSW walk filtered afterwards returns too few of a small set. But the exact query ordered by the distance, the very
expression the catalog's partial HNSW index serves, so the planner was free to walk the index (``ef_search`` rows of
the whole catalog; by its estimate cheaper than a key lookup per kept tool once a few dozen are kept at 384
dimensions) and join the kept set afterwards. At 10k tools the dense list held 1 tool of a provider's 42, 0 of 400
kept tools and 5 of 2,000, silently. Where it did not, it could scan the whole table for a hash join (20 ms for 30k
intent examples at 10k tools, against 3.6 ms by key). Each kept tool's vectors are now read by key in a lateral
subquery that ``OFFSET 0`` keeps from being flattened, and sorted above it, where no index can supply the order
(``tests/test_filters.py`` ``test_knn_over_a_kept_set_is_the_exact_nearest`` compares knn() with a sequential scan).

**The kept set, always listed.** ``route_kept()`` returned null past 2,000 kept tools (or for globs and blocks
alone), and route() then tested candidates row by row: a key lookup into ``tools`` per tool matching a query term
in the lexical part (2,207 for one request at 10k tools, about 4 us each) and per HNSW candidate in knn(). It now
always returns the kept tools' pks. route() tests membership through a hashed subplan, and so does knn()'s
iterative HNSW scan (past 2,000 kept); knn() takes the kept set only (its route_filter argument is gone). Many kept
tools are listed from ``tools_filter_idx`` alone, ``(catalog_id, provider)`` including the filter columns (an
index-only scan, not a read of the wide rows); it replaces ``tools_provider_idx``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def earlier(filename: str) -> ModuleType:
    """An earlier migration of this folder, loaded by its path (a module name cannot start with a digit): the
    definitions this one replaces are read from where they were written, and restored from there by the downgrade."""
    spec = importlib.util.spec_from_file_location(
        f"toolstore_revision_{filename[:4]}", Path(__file__).with_name(filename)
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def edited(text: str, old: str, new: str) -> str:
    """``text`` with its one occurrence of ``old`` replaced by ``new`` (an error if there is not exactly one)."""
    if text.count(old) != 1:
        raise RuntimeError(f"expected one occurrence of {old!r}")
    return text.replace(old, new)


def function_statement(script: str, name: str) -> str:
    """The ``create [or replace] function name(...) ... $$;`` statement of ``script``, as ``create or replace``."""
    found = re.search(rf"^create (or replace )?function {name}\(", script, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"no function {name}() in the script")
    end = script.index("\n$$;\n", found.start()) + len("\n$$;\n")
    return f"create or replace function {name}(" + script[found.end() : end]


# route_kept() as migration 0008 wrote it (restored by the downgrade; the upgrade edits it below).
ROUTE_KEPT_0008 = function_statement(earlier("0008_controls.py").FILTERS, "route_kept")

# Where 0008's route_kept() gave up (null past 2,000 kept tools, or for globs and blocks alone), it now lists them:
# through the providers' entries of tools_filter_idx when providers are given, else by testing every tool. 0008's
# 2,000 stays the line below which the smallest filter's index lists the set; knn() has its own line between exact
# and iterative search. The list is used as a set (membership, exact search by key), so it is not sorted.
GAVE_UP_0008 = """    if best is null or best > 2000 then
        return null;
    end if;
"""
LISTS_MANY = """    if best is null or best > 2000 then
        if p_providers is null then
            -- Many kept without a providers filter, or only globs and blocks: every tool of the catalog is tested,
            -- read from tools_filter_idx alone (an index-only scan of the filter columns, not of the wide rows).
            execute 'select coalesce(array_agg(t.pk), ''{}'') from tools t where t.catalog_id = $1 '
                    'and route_keeps(t.id, t.categories, t.provider, t.tags, $2)'
            into kept using p_catalog, f;
            return kept;
        end if;
        driver := 'providers';  -- many kept through the providers: their entries of tools_filter_idx
    end if;
"""


ROUTE_KEPT = edited(
    edited(ROUTE_KEPT_0008, GAVE_UP_0008, LISTS_MANY), "array_agg(t.pk order by t.pk)", "array_agg(t.pk)"
)

# knn() as migration 0011 wrote it (restored by the downgrade), without the vector_index_type() it created first.
KNN_0011 = function_statement(earlier("0011_wide_vectors.py").KNN, "knn")


# knn() filtered by the kept set alone (its route_filter argument is gone): exact by key up to 2,000 kept tools,
# else an iterative HNSW scan probing the set.
KNN = """
create function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                    p_kept bigint[])
returns table (tool_pk bigint, distance double precision)
language plpgsql rows 40 set search_path from current as $$
declare
    indexed text := coalesce(vector_index_type(p_dim), 'vector');
begin
    if p_query is null or p_dim is null or p_limit <= 0 then
        return;
    end if;
    if p_table not in ('tool_vectors', 'intent_examples') then
        raise exception 'knn: unknown table %', p_table;
    end if;
    perform set_config('hnsw.ef_search', least(greatest(p_limit, 40), 1000)::text, true);
    if p_kept is null then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2', p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit;
    elsif cardinality(p_kept) <= 2000 then
        -- Exact: one key lookup per kept tool (a lateral subquery that OFFSET 0 keeps from being flattened), and the
        -- distances sorted above it. Flattened into a join ordered by the distance, the planner was free to answer
        -- the order with the catalog's HNSW index (ef_search rows of the whole catalog, the kept set joined
        -- afterwards) or to scan the whole table for a hash join (vector_dims()'s default selectivity hides the rows).
        return query execute format(
            'select s.tool_pk, s.distance from unnest($3::bigint[]) k (pk) '
            'cross join lateral (select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v where v.catalog_id = %2$s and v.tool_pk = k.pk and vector_dims(v.embedding) = %1$s '
            'offset 0) s '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept;
    else
        -- Many kept: an iterative HNSW scan whose rows are probed in a hash of the kept set (a hashed subplan; the
        -- OR keeps the planner from making it a join, which would lose the index order). Not `= any ($3)`: the
        -- array is a constant in this one-shot plan, and estimating its selectivity element by element took longer
        -- than the scan (29 against 13 ms for 91k kept tools at 100k, a scratch timing).
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v '
            'where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and (v.tool_pk in (select unnest($3::bigint[])) or $3 is null) '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2) s order by s.distance',
            p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit, p_kept;
    end if;
end
$$;
"""

INDEX = "create index tools_filter_idx on tools (catalog_id, provider) include (pk, id, categories, tags)"


def upgrade() -> None:
    op.execute(INDEX)
    op.execute("drop index tools_provider_idx")
    op.execute(ROUTE_KEPT)
    op.execute("drop function knn(text, integer, integer, vector, integer, bigint[], route_filter)")
    op.execute(KNN)


def downgrade() -> None:
    op.execute("create index tools_provider_idx on tools (catalog_id, provider)")
    op.execute("drop index tools_filter_idx")
    op.execute(ROUTE_KEPT_0008)
    op.execute("drop function knn(text, integer, integer, vector, integer, bigint[])")
    op.execute(KNN_0011)
