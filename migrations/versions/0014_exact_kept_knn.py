"""knn()'s exact search over a filter's kept tools is exact again: it cannot be answered by the HNSW index.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24

route() with a filter that keeps at most 2,000 tools searches their vectors exactly (``route_kept()`` lists them,
migration 0008): a HNSW walk filtered afterwards returns too few of a small set. But the exact query ordered by the
distance, the very expression the catalog's partial HNSW index serves, so the planner was free to walk the index
(``ef_search`` rows of the whole catalog, by its estimate cheaper than a key lookup per kept tool once a few dozen
tools are kept at 384 dimensions) and join the kept set afterwards. At 10k tools the dense list then held 1 tool of
a provider's 42, 0 of 400 kept tools and 5 of 2,000, silently. Where it did not, it could scan the whole table for a
hash join (20 ms for 30k intent examples at 10k tools, against 3.6 ms by key). Each kept tool's vectors are now
read by key in a lateral subquery that ``OFFSET 0`` keeps from being flattened, and sorted above it, where no index
can supply the order. ``tests/test_filters.py``
``test_knn_over_a_kept_set_is_the_exact_nearest`` compares knn() with a sequential scan.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# knn() as migration 0011 wrote it, but its kept-set branch looks each kept tool's vectors up by key.
KNN = """
create or replace function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                               p_kept bigint[], p_filter route_filter)
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
    if p_filter is null then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2', p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit;
    elsif p_kept is not null then
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
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v join tools t on t.catalog_id = %2$s and t.pk = v.tool_pk '
            'where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and route_keeps(t.id, t.categories, t.provider, t.tags, $3) '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2) s order by s.distance',
            p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit, p_filter;
    end if;
end
$$;

"""

# -- downgrade: knn() as migration 0011 wrote it --------------------------------------------------------------------

KNN_0011 = """
create or replace function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                               p_kept bigint[], p_filter route_filter)
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
    if p_filter is null then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2', p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit;
    elsif p_kept is not null then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from unnest($3::bigint[]) k (pk) join %3$I v on v.catalog_id = %2$s and v.tool_pk = k.pk '
            'where vector_dims(v.embedding) = %1$s '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept;
    else
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v join tools t on t.catalog_id = %2$s and t.pk = v.tool_pk '
            'where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and route_keeps(t.id, t.categories, t.provider, t.tags, $3) '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2) s order by s.distance',
            p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit, p_filter;
    end if;
end
$$;

"""


def upgrade() -> None:
    op.execute(KNN)


def downgrade() -> None:
    op.execute(KNN_0011)
