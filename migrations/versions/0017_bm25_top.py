"""Exact BM25 top n of one field that skips the aggregation of its commonest terms (MaxScore).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25

The route statement's lexical part sums every posting of every query term per tool, then keeps each field's best n.
At 100k tools one common term can hold most of a field's postings (55k of 92k for one request), and hashing them per
tool is most of that field's time. ``bm25_top()`` returns the same rows, found with less work:

1. The rarest terms (their postings up to ``p_budget`` together, at least one term) are summed per tool: the n-th best
   of these partial sums is a lower bound ``theta`` of the n-th best score (a score is never below a partial sum).
2. Each term's bound is its idf times ``bm25_tf_bound()`` of its highest stored impact (postings are ordered by
   impact in their key, so that is one index probe). The terms of smallest bounds, while their bounds sum below
   ``theta``, are non-essential: a tool that has none of the remaining (essential) terms scores below ``theta`` and
   cannot be among the n best.
3. The essential terms are summed per tool; ``theta`` rises to the n-th best of those sums. Only tools whose sum plus
   the non-essential bounds reaches it can still be among the n best (the candidates).
4. The candidates are scored from all their postings, in the order the full sum adds them (terms in the given order),
   so their scores are the ones the full sum gives; the best n with ties are returned.

Steps 1, 3 and 4 sum through one function, ``bm25_sums()`` (a SQL-standard body, inlined into each).

Every step compares with a margin against rounding. The route statement calls it only for a heavy field (a term with
at least ``HEAVY_POSTINGS`` postings and ``HEAVY_SHARE`` of the part's postings there, toolstore/_route.py); elsewhere
its own sum stays (forced on every field at 10k tools the statement took 12.1 against 10.1 ms). ``bm25_tf_bound()``
bounds ``bm25_tf()`` at the real average length from the impact at the reference length (``bm25_impact()``), for any
term frequency of 1 or more; a test checks it on a grid.
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UPGRADE = """
-- With r = reference length / average length, bm25_tf = 2.2 tf / ((1 - r)(tf + 0.3) + r 2.2 tf / impact), which for
-- tf >= 1 is at most 2.2 / ((1 - r) + 2.2 r / impact) when r <= 1, and 2.2 / (2.2 r / impact - 1.3 (r - 1)) when
-- r > 1; and always below 2.2. The impact is stored as a real, so it is raised by a margin first.
create function bm25_tf_bound(p_field smallint, p_impact real, p_avgdl float8) returns float8
language sql immutable parallel safe
return (select 2.2 / greatest(1, 2.2 * s.r / (p_impact * 1.000001::float8)
                                 + (1 - s.r) * case when s.r <= 1 then 1 else 1.3 end)
        from (select (case p_field when 1 then 16 when 2 then 40 else 20 end) / greatest(p_avgdl, 1e-9) as r) s);

-- Each tool's BM25 sum over terms p_lexemes (idf p_idfs) in one field, added term by term in the order given, so that
-- two calls over the same terms give the same sums to the bit. p_kept / p_dropped as for knn(): no filter when p_kept
-- is null, else tools whose membership in p_kept differs from p_dropped. A SQL-standard body: bm25_top() inlines it.
create function bm25_sums(p_catalog integer, p_field smallint, p_avgdl float8, p_lexemes text[], p_idfs float8[],
                          p_kept bigint[], p_dropped boolean)
returns table (tool_pk bigint, score float8)
language sql stable parallel safe
begin atomic
    select p.tool_pk, sum(u.idf * bm25_tf(p.tf, p.dl, p_avgdl))
    from unnest(p_lexemes, p_idfs) as u (lexeme, idf)
    cross join lateral (
        select p.tool_pk, p.tf, p.dl from postings p
        where p.catalog_id = p_catalog and p.field = p_field and p.lexeme = u.lexeme
    ) p
    where p_kept is null or (p.tool_pk in (select unnest(p_kept))) <> p_dropped
    group by p.tool_pk;
end;

-- The best p_n tools (with ties at the n-th score) of one field for terms p_lexemes with their idf and df, scored
-- as the route statement scores them: round(sum(idf * bm25_tf) * 1e9). p_kept / p_dropped as for bm25_sums().
create function bm25_top(p_catalog integer, p_field smallint, p_avgdl float8, p_lexemes text[], p_idfs float8[],
                         p_dfs float8[], p_n integer, p_kept bigint[], p_dropped boolean, p_budget float8 default 2000)
returns table (tool_pk bigint, score float8)
language plpgsql stable rows 40 set search_path from current as $$
declare
    theta float8;
    rare text[];
    rare_idfs float8[];
    essential text[];
    essential_idfs float8[];
    slack float8;
    sums bigint[];
    partial float8[];
    candidates bigint[];
begin
    -- 1. the rarest terms (their postings up to p_budget together, at least one term): the n-th best of their sums is a
    -- lower bound of the n-th best score
    select array_agg(r.lexeme), array_agg(r.idf) into rare, rare_idfs
    from (select w.lexeme, w.idf, sum(w.df) over (order by w.df, w.i) as below,
                 row_number() over (order by w.df, w.i) as nth
          from unnest(p_lexemes, p_idfs, p_dfs) with ordinality as w (lexeme, idf, df, i)) r
    where r.below <= p_budget or r.nth = 1;
    theta := coalesce((select s.score from bm25_sums(p_catalog, p_field, p_avgdl, rare, rare_idfs, p_kept, p_dropped) s
                       order by s.score desc offset p_n - 1 limit 1), 0) * 0.999999;
    -- 2. non-essential terms: smallest bounds first, while their bounds sum below theta
    select array_agg(b.lexeme) filter (where not b.skip), array_agg(b.idf) filter (where not b.skip),
           coalesce(sum(b.bound) filter (where b.skip), 0) * 1.000001
    into essential, essential_idfs, slack
    from (select t.lexeme, t.idf, t.bound, sum(t.bound) over (order by t.bound, t.lexeme) < theta as skip
          from (select u.lexeme, u.idf, u.idf * bm25_tf_bound(p_field, m.impact, p_avgdl) as bound
                from unnest(p_lexemes, p_idfs) as u (lexeme, idf)
                cross join lateral (
                    select p.impact from postings p
                    where p.catalog_id = p_catalog and p.field = p_field and p.lexeme = u.lexeme
                    order by p.impact desc limit 1
                ) m) t) b;
    -- 3. the essential terms' sums; candidates are the tools that can still reach the n-th best of them
    select array_agg(e.tool_pk), array_agg(e.score) into sums, partial
    from bm25_sums(p_catalog, p_field, p_avgdl, essential, essential_idfs, p_kept, p_dropped) e;
    theta := greatest(theta, coalesce((select x from unnest(partial) x order by x desc offset p_n - 1 limit 1), 0)
                             * 0.999999);
    select array_agg(c.pk) into candidates from unnest(sums, partial) as c (pk, s) where c.s + slack >= theta;
    -- 4. the candidates' sums over every term, in the order the statement's own sum adds them
    return query
    select s.tool_pk, round(s.score * 1e9)
    from bm25_sums(p_catalog, p_field, p_avgdl, p_lexemes, p_idfs, candidates, false) s
    order by 2 desc
    fetch first p_n rows with ties;
end
$$;
"""

DOWNGRADE = """
drop function bm25_top(integer, smallint, float8, text[], float8[], float8[], integer, bigint[], boolean, float8);
drop function bm25_sums(integer, smallint, float8, text[], float8[], bigint[], boolean);
drop function bm25_tf_bound(smallint, real, float8);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
