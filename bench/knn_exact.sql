-- Variant (dense43): knn() with exact search for every unfiltered k-NN (full-precision distance, ties by tool pk): no HNSW index used.
-- knn_v, a copy of knn() (migration 0016) in the variant session's pg_temp, is what the route block calls.
-- Run: python bench/route.py --sizes 1000,4076,10000 --no-import --variants bench/knn_exact.sql

-- name: setup
CREATE OR REPLACE FUNCTION pg_temp.knn_v(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer, p_kept bigint[], p_dropped boolean DEFAULT false)
 RETURNS TABLE(tool_pk bigint, distance double precision)
 LANGUAGE plpgsql
 ROWS 40
 SET search_path TO 'toolstore', 'public'
AS $function$
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
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
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

-- name: route
with
-- The caller read the catalog's settings at `version`: route_catalog() raises SQLSTATE TS001 when the catalog has
-- changed since (or is gone), so stale weights or a switched model never route. Checked before anything else runs.
checked as (
    select route_catalog(%(catalog)s, %(version)s) as ok
),
-- The filters (migration 0008): route_keeps(..., f) is their one home (f null: no filter). route_kept() checks them
-- once the version is checked (TS002 names values that match no tool) and lists the kept tools' pks (migration 0014),
-- or, where that is the smaller set, the dropped ones (`dropped`, migration 0016); the retrievers keep a tool when its
-- membership in the set differs from `dropped`. No row when unfiltered.
filter as (
    select case when %(filtered)s::boolean
                then route_filter(%(allow)s::text[], %(block)s::text[], %(categories)s::text[], %(providers)s::text[],
                                  %(tags)s::text[]) end as f
),
kept as (
    select k.pks, k.dropped
    from route_kept(%(catalog)s, %(allow)s::text[], %(block)s::text[], %(categories)s::text[], %(providers)s::text[],
                    %(tags)s::text[]) k
    where (select ok from checked) and %(filtered)s::boolean
),
fields (field, weight) as (
    values (1::smallint, %(w_name)s::float8),
           (2::smallint, %(w_description)s::float8),
           (3::smallint, %(w_expansion)s::float8)
),
-- Part 0 is the request, parts 1, 2, ... its sub-requests (the clauses of a compound request, _split.py). Each part
-- is retrieved alone by the five request retrievers (each part reads the postings of its own terms).
parts as (
    select (u.nth - 1)::integer as part, u.text, u.qvec
    from unnest(%(part_texts)s::text[], %(part_vecs)b::vector[]) with ordinality as u (text, qvec, nth)
    where u.text is not null
),
part_terms as (
    select distinct p.part, lexeme
    from parts p
    cross join lateral unnest(tsvector_to_array(to_tsvector('english'::regconfig, p.text))) as lexeme
),
terms as (
    select distinct lexeme from part_terms
),
stats as (
    select s.field, s.n::float8 as n, s.total_len::float8 / greatest(s.n, 1) as avgdl
    from field_stats s
    where s.catalog_id = %(catalog)s
),
-- The query's terms per field, with their document frequency. df is a scalar subquery, one key lookup per term and
-- field: planned generically, a join could hash all of lexeme_stats. Materialized, so that qterms gets df as a column
-- and the planner can inline bm25_idf() (an expensive argument used twice keeps a SQL function from being inlined).
qdf as materialized (
    select f.field, t.lexeme, st.n, st.avgdl,
           (select d.df from lexeme_stats d
            where d.catalog_id = %(catalog)s and d.field = f.field and d.lexeme = t.lexeme) as df
    from fields f
    join stats st on st.field = f.field
    cross join terms t
    where f.weight > 0
),
-- ... and its idf, once per term: a posting scores idf * bm25_tf(), which is bm25_term() (migration 0012).
qterms as (
    select q.field, q.lexeme, q.df, q.n, q.avgdl, bm25_idf(q.df, q.n) as idf
    from qdf q
    where q.df is not null
),
-- BM25 is exact: every posting of every query term is read. Each part's best n tools per field, with ties at the
-- n-th score, come from a sort per part and field, not one sort of every matching tool of every field (tens of
-- thousands at 100k tools). The lateral reads the part's terms in that field from arrays (unnest), so the generic
-- plan expects about as many postings as it reads and sums them per tool in a hash table; through a join with the
-- term lists it expected one row, and sorted every posting by tool to sum them (0.8 ms of the statement at 10k
-- tools: bench/PROFILE.md). The filters apply before the cut, as membership in the kept (or dropped) set (a hashed
-- subplan), not a lookup of each matching tool's row (thousands: 2,207 for one request at 10k tools, about 4 us each).
-- Where one common term holds most of a part's postings in a field (at 100k tools, 55k of 92k for one request),
-- bm25_top() (migration 0017) returns the same rows without summing that term's postings for every tool (MaxScore).
coarse as (
    select pf.part, pf.field, s.tool_pk, s.score
    from (select pt.part, t.field, t.avgdl, array_agg(t.lexeme) as lexemes, array_agg(t.idf) as idfs,
                 array_agg(t.df::float8) as dfs,
                 max(t.df) >= %(heavy_postings)s and max(t.df) >= %(heavy_share)s * sum(t.df) as heavy
          from part_terms pt
          join qterms t on t.lexeme = pt.lexeme
          group by pt.part, t.field, t.avgdl) pf
    cross join lateral (
        select b.tool_pk, b.score
        from bm25_top(%(catalog)s::integer, pf.field, pf.avgdl, pf.lexemes, pf.idfs, pf.dfs, %(n)s::integer,
                      (select k.pks from kept k), coalesce((select k.dropped from kept k), false)) b
        where pf.heavy
        union all
        select p.tool_pk, round(sum(u.idf * bm25_tf(p.tf, p.dl, pf.avgdl)) * 1e9) as score
        from unnest(pf.lexemes, pf.idfs) as u (lexeme, idf)
        cross join lateral (
            select p.tool_pk, p.tf, p.dl
            from postings p
            where p.catalog_id = %(catalog)s and p.field = pf.field and p.lexeme = u.lexeme
        ) p
        where not pf.heavy
        group by p.tool_pk
        having not %(filtered)s::boolean
            or (p.tool_pk in (select unnest(k.pks) from kept k)) <> (select k.dropped from kept k)
        order by 2 desc
        fetch first %(n)s rows with ties
    ) s
),
dense as (
    select p.part, v.tool_pk, v.distance
    from parts p
    cross join lateral pg_temp.knn_v('tool_vectors', %(catalog)s, %(dim)s, p.qvec, %(n)s, (select pks from kept),
                           (select dropped from kept)) v
    where %(w_dense)s::float8 > 0
),
neighbours as (
    select p.part, e.tool_pk, e.distance,
           row_number() over (partition by p.part, e.tool_pk order by e.distance) as nth
    from parts p
    cross join lateral pg_temp.knn_v('intent_examples', %(catalog)s, %(dim)s, p.qvec, %(n_examples)s,
                           (select pks from kept), (select dropped from kept)) e
    where %(w_intent)s::float8 > 0
),
-- The request retrievers' rows per part, each scored so that higher is better: BM25 per field (signals 1-3), the
-- negated cosine distance (4), the summed similarity of the tool's nearest intent examples (5).
retrieved as (
    select part, field as signal, tool_pk, score from coarse
    union all
    select part, 4::smallint, tool_pk, -distance from dense
    union all
    select part, 5::smallint, tool_pk, round(sum(1 - distance) * 1e9)
    from neighbours
    where nth <= %(per_tool)s
    group by part, tool_pk
),
-- Each part's ranks per retriever. Ties at equal scores are broken by id, and only tied rows look their id up
-- (`tied`; a CASE runs its subquery only when it holds): one key lookup of tools costs about 5 us, and ranking every
-- retrieved row by id took about 1 ms of the statement at 10k tools. The id is a scalar subquery, not a join: planned
-- generically (toolstore/_connect.py), hundreds of rows are expected, and a join would hash all of tools.
ranked as (
    select r.part, r.signal, r.tool_pk,
           row_number() over (partition by r.part, r.signal order by r.score desc,
                              case when r.tied then (select t.id from tools t
                                                     where t.catalog_id = %(catalog)s and t.pk = r.tool_pk) end) as rank
    from (select r.*, count(*) over (partition by r.part, r.signal, r.score) > 1 as tied from retrieved r) r
),
-- The calls looked back on, latest first (distance 0): the session's last ones from its log, then those passed in.
history as (
    select h.tool_id, (row_number() over (order by h.source desc, h.pos desc) - 1)::integer as distance
    from (
        select 1 as source, c.seq as pos, c.tool_id
        from (select l.seq, l.tool_id
              from session_calls l
              where l.catalog_id = %(catalog)s and l.session_id = %(session)s::text
              order by l.seq desc
              limit %(history)s) c
        union all
        select 2, u.pos, u.tool_id
        from unnest(%(calls)s::text[]) with ordinality as u (tool_id, pos)
    ) h
    order by distance
    limit %(history)s
),
recent as (
    select 6::smallint as signal, t.pk as tool_pk,
           row_number() over (order by round(r.score * 1e9) desc, t.id) as rank
    from (select tool_id, sum(power(%(recent_decay)s::float8, distance)) as score
          from history
          where distance < %(recent_calls)s
          group by tool_id) r
    join tools t on t.catalog_id = %(catalog)s and t.id = r.tool_id
    where %(w_recent)s::float8 > 0
      and route_keeps(t.id, t.categories, t.provider, t.tags, (select f from filter))
),
-- P(next | call) from the catalog's transition counts, smoothed, summed over the latest calls (decayed).
transition as (
    select 7::smallint as signal, t.pk as tool_pk,
           row_number() over (order by round(s.score * 1e9) desc, t.id) as rank
    from (
        select x.next_tool, sum(power(%(recent_decay)s::float8, x.distance) * x.n / (x.total + %(smoothing)s::float8))
               as score
        from (select h.distance, tr.next_tool, tr.n::float8 as n,
                     sum(tr.n) over (partition by h.distance)::float8 as total
              from history h
              join tool_transitions tr on tr.catalog_id = %(catalog)s and tr.prev_tool = h.tool_id
              where h.distance < %(transition_calls)s and %(w_transition)s::float8 > 0) x
        group by x.next_tool
    ) s
    join tools t on t.catalog_id = %(catalog)s and t.id = s.next_tool
    where route_keeps(t.id, t.categories, t.provider, t.tags, (select f from filter))
),
context_neighbours as (
    select e.tool_pk, e.distance,
           row_number() over (partition by e.tool_pk order by e.distance) as nth
    from pg_temp.knn_v('intent_examples', %(catalog)s, %(dim)s, %(cvec)b::vector, %(n_examples)s, (select pks from kept),
             (select dropped from kept)) e
    where %(w_context)s::float8 > 0
),
context as (
    select 8::smallint as signal, s.tool_pk,
           row_number() over (order by round(s.score * 1e9) desc, t.id) as rank
    from (
        select tool_pk, sum(1 - distance) as score
        from context_neighbours
        where nth <= %(per_tool)s
        group by tool_pk
    ) s
    join tools t on t.catalog_id = %(catalog)s and t.pk = s.tool_pk
),
signals as (
    select part, signal, tool_pk, rank from ranked where rank <= %(n)s
    union all
    select 0, signal, tool_pk, rank from recent where rank <= %(n)s
    union all
    select 0, signal, tool_pk, rank from transition where rank <= %(n)s
    union all
    select 0, signal, tool_pk, rank from context where rank <= %(n)s
),
-- Each part's weighted RRF sum per tool, with the tool's rank in each signal of the request (part 0) ...
part_fused as (
    select s.part, s.tool_pk,
           sum(case s.signal
                   when 1 then %(w_name)s::float8
                   when 2 then %(w_description)s::float8
                   when 3 then %(w_expansion)s::float8
                   when 4 then %(w_dense)s::float8
                   when 5 then %(w_intent)s::float8
                   when 6 then %(w_recent)s::float8
                   when 7 then %(w_transition)s::float8
                   else %(w_context)s::float8
               end / (%(k_rrf)s::float8 + s.rank)) as score,
           min(s.rank) filter (where s.signal = 1) as rank_name,
           min(s.rank) filter (where s.signal = 2) as rank_description,
           min(s.rank) filter (where s.signal = 3) as rank_expansion,
           min(s.rank) filter (where s.signal = 4) as rank_dense,
           min(s.rank) filter (where s.signal = 5) as rank_intent,
           min(s.rank) filter (where s.signal = 6) as rank_recent,
           min(s.rank) filter (where s.signal = 7) as rank_transition,
           min(s.rank) filter (where s.signal = 8) as rank_context
    from signals s
    group by s.part, s.tool_pk
),
-- ... and the fused score: the request's sum plus w_split times the tool's best sum in one sub-request (`part`:
-- which one, for explain), so each clause of a compound request gets its best tools near the top.
fused as (
    select f.tool_pk,
           coalesce(max(f.score) filter (where f.part = 0), 0)
               + %(w_split)s::float8 * coalesce(max(f.score) filter (where f.part > 0), 0) as score,
           max(f.rank_name) filter (where f.part = 0) as rank_name,
           max(f.rank_description) filter (where f.part = 0) as rank_description,
           max(f.rank_expansion) filter (where f.part = 0) as rank_expansion,
           max(f.rank_dense) filter (where f.part = 0) as rank_dense,
           max(f.rank_intent) filter (where f.part = 0) as rank_intent,
           max(f.rank_recent) filter (where f.part = 0) as rank_recent,
           max(f.rank_transition) filter (where f.part = 0) as rank_transition,
           max(f.rank_context) filter (where f.part = 0) as rank_context,
           (array_agg(f.part order by f.score desc, f.part) filter (where f.part > 0))[1] as part,
           max(f.score) filter (where f.part > 0) as part_score
    from part_fused f
    group by f.tool_pk
),
exact as (
    select t.pk as tool_pk
    from tools t
    where t.catalog_id = %(catalog)s
      and (lower(t.id) = any (%(identifiers)s::text[]) or lower(t.name) = any (%(identifiers)s::text[]))
      and route_keeps(t.id, t.categories, t.provider, t.tags, (select f from filter))
),
-- Anchors (migration 0008): per tool, the summed boosts (and ids) of the catalog's rules whose pattern matches the
-- request, added after fusion; a positive one brings in a tool no retriever returned.
anchored as (
    select a.tool_pk, sum(a.boost) as boost, array_agg(a.pk order by a.pk) as ids
    from anchors a
    where a.catalog_id = %(catalog)s and %(request)s::text ~* a.pattern
      and (not %(filtered)s::boolean
           or (select route_keeps(t.id, t.categories, t.provider, t.tags, (select f from filter))
               from tools t
               where t.catalog_id = %(catalog)s and t.pk = a.tool_pk))
    group by a.tool_pk
),
-- Avoid-when: w_avoid x (the fraction of the request's terms found in the tool's avoid-when text) of the fused score.
-- Materialized: inlined, its join with tools was planned as the inner side of a nested loop and rerun once per fused
-- tool, because the catalog's share of a database of many catalogs makes the planner expect one fused row (56 ms of
-- a route at 1,000 catalogs: bench/route.py --catalogs 1000). Skipped after one probe of tools_avoid_idx (migration
-- 0013) in a catalog where no tool has avoid-when text.
avoided as materialized (
    select f.tool_pk,
           %(w_avoid)s::float8 * f.score * count(*) / (select count(*) from part_terms where part = 0) as penalty
    from fused f
    join tools t on t.catalog_id = %(catalog)s and t.pk = f.tool_pk
    cross join lateral unnest(tsvector_to_array(t.avoid_tsv)) as l (lexeme)
    join part_terms q on q.part = 0 and q.lexeme = l.lexeme
    where %(w_avoid)s::float8 > 0
      and exists (select 1 from tools a where a.catalog_id = %(catalog)s and a.avoid_when <> '')
    group by f.tool_pk, f.score
),
adjusted as (
    select c.tool_pk, c.score - coalesce(v.penalty, 0) + coalesce(a.boost, 0) as score,
           c.rank_name, c.rank_description, c.rank_expansion, c.rank_dense, c.rank_intent, c.rank_recent,
           c.rank_transition, c.rank_context, c.part, c.part_score,
           a.boost as anchor_boost, a.ids as anchor_ids, v.penalty as avoid_penalty
    from (select * from fused
          union all
          select a.tool_pk, 0.0::float8, null, null, null, null, null, null, null, null, null, null
          from anchored a
          where a.boost > 0 and a.tool_pk not in (select tool_pk from fused)) c
    left join anchored a on a.tool_pk = c.tool_pk
    left join avoided v on v.tool_pk = c.tool_pk
),
-- How many fused rows to return: `limit`, plus one per always-on tool (they are packed on top of the routed ones,
-- so they must not use up the limit).
top_n as (
    select %(limit)s + (select count(*) from tools a where a.catalog_id = %(catalog)s and a.always_on) as n
),
-- The best top_n fused rows, ties broken by id. RRF sums tie often (one vote at the same rank in two lists), so the
-- ids are looked up only for the rows that can reach the limit: those at least as good as the top_n-th.
top as (
    select f.*
    from (select a.*, a.tool_pk in (select tool_pk from exact) as exact
          from adjusted a
          order by exact desc, round(a.score * 1e9) desc
          fetch first (select n from top_n) rows with ties) f
    join tools t on t.catalog_id = %(catalog)s and t.pk = f.tool_pk
    order by f.exact desc, round(f.score * 1e9) desc, t.id
    limit (select n from top_n)
),
picked as (
    select * from top
    union all
    select e.tool_pk, 0.0::float8, null, null, null, null, null, null, null, null, null, null, null, null, null, true
    from exact e
    where e.tool_pk not in (select tool_pk from top)
    union all
    select t.pk, 0.0::float8, null, null, null, null, null, null, null, null, null, null, null, null, null, false
    from tools t
    where t.catalog_id = %(catalog)s and t.always_on
      and t.pk not in (select tool_pk from top) and t.pk not in (select tool_pk from exact)
      and route_keeps(t.id, t.categories, t.provider, t.tags, route_filter(null, %(block)s::text[], null, null, null))
),
-- Abstention's evidence (toolstore/_abstain.py), the same on every row, when `abstain` asks for it: the lexical
-- fields on which some tool has text, the nearest tool's and the nearest intent example's cosine similarity (null:
-- that retriever did not search), and the candidates it ranks: every tool at most evidence_depth deep in one of the
-- request's retrievers, with its rank in each (the rows returned are ordered by the final score, which anchors,
-- sub-requests, avoid-when and the conversation move, and may leave out the request's own second tool).
evidence as (
    select (select array_agg(st.field order by st.field)
            from field_stats st
            join fields f on f.field = st.field
            where st.catalog_id = %(catalog)s and st.total_len > 0 and f.weight > 0) as fields,
           (select 1 - min(d.distance) from dense d where d.part = 0) as dense_sim,
           (select 1 - min(e.distance) from neighbours e where e.part = 0) as intent_sim,
           (select jsonb_agg(jsonb_build_array(t.id, f.rank_name, f.rank_description, f.rank_expansion, f.rank_dense,
                                               f.rank_intent))
            from fused f
            join tools t on t.catalog_id = %(catalog)s and t.pk = f.tool_pk
            where least(f.rank_name, f.rank_description, f.rank_expansion, f.rank_dense, f.rank_intent)
                  <= %(evidence_depth)s::integer) as candidates
    where %(abstain)s::boolean
)
select t.id, t.name, t.description, t.title, t.provider, t.parameters_json as parameters, t.categories, t.tags,
       t.keywords, t.examples, t.expansion, t.avoid_when, t.always_on, t.spec_json as spec,
       p.score, p.rank_name, p.rank_description, p.rank_expansion, p.rank_dense, p.rank_intent, p.rank_recent,
       p.rank_transition, p.rank_context, p.part, p.part_score, p.part_score * %(w_split)s::float8 as part_boost,
       p.exact, p.anchor_boost, p.anchor_ids, p.avoid_penalty,
       (select fields from evidence) as evidence_fields, (select dense_sim from evidence) as evidence_dense,
       (select intent_sim from evidence) as evidence_intent, (select candidates from evidence) as evidence_candidates
from picked p
join tools t on t.catalog_id = %(catalog)s and t.pk = p.tool_pk
where (select ok from checked) and (not %(filtered)s::boolean or exists (select from kept))
order by p.exact desc, round(p.score * 1e9) desc, t.id
