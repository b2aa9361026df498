-- Variant (dense43): knn() as migration 0016 wrote it, before 0027: without an HNSW index, a scan sorted by the
-- index's halfvec expression (each vector cast) rather than exact full-precision search.
-- The setup creates that knn() in schema bench_knn_0016, first on the variant session's search_path, so the route
-- statement, sent as route() sends it (no route block here), calls it in place of toolstore's.
-- Run: python bench/route.py --sizes 199,600,1000,1900 --no-import --variants bench/control.sql,bench/knn_0016.sql
-- Its ef_search is at least 40 (0016's), or the session's bench.ef_floor: with PGOPTIONS='-c bench.ef_floor=100' (or
-- 200) it is the HNSW-with-a-larger-ef variant measured at stop 40 (then knn_ef100.sql and knn_ef200.sql, copies of this
-- file but for that number); toolstore's own knn() reads no such setting.

-- name: setup
CREATE SCHEMA IF NOT EXISTS bench_knn_0016;
CREATE OR REPLACE FUNCTION bench_knn_0016.knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer, p_kept bigint[], p_dropped boolean DEFAULT false)
 RETURNS TABLE(tool_pk bigint, distance double precision)
 LANGUAGE plpgsql
 ROWS 40
 SET search_path TO 'toolstore', 'public'
AS $function$
declare
    indexed text := coalesce(vector_index_type(p_dim), 'vector');
    ef_floor integer := coalesce(nullif(current_setting('bench.ef_floor', true), '')::integer, 40);
begin
    if p_query is null or p_dim is null or p_limit <= 0 then
        return;
    end if;
    if p_table not in ('tool_vectors', 'intent_examples') then
        raise exception 'knn: unknown table %', p_table;
    end if;
    perform set_config('hnsw.ef_search', least(greatest(p_limit, ef_floor), 1000)::text, true);
    if p_kept is null then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2', p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit;
    elsif not coalesce(p_dropped, false) and cardinality(p_kept) <= 2000 then
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
        -- Many kept, or a dropped set: an iterative HNSW scan whose rows are probed in a hash of the set (a hashed
        -- subplan), kept when their membership differs from p_dropped: compared with the flag, the test is
        -- no top-level IN the planner could make a join, which would lose the index order. Not `= any ($3)`: the
        -- array is a constant in this one-shot plan, and estimating its selectivity element by element took longer
        -- than the scan (29 against 13 ms for 91k kept tools at 100k, a scratch timing).
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v '
            'where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and (v.tool_pk in (select unnest($3::bigint[]))) <> $4 '
            'order by v.embedding::%4$s(%1$s) <=> $1::%4$s(%1$s) limit $2) s order by s.distance',
            p_dim, p_catalog, p_table, indexed)
        using p_query, p_limit, p_kept, coalesce(p_dropped, false);
    end if;
end
$function$
;
SELECT set_config('search_path', 'bench_knn_0016, ' || current_setting('search_path'), false);
