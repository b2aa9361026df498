"""Catalogs, tools with per-field tsvectors, exact BM25 statistics, vectors and intent examples.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Objects are created unqualified: the migration runner puts the toolstore schema first on the search_path.
Functions pin that search_path (``SET search_path FROM CURRENT``) so triggers behave the same whichever
session fires them. The embedding dimension is not fixed here: vector columns are untyped and each
catalog gets partial HNSW expression indexes for its own dimension (``ensure_vector_indexes``).
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TABLES = """
create table catalogs (
    id integer generated always as identity primary key,
    name text not null unique,
    embed_model text,
    embed_dim integer check (embed_dim > 0),
    settings jsonb not null default '{}'::jsonb,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create table tools (
    pk bigint generated always as identity primary key,
    catalog_id integer not null references catalogs (id) on delete cascade,
    id text not null,
    name text not null,
    title text,
    provider text,
    description text not null default '',
    parameters jsonb,
    categories text[] not null default '{}',
    tags text[] not null default '{}',
    keywords text[] not null default '{}',
    examples text[] not null default '{}',
    expansion text not null default '',
    avoid_when text not null default '',
    always_on boolean not null default false,
    spec jsonb,
    content_hash text not null,
    name_doc text not null default '',
    description_doc text not null default '',
    expansion_doc text not null default '',
    name_tsv tsvector generated always as (to_tsvector('english'::regconfig, name_doc)) stored,
    description_tsv tsvector generated always as (to_tsvector('english'::regconfig, description_doc)) stored,
    expansion_tsv tsvector generated always as (to_tsvector('english'::regconfig, expansion_doc)) stored,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint tools_catalog_id_id_key unique (catalog_id, id)
);
create index tools_always_on_idx on tools (catalog_id) where always_on;
create index tools_lower_id_idx on tools (catalog_id, lower(id));
create index tools_lower_name_idx on tools (catalog_id, lower(name));

-- BM25 statistics, one row per (catalog, field, lexeme, tool): field 1 name, 2 description, 3 expansion.
create table postings (
    catalog_id integer not null references catalogs (id) on delete cascade,
    field smallint not null,
    lexeme text not null,
    tool_pk bigint not null,
    tf integer not null,
    dl integer not null,
    constraint postings_pkey primary key (catalog_id, field, lexeme, tool_pk) include (tf, dl)
);
create index postings_tool_pk_idx on postings (tool_pk);

create table lexeme_stats (
    catalog_id integer not null references catalogs (id) on delete cascade,
    field smallint not null,
    lexeme text not null,
    df integer not null,
    constraint lexeme_stats_pkey primary key (catalog_id, field, lexeme) include (df)
);

create table field_stats (
    catalog_id integer not null references catalogs (id) on delete cascade,
    field smallint not null,
    n integer not null,
    total_len bigint not null,
    constraint field_stats_pkey primary key (catalog_id, field)
);

create table tool_vectors (
    tool_pk bigint primary key references tools (pk) on delete cascade,
    catalog_id integer not null references catalogs (id) on delete cascade,
    embedding vector not null
);
create index tool_vectors_catalog_id_idx on tool_vectors (catalog_id);

create table intent_examples (
    pk bigint generated always as identity primary key,
    catalog_id integer not null references catalogs (id) on delete cascade,
    tool_pk bigint not null references tools (pk) on delete cascade,
    query text not null,
    embedding vector,
    created_at timestamptz not null default now(),
    constraint intent_examples_tool_query_key unique (tool_pk, query)
);
create index intent_examples_catalog_id_idx on intent_examples (catalog_id);

create table embedding_cache (
    model text not null,
    text_sha256 bytea not null,
    embedding vector not null,
    created_at timestamptz not null default now(),
    constraint embedding_cache_pkey primary key (model, text_sha256)
);
"""

# bm25_add / bm25_remove keep postings, lexeme_stats and field_stats exact for a set of tools.
# Statement-level triggers with transition tables call them once per statement, so a bulk import
# is set-based and every change is in the writer's own transaction.
FUNCTIONS = """
create function bm25_add(p_pks bigint[]) returns void
language plpgsql set search_path from current as $$
begin
    insert into postings (catalog_id, field, lexeme, tool_pk, tf, dl)
    select d.catalog_id, d.field, u.lexeme, d.pk,
           coalesce(array_length(u.positions, 1), 1),
           sum(coalesce(array_length(u.positions, 1), 1)) over (partition by d.pk, d.field)
    from (
        select t.catalog_id, t.pk, f.field, f.tsv
        from tools t
        cross join lateral (values (1::smallint, t.name_tsv),
                                   (2::smallint, t.description_tsv),
                                   (3::smallint, t.expansion_tsv)) as f (field, tsv)
        where t.pk = any (p_pks)
    ) d
    cross join lateral unnest(d.tsv) u;

    insert into lexeme_stats (catalog_id, field, lexeme, df)
    select p.catalog_id, p.field, p.lexeme, count(*)
    from postings p
    where p.tool_pk = any (p_pks)
    group by p.catalog_id, p.field, p.lexeme
    order by p.catalog_id, p.field, p.lexeme
    on conflict (catalog_id, field, lexeme) do update set df = lexeme_stats.df + excluded.df;

    insert into field_stats (catalog_id, field, n, total_len)
    select t.catalog_id, f.field, count(*),
           coalesce(sum((select sum(coalesce(array_length(u.positions, 1), 1)) from unnest(f.tsv) u)), 0)
    from tools t
    cross join lateral (values (1::smallint, t.name_tsv),
                               (2::smallint, t.description_tsv),
                               (3::smallint, t.expansion_tsv)) as f (field, tsv)
    where t.pk = any (p_pks)
    group by t.catalog_id, f.field
    order by t.catalog_id, f.field
    on conflict (catalog_id, field) do update
        set n = field_stats.n + excluded.n, total_len = field_stats.total_len + excluded.total_len;
end
$$;

create function bm25_remove(p_pks bigint[], p_catalogs integer[]) returns void
language plpgsql set search_path from current as $$
begin
    update lexeme_stats s set df = s.df - c.cnt
    from (
        select p.catalog_id, p.field, p.lexeme, count(*) as cnt
        from postings p
        where p.tool_pk = any (p_pks)
        group by p.catalog_id, p.field, p.lexeme
        order by p.catalog_id, p.field, p.lexeme
    ) c
    where s.catalog_id = c.catalog_id and s.field = c.field and s.lexeme = c.lexeme;
    delete from lexeme_stats s
    where s.df <= 0 and s.catalog_id = any (p_catalogs);

    update field_stats s set n = s.n - c.cnt, total_len = s.total_len - c.len
    from (
        select r.catalog_id, f.field, count(*) as cnt,
               coalesce(sum((select max(p.dl) from postings p
                             where p.tool_pk = r.pk and p.field = f.field)), 0) as len
        from unnest(p_pks, p_catalogs) as r (pk, catalog_id)
        cross join (values (1::smallint), (2::smallint), (3::smallint)) as f (field)
        group by r.catalog_id, f.field
    ) c
    where s.catalog_id = c.catalog_id and s.field = c.field;

    delete from postings p where p.tool_pk = any (p_pks);
end
$$;

create function tools_after_insert() returns trigger
language plpgsql set search_path from current as $$
begin
    perform bm25_add(array(select pk from new_rows));
    return null;
end
$$;

create function tools_after_delete() returns trigger
language plpgsql set search_path from current as $$
begin
    perform bm25_remove(array(select pk from old_rows), array(select catalog_id from old_rows));
    return null;
end
$$;

create function tools_after_update() returns trigger
language plpgsql set search_path from current as $$
declare
    changed_pks bigint[];
    changed_catalogs integer[];
begin
    select array_agg(o.pk), array_agg(o.catalog_id) into changed_pks, changed_catalogs
    from old_rows o join new_rows n on n.pk = o.pk
    where o.name_tsv is distinct from n.name_tsv
       or o.description_tsv is distinct from n.description_tsv
       or o.expansion_tsv is distinct from n.expansion_tsv
       or o.catalog_id is distinct from n.catalog_id;
    if changed_pks is not null then
        perform bm25_remove(changed_pks, changed_catalogs);
        perform bm25_add(changed_pks);
    end if;
    return null;
end
$$;

create trigger tools_bm25_insert after insert on tools
    referencing new table as new_rows for each statement execute function tools_after_insert();
create trigger tools_bm25_delete after delete on tools
    referencing old table as old_rows for each statement execute function tools_after_delete();
create trigger tools_bm25_update after update on tools
    referencing old table as old_rows new table as new_rows
    for each statement execute function tools_after_update();

-- Partial HNSW expression indexes for one catalog, typed with that catalog's dimension. The predicate
-- names the dimension too: an index build also reads rows deleted earlier in the same transaction (a
-- model switch), and those must not reach the cast.
create function ensure_vector_indexes(p_catalog integer) returns void
language plpgsql set search_path from current as $$
declare
    dim integer;
begin
    select embed_dim into dim from catalogs where id = p_catalog;
    execute format('drop index if exists %I', 'tool_vectors_hnsw_' || p_catalog);
    execute format('drop index if exists %I', 'intent_examples_hnsw_' || p_catalog);
    if dim is not null then
        execute format(
            'create index %I on tool_vectors using hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'where catalog_id = %s and vector_dims(embedding) = %s',
            'tool_vectors_hnsw_' || p_catalog, dim, p_catalog, dim);
        execute format(
            'create index %I on intent_examples using hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'where catalog_id = %s and vector_dims(embedding) = %s',
            'intent_examples_hnsw_' || p_catalog, dim, p_catalog, dim);
    end if;
end
$$;

create function drop_vector_indexes(p_catalog integer) returns void
language plpgsql set search_path from current as $$
begin
    execute format('drop index if exists %I', 'tool_vectors_hnsw_' || p_catalog);
    execute format('drop index if exists %I', 'intent_examples_hnsw_' || p_catalog);
end
$$;

-- Nearest tools (or intent examples) to a query vector in one catalog. The dimension and catalog id are
-- spelled into the statement so the planner matches that catalog's partial HNSW index; ef_search follows
-- the limit. With tool filters the filter runs inside the index scan (iterative scan, relaxed order, then
-- re-sorted) so a selective filter still fills the limit.
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
            'from %3$I v join tools t on t.pk = v.tool_pk '
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
drop table if exists embedding_cache, intent_examples, tool_vectors, field_stats, lexeme_stats, postings,
    tools, catalogs cascade;
drop function if exists bm25_add(bigint[]), bm25_remove(bigint[], integer[]), tools_after_insert(),
    tools_after_delete(), tools_after_update(), ensure_vector_indexes(integer), drop_vector_indexes(integer),
    knn(text, integer, integer, vector, integer, text[], text[], text[]);
"""


def upgrade() -> None:
    op.execute(TABLES)
    op.execute(FUNCTIONS)


def downgrade() -> None:
    op.execute(DROP)
