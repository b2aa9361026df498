"""Vectors of over 2,000 dimensions get an HNSW index too: on their half-precision cast.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24

pgvector's HNSW indexes ``vector`` columns of at most 2,000 dimensions and ``halfvec`` ones of at most 4,000. A
catalog embedded by a wider model (OpenAI's text-embedding-3-large: 3,072) failed its first write past
``HNSW_MIN_ROWS`` vectors with "column cannot have more than 2000 dimensions for hnsw index", and every write after.

``vector_index_type(dim)`` is the one home of the rule: ``vector`` up to 2,000 dimensions, ``halfvec`` up to 4,000,
null above (no index: searched exactly). ``toolstore._indexes`` builds the index on ``embedding::<type>(dim)``, and
``knn()`` orders by the same expression so the planner uses it; distances are still computed in full precision.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# knn() as migration 0008 wrote it, but ordering by the indexed expression (%4$s: vector_index_type()'s type, or
# vector without an index) in its two HNSW statements.
KNN = """
create function vector_index_type(p_dim integer) returns text
language sql immutable parallel safe
return case when p_dim <= 2000 then 'vector' when p_dim <= 4000 then 'halfvec' end;

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

# -- downgrade: knn() as migration 0008 wrote it --------------------------------------------------------------------

KNN_0008 = """
create or replace function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                               p_kept bigint[], p_filter route_filter)
returns table (tool_pk bigint, distance double precision)
language plpgsql rows 40 set search_path from current as $$
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
            'order by v.embedding::vector(%1$s) <=> $1 limit $2', p_dim, p_catalog, p_table)
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
            'order by v.embedding::vector(%1$s) <=> $1 limit $2) s order by s.distance', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_filter;
    end if;
end
$$;

drop function vector_index_type(integer);
"""


def upgrade() -> None:
    op.execute(KNN)


def downgrade() -> None:
    op.execute(KNN_0008)
