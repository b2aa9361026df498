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

-- name: eval_expansion_lines
-- Which lines (numbered from 1) of which tools' expansions (`toolstore expand` writes one phrase a line) are one of
-- %(texts)s, both compared whitespace collapsed and lower-cased: tuning reads those tools' expansions without a
-- request's own texts (`_lists`), and counts the requests so copied (`_tune.expansion_copies`).
with wanted as (
    select distinct r.text, lower(regexp_replace(btrim(r.text), '\s+', ' ', 'g')) as line
    from unnest(%(texts)s::text[]) as r (text)
)
select w.text, t.pk, t.id, l.n
from tools t
cross join lateral regexp_split_to_table(t.expansion, '\n') with ordinality as l (line, n)
join wanted w on w.line = lower(regexp_replace(btrim(l.line), '\s+', ' ', 'g'))
where t.catalog_id = %(catalog)s and t.expansion <> '';

-- name: eval_request_lexemes
-- The lexemes of each request as `route` reads them (its `terms`), in the order given.
select tsvector_to_array(to_tsvector('english'::regconfig, u.q)) as lexemes
from unnest(%(texts)s::text[]) with ordinality as u (q, i)
order by u.i;

-- name: eval_lexical
-- The three BM25 fields' ranked lists at once (1 name, 2 description, 3 expansion), ranks <= %(n)s.
-- Same scores, rounding and tie-break as the `lexical` part of `route`, but for the tools %(replaced_pks)s, whose
-- expansion field is read as %(replaced_docs)s: the expansion without the request's own lines, which tuning leaves out
-- as it does its intent examples (`_lists`), with the field's statistics as they would be then (its total length,
-- each term's df). None given: the catalog as stored.
with
terms as (
    select distinct lexeme
    from unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(query_text)s::text))) as lexeme
),
replaced as (
    select r.pk, d.tsv, tsvector_to_array(d.tsv) as kept, tsvector_to_array(t.expansion_tsv) as stored,
           (select coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) from unnest(d.tsv) u) as len,
           (select coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) from unnest(t.expansion_tsv) u)
               as stored_len
    from unnest(%(replaced_pks)s::bigint[], %(replaced_docs)s::text[]) as r (pk, doc)
    join tools t on t.catalog_id = %(catalog)s and t.pk = r.pk
    cross join lateral (select to_tsvector('english'::regconfig, r.doc) as tsv) d
),
stats as materialized (  -- materialized, as dfs: a subquery in bm25_term()'s arguments would keep it from inlining
    select s.field, s.n::float8 as n,
           (s.total_len - case when s.field = 3 then (select coalesce(sum(r.stored_len - r.len), 0) from replaced r)
                               else 0 end)::float8 / greatest(s.n, 1) as avgdl
    from field_stats s
    where s.catalog_id = %(catalog)s
),
dfs as materialized (
    select d.field, d.lexeme,
           d.df - case when d.field = 3 then (select count(*) from replaced r
                                               where d.lexeme = any (r.stored) and not d.lexeme = any (r.kept))
                       else 0 end as df
    from stats st
    cross join terms q
    join lexeme_stats d on d.catalog_id = %(catalog)s and d.field = st.field and d.lexeme = q.lexeme
),
read as (  -- the query terms' postings; the replaced tools' expansions read from their new text
    select p.field, p.tool_pk, p.lexeme, p.tf, p.dl
    from stats st
    cross join terms q
    join postings p on p.catalog_id = %(catalog)s and p.field = st.field and p.lexeme = q.lexeme
    where p.field < 3 or p.tool_pk not in (select r.pk from replaced r)
    union all
    select 3::smallint, r.pk, u.lexeme, coalesce(array_length(u.positions, 1), 1), r.len
    from replaced r
    cross join lateral unnest(r.tsv) u
    join terms q on q.lexeme = u.lexeme
),
bm25 as (
    select p.field, p.tool_pk, sum(bm25_term(p.tf, p.dl, d.df, st.n, st.avgdl)) as score
    from read p
    join stats st on st.field = p.field
    join dfs d on d.field = p.field and d.lexeme = p.lexeme
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

-- name: eval_distance
-- The cosine distance of %(vector)s from %(qvec)s, as `knn` computes a stored vector's (tuning's vector of a tool
-- read without a request's own expansion lines: `_lists`).
select (%(vector)s::vector <=> %(qvec)s::vector)::double precision;

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
