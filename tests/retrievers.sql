-- The retrievers one at a time, for tests (and bench/route.py) to check the route statement against.
-- Same parameters as `route` in sql/route.sql; load with toolstore._sql.parse_blocks.

-- name: bm25_field
-- One lexical field's BM25 scores for the query (parameter `field`: 1 name, 2 description, 3 expansion).
with
terms as (
    select distinct lexeme
    from unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(query_text)s::text))) as lexeme
),
stats as (
    select s.n::float8 as n, s.total_len::float8 / greatest(s.n, 1) as avgdl
    from field_stats s
    where s.catalog_id = %(catalog)s and s.field = %(field)s
),
scored as (
    select t.id, sum(bm25_term(p.tf, p.dl, d.df, st.n, st.avgdl)) as score
    from terms q
    cross join stats st
    join lexeme_stats d on d.catalog_id = %(catalog)s and d.field = %(field)s and d.lexeme = q.lexeme
    join postings p on p.catalog_id = %(catalog)s and p.field = %(field)s and p.lexeme = q.lexeme
    join tools t on t.catalog_id = %(catalog)s and t.pk = p.tool_pk
    group by t.id
)
select id, score from scored order by round(score * 1e9) desc, id;

-- name: neighbour_list
-- The nearest intent examples' tools, nearest first.
select t.id, e.distance
from knn('intent_examples', %(catalog)s, %(dim)s, %(qvec)s::vector, %(n_examples)s, null) e
join tools t on t.catalog_id = %(catalog)s and t.pk = e.tool_pk
order by e.distance, t.id;

-- name: query_lexemes
-- The query's distinct lexemes, as the route statement's `terms` part finds them.
select distinct lexeme
from unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(query_text)s::text))) as lexeme
order by lexeme;
