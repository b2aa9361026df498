-- Evaluation and tuning: each retriever's ranked list for one query, fetched once and fused client-side
-- (toolstore/_tune.py) for every candidate weighting. Ranks and tie-breaks are those of `route`.

-- name: eval_tools
-- Every tool in the order `route` breaks ties (`order by t.id`, the database's collation), with the
-- lower-cased id and name that exact-identifier matching compares, and the lexemes of its avoid-when text.
select t.id, lower(t.id) as id_lower, lower(t.name) as name_lower, t.always_on,
       tsvector_to_array(t.avoid_tsv) as avoid
from tools t
where t.catalog_id = %(catalog)s
order by t.id;

-- name: eval_expansion_copies
-- How many of %(texts)s are a line of one of the catalog's expansions (`toolstore expand` writes one phrase a line),
-- both compared whitespace collapsed and lower-cased.
with lines as (
    select distinct lower(regexp_replace(btrim(l.line), '\s+', ' ', 'g')) as line
    from tools t
    cross join lateral regexp_split_to_table(t.expansion, '\n') as l (line)
    where t.catalog_id = %(catalog)s and t.expansion <> ''
)
select count(*)
from unnest(%(texts)s::text[]) as r (text)
where lower(regexp_replace(btrim(r.text), '\s+', ' ', 'g')) in (select line from lines);

-- name: eval_request_lexemes
-- The lexemes of each request as `route` reads them (its `terms`), in the order given.
select tsvector_to_array(to_tsvector('english'::regconfig, u.q)) as lexemes
from unnest(%(texts)s::text[]) with ordinality as u (q, i)
order by u.i;

-- name: eval_lexical
-- The three BM25 fields' ranked lists at once (1 name, 2 description, 3 expansion), ranks <= %(n)s.
-- Same scores, rounding and tie-break as the `lexical` part of `route`.
with
terms as (
    select distinct lexeme
    from unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(query_text)s::text))) as lexeme
),
stats as (
    select s.field, s.n::float8 as n, s.total_len::float8 / greatest(s.n, 1) as avgdl
    from field_stats s
    where s.catalog_id = %(catalog)s
),
bm25 as (
    select p.field, p.tool_pk, sum(bm25_term(p.tf, p.dl, d.df, st.n, st.avgdl)) as score
    from stats st
    cross join terms q
    join lexeme_stats d on d.catalog_id = %(catalog)s and d.field = st.field and d.lexeme = q.lexeme
    join postings p on p.catalog_id = %(catalog)s and p.field = st.field and p.lexeme = q.lexeme
    group by p.field, p.tool_pk
),
ranked as (
    select b.field, t.id,
           row_number() over (partition by b.field order by round(b.score * 1e9) desc, t.id) as rank
    from bm25 b
    join tools t on t.catalog_id = %(catalog)s and t.pk = b.tool_pk
)
select field, id, rank from ranked where rank <= %(n)s order by field, rank;

-- name: eval_dense
-- The nearest tools, as the `dense` part of `route` ranks them.
select t.id, v.distance
from knn('tool_vectors', %(catalog)s, %(dim)s, %(qvec)s::vector, %(n)s, null) v
join tools t on t.catalog_id = %(catalog)s and t.pk = v.tool_pk
order by v.distance, t.id;

-- name: eval_neighbours
-- The nearest intent examples with their text (exact scan; `route` asks the HNSW index for the same
-- rows and distances). %(limit)s rows plus one per stored example whose text is in %(exclude)s, so that
-- leaving those out (a request's own example, its session's) still keeps %(limit)s.
select t.id, e.query, e.embedding <=> %(qvec)s::vector as distance
from intent_examples e
join tools t on t.catalog_id = e.catalog_id and t.pk = e.tool_pk
where e.catalog_id = %(catalog)s and e.embedding is not null
order by e.embedding <=> %(qvec)s::vector, e.pk
limit %(limit)s + (select count(*) from intent_examples x
                   where x.catalog_id = %(catalog)s and x.query = any (%(exclude)s::text[]));

-- name: eval_abstain_fields
-- The lexical fields (1 name, 2 description, 3 expansion) on which some tool has text: the retrievers abstention's
-- evidence counts (`evidence` in `route`).
select s.field
from field_stats s
where s.catalog_id = %(catalog)s and s.total_len > 0
order by s.field;
