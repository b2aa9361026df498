"""Routing controls: anchors, the avoid-when field indexed, and filters with one home.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

- ``anchors``: per-catalog rules ``pattern -> tool, boost``. route() adds the boosts of the rules whose pattern (a
  Postgres regular expression, matched case-insensitively with ``~*``) matches the request to the tool's fused
  score. A rule points at its tool by ``(catalog_id, tool_pk)`` and goes with it when the tool is removed (cascade).
  Patterns are checked at write time (``toolstore._anchors``); the table holds the limits as constraints too.
  Row-level security as on every catalog-scoped table (migration 0005).
- ``tools.avoid_tsv``: the ``avoid_when`` text as a tsvector, for route()'s avoid-when penalty.
- ``route_keeps()``: the one home of route()'s filters (allow / block with ``*`` and ``?`` globs, categories,
  providers, tags; ``route_filter`` holds them). ``route_kept()`` checks them (SQLSTATE ``TS002`` naming every allow
  pattern, category, provider or tag that matches no tool of the catalog) and lists the kept tools when they are
  few; ``glob_like()`` turns a glob into a LIKE pattern. Indexes on provider, categories and tags serve them.
- ``knn()`` takes the kept pks and the filter instead of three filter arrays: exact search when few tools are kept
  (HNSW with a selective filter returns too few rows), iterative HNSW otherwise (``../shared/POSTGRES_NOTES.md``).
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ANCHORS = """
create table anchors (
    catalog_id integer not null,
    pk bigint generated always as identity,
    tool_pk bigint not null,
    pattern text not null check (char_length(pattern) between 1 and 500),
    boost double precision not null check (boost between -10 and 10 and boost <> 0),
    created_at timestamptz not null default now(),
    constraint anchors_pkey primary key (catalog_id, pk),
    constraint anchors_tool_pattern_key unique (catalog_id, tool_pk, pattern),
    constraint anchors_tool_fkey foreign key (catalog_id, tool_pk)
        references tools (catalog_id, pk) on delete cascade
);

alter table anchors enable row level security;
create policy anchors_read on anchors for select
    using (catalog_id = any ((select visible_catalogs(current_user, false))::integer[]));
create policy anchors_insert on anchors for insert
    with check (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));
create policy anchors_update on anchors for update
    using (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]))
    with check (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));
create policy anchors_delete on anchors for delete
    using (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));

alter table tools add column avoid_tsv tsvector
    generated always as (to_tsvector('english'::regconfig, avoid_when)) stored;
