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
- ``route_kept()``: the one home of route()'s filters (allow / block with ``*`` and ``?`` globs, categories,
  providers, tags): the kept tools' pks, or SQLSTATE ``TS002`` naming every allow pattern, category, provider or tag
  that matches no tool of the catalog. ``glob_like()`` turns a glob into a LIKE pattern.
- ``knn()`` takes the kept pks instead of the filters: exact search when few tools are kept (HNSW with a selective
  filter returns too few rows), iterative HNSW otherwise (``../shared/POSTGRES_NOTES.md``).
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

-- The tools route() keeps under its filters (null: no filter given, every tool). A tool is kept when its id matches
-- an allow value (if any; literal ids or globs), no block value, and it has one of the categories, providers and
-- tags given (each if any). Every allow value, category, provider and tag that matches no tool of the catalog is
-- named in one SQLSTATE TS002 error; block values are not checked (blocking a tool a catalog lacks is harmless).
create function route_kept(p_catalog integer, p_allow text[], p_block text[], p_categories text[],
                           p_providers text[], p_tags text[])
returns bigint[]
language plpgsql stable set search_path from current as $$
declare
    unmatched text;
    kept bigint[];
begin
    if p_allow is null and p_block is null and p_categories is null and p_providers is null and p_tags is null then
        return null;
    end if;
    select string_agg(u.what, ', ' order by u.kind, u.ord) into unmatched
    from (
        select 1 as kind, a.ord, 'allow ' || quote_literal(a.v) as what
        from unnest(p_allow) with ordinality as a (v, ord)
        where not exists (select 1 from tools t
                          where t.catalog_id = p_catalog
                            and case when a.v ~ '[*?]' then t.id like glob_like(a.v) else t.id = a.v end)
        union all
        select 2, c.ord, 'category ' || quote_literal(c.v)
        from unnest(p_categories) with ordinality as c (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and c.v = any (t.categories))
        union all
        select 3, p.ord, 'provider ' || quote_literal(p.v)
        from unnest(p_providers) with ordinality as p (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and t.provider = p.v)
        union all
        select 4, g.ord, 'tag ' || quote_literal(g.v)
        from unnest(p_tags) with ordinality as g (v, ord)
        where not exists (select 1 from tools t where t.catalog_id = p_catalog and g.v = any (t.tags))
    ) u;
    if unmatched is not null then
        raise exception 'filter values that match no tool of the catalog: %', unmatched using errcode = 'TS002';
    end if;
    select coalesce(array_agg(t.pk order by t.pk), '{}') into kept
    from tools t
    where t.catalog_id = p_catalog
      and (p_allow is null or t.id = any (p_allow)
           or t.id like any (array(select glob_like(v) from unnest(p_allow) v where v ~ '[*?]')))
      and (p_block is null or not (t.id = any (p_block)
           or t.id like any (array(select glob_like(v) from unnest(p_block) v where v ~ '[*?]'))))
      and (p_categories is null or t.categories && p_categories)
      and (p_providers is null or t.provider = any (p_providers))
      and (p_tags is null or t.tags && p_tags);
    return kept;
end
$$;
"""

# knn(): p_kept null searches the whole catalog with HNSW; a kept set of at most 2,000 tools is searched exactly
# (through the (catalog_id, tool_pk) keys: a few ms), a larger one with iterative HNSW filtered by the set.
KNN = """
drop function knn(text, integer, integer, vector, integer, text[], text[], text[]);

create function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
                    p_kept bigint[])
returns table (tool_pk bigint, distance double precision)
language plpgsql rows 40 set search_path from current as $$
begin
    if p_query is null or p_dim is null or p_limit <= 0 then
        return;
    end if;
    if p_table not in ('tool_vectors', 'intent_examples') then
        raise exception 'knn: unknown table %', p_table;
    end if;
    if p_kept is null then
        perform set_config('hnsw.ef_search', least(greatest(p_limit, 40), 1000)::text, true);
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'order by v.embedding::vector(%1$s) <=> $1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit;
    elsif cardinality(p_kept) <= 2000 then
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from unnest($3::bigint[]) k (pk) join %3$I v on v.catalog_id = %2$s and v.tool_pk = k.pk '
            'where vector_dims(v.embedding) = %1$s '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept;
    else
        perform set_config('hnsw.ef_search', least(greatest(p_limit, 40), 1000)::text, true);
        perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
        return query execute format(
            'select s.tool_pk, s.distance from ('
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and v.tool_pk = any ($3::bigint[]) '
            'order by v.embedding::vector(%1$s) <=> $1 limit $2) s order by s.distance', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept;
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
drop function knn(text, integer, integer, vector, integer, bigint[]);

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
drop function glob_like(text);
alter table tools drop column avoid_tsv;
drop table anchors;
"""


def downgrade() -> None:
    op.execute(KNN_0007)
    op.execute(DROP)