"""

FILTERS = r"""
-- A glob (`*` any run of characters, `?` one character, everything else literal) as a LIKE pattern.
create function glob_like(p_glob text) returns text
language sql immutable parallel safe as $$
    select replace(replace(replace(replace(replace(p_glob, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%'), '?', '_')
$$;

-- route()'s filters, allow and block as LIKE patterns (a literal id is a pattern that matches itself).
create type route_filter as (allow text[], block text[], categories text[], providers text[], tags text[]);

create function route_filter(p_allow text[], p_block text[], p_categories text[], p_providers text[], p_tags text[])
returns route_filter
language sql immutable parallel safe as $$
    select row((select array_agg(glob_like(v)) from unnest(p_allow) v),
               (select array_agg(glob_like(v)) from unnest(p_block) v),
               p_categories, p_providers, p_tags)::route_filter
$$;

-- The filters' one home: whether route() keeps a tool (null filter: every tool). Its id matches an allow pattern
-- (if any) and no block pattern, and it has one of the categories, providers and tags given (each if any). Inlined.
create function route_keeps(p_id text, p_categories text[], p_provider text, p_tags text[], f route_filter)
returns boolean
language sql immutable parallel safe as $$
    select f is null
        or ((f.allow is null or p_id like any (f.allow))
            and (f.block is null or not p_id like any (f.block))
            and (f.categories is null or p_categories && f.categories)
            and (f.providers is null or p_provider = any (f.providers))
            and (f.tags is null or p_tags && f.tags))
$$;

-- Checks route()'s filters against catalog p_catalog, and returns the kept tools' pks when at most 2,000 are kept
-- (knn() searches those exactly), else null (knn() filters an iterative HNSW scan with route_keeps()). Every allow
-- value, category, provider and tag that matches no tool of the catalog is named in one SQLSTATE TS002 error; block
-- values are not checked (blocking a tool a catalog lacks is harmless). Each check and count reads an index (counts
-- stop at 2,001; sequential scans are off: a filter keeping a quarter of a catalog would else scan it); the smallest
-- of the positive filters (literal allow ids, providers, categories, tags) bounds the kept set and drives the query
-- that lists it. A glob reads the catalog's ids.
create function route_kept(p_catalog integer, p_allow text[], p_block text[], p_categories text[],
                           p_providers text[], p_tags text[])
returns bigint[]
language plpgsql stable set search_path from current set enable_seqscan = off as $$
declare
    f route_filter := route_filter(p_allow, p_block, p_categories, p_providers, p_tags);
    globs boolean := exists (select 1 from unnest(p_allow) v where v ~ '[*?]');
    unmatched text;
    unmatched_globs text[];
    n bigint;
    kept bigint[];
    best bigint;
    driver text;
begin
    if globs then  -- planned only when there are globs
        execute 'select array_agg(''allow '' || quote_literal(a.v) order by a.ord) '
                'from unnest($2::text[]) with ordinality as a (v, ord) where a.v ~ ''[*?]'' '
                'and not exists (select 1 from tools t where t.catalog_id = $1 and t.id like glob_like(a.v))'
        into unmatched_globs using p_catalog, p_allow;
    end if;
    select string_agg(u.what, ', ' order by u.kind, u.ord) into unmatched
    from (
        select 1 as kind, a.ord, 'allow ' || quote_literal(a.v) as what
        from unnest(p_allow) with ordinality as a (v, ord)
        where a.v !~ '[*?]' and not exists (select 1 from tools t where t.catalog_id = p_catalog and t.id = a.v)
        union all
        select 1, g.ord + 100000, g.what
        from unnest(unmatched_globs) with ordinality as g (what, ord)
        union all
        select 2, c.ord, 'category ' || quote_literal(c.v)
        from unnest(p_categories) with ordinality as c (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and t.categories @> array[c.v])
        union all
        select 3, p.ord, 'provider ' || quote_literal(p.v)
        from unnest(p_providers) with ordinality as p (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and t.provider = p.v)
        union all
        select 4, g.ord, 'tag ' || quote_literal(g.v)
        from unnest(p_tags) with ordinality as g (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and t.tags @> array[g.v])
    ) u;
    if unmatched is not null then
        raise exception 'filter values that match no tool of the catalog: %', unmatched using errcode = 'TS002';
    end if;
    if p_allow is not null and not globs then
        best := cardinality(p_allow); driver := 'allow';
    end if;
    if p_providers is not null then
        select count(*) into n
        from (select from tools t where t.catalog_id = p_catalog and t.provider = any (p_providers) limit 2001) x;
        if best is null or n < best then best := n; driver := 'providers'; end if;
    end if;
    if p_categories is not null and (best is null or best > 2000) then
        select count(*) into n
        from (select from tools t where t.catalog_id = p_catalog and t.categories && p_categories limit 2001) x;
        if best is null or n < best then best := n; driver := 'categories'; end if;
    end if;
    if p_tags is not null and (best is null or best > 2000) then
        select count(*) into n
        from (select from tools t where t.catalog_id = p_catalog and t.tags && p_tags limit 2001) x;
        if best is null or n < best then best := n; driver := 'tags'; end if;
    end if;
    if best is null or best > 2000 then
        return null;
    end if;
    execute 'select coalesce(array_agg(t.pk order by t.pk), ''{}'') from tools t where t.catalog_id = $1 '
            'and route_keeps(t.id, t.categories, t.provider, t.tags, $2) '
            'and (($3::text[] is not null and t.id = any ($3)) or ($4::text[] is not null and t.provider = any ($4)) '
            'or ($5::text[] is not null and t.categories && $5) or ($6::text[] is not null and t.tags && $6))'
    into kept using p_catalog, f,
        case when driver = 'allow' then p_allow end, case when driver = 'providers' then p_providers end,
        case when driver = 'categories' then p_categories end, case when driver = 'tags' then p_tags end;
    return kept;
end
$$;

create index tools_provider_idx on tools (catalog_id, provider);
create index tools_categories_idx on tools using gin (categories);
create index tools_tags_idx on tools using gin (tags);
"""

# knn(): without a filter, HNSW over the catalog; with one, the kept tools' pks when route_kept() listed them (at most
# 2,000: searched exactly through the (catalog_id, tool_pk) keys, a few ms), else iterative HNSW whose rows are
# filtered by route_keeps() (POSTGRES_NOTES: HNSW with a selective filter returns too few rows; exact is fast there).
KNN = """
drop function knn(text, integer, integer, vector, integer, text[], text[], text[]);

create function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
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
"""


def upgrade() -> None:
    op.execute(ANCHORS)
    op.execute(FILTERS)
    op.execute(KNN)


# -- downgrade: revision 0007's schema, knn() as 0007 wrote it ------------------------------------------------------

KNN_0007 = """
drop function knn(text, integer, integer, vector, integer, bigint[], route_filter);

create function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                    p_allow text[], p_block text[], p_categories text[])
returns table (tool_pk bigint, distance double precision)
language plpgsql rows 40 set search_path from current as $$
declare
    filtered boolean := p_allow is not null or p_block is not null or p_categories is not null;
begin
    if p_query is null or p_dim is null or p_limit <= 0 then
        return;
    end if;
    if p_table not in ('tool_vectors', 'intent_examples') then
        raise exception 'knn: unknown table %', p_table;
    end if;
    perform set_config('hnsw.ef_search', least(greatest(p_limit, 40), 1000)::text, true);
    if not filtered then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::vector(%1$s) <=> $1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit;
    else
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v join tools t on t.catalog_id = %2$s and t.pk = v.tool_pk '
            'where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and ($3 is null or t.id = any ($3)) and ($4 is null or t.id <> all ($4)) '
            'and ($5 is null or t.categories && $5) '
            'order by v.embedding::vector(%1$s) <=> $1 limit $2) s order by s.distance', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_allow, p_block, p_categories;
    end if;
end
$$;
"""

DROP = """
drop function route_kept(integer, text[], text[], text[], text[], text[]);
drop function route_keeps(text, text[], text, text[], route_filter);
drop function route_filter(text[], text[], text[], text[], text[]);
drop type route_filter;
drop function glob_like(text);
drop index tools_provider_idx, tools_categories_idx, tools_tags_idx;
alter table tools drop column avoid_tsv;
drop table anchors;
"""


def downgrade() -> None:
    op.execute(KNN_0007)
    op.execute(DROP)
