"""Scale: catalog versions for one-round-trip routes, catalog-first keys, impact-ordered postings, lighter writes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

- ``catalogs.version`` goes up with every update of a catalog's row (model, dimension, settings). A store caches
  the row and the route statement checks the version it was given with ``route_catalog()``, which raises SQLSTATE
  ``TS001`` when the catalog changed (or is gone): a stale cache never routes with old weights or another model.
- Every catalog-scoped table's primary key starts with ``catalog_id``, and the tables that point at tools do so by
  ``(catalog_id, tool_pk)``: the keys a distributed database (Citus, docs/SCALING.md) co-locates a catalog by.
- ``postings.impact`` (``bm25_impact``: BM25's term-frequency part at a typical length for the field) is part of the
  postings' primary key, so a term's postings can be read best first: route can read a bounded prefix of a long
  posting list and re-score its candidates exactly.
- The BM25 statistics tables (postings, lexeme_stats, field_stats) are derived data kept by triggers: they lose their
  foreign keys (a per-row check that cost two thirds of a bulk import's postings insert) and are purged by a trigger
  when their catalog is deleted. The triggers work from the transition tables' tsvectors, so removing a tool needs
  no index on ``postings.tool_pk``.
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

VERSIONS = """
alter table catalogs add column version bigint not null default 1;

create function catalogs_bump_version() returns trigger
language plpgsql set search_path from current as $$
begin
    new.version := old.version + 1;
    return new;
end
$$;

create trigger catalogs_version before update on catalogs
    for each row execute function catalogs_bump_version();

-- The route statement's first step: true when catalog p_catalog is still at p_version, else SQLSTATE TS001.
create function route_catalog(p_catalog integer, p_version bigint) returns boolean
language plpgsql stable set search_path from current as $$
begin
    if not exists (select 1 from catalogs c where c.id = p_catalog and c.version = p_version) then
        raise exception 'catalog % is not at version % any more', p_catalog, p_version using errcode = 'TS001';
    end if;
    return true;
end
$$;
"""

KEYS = """
alter table tool_vectors drop constraint tool_vectors_tool_pk_fkey, drop constraint tool_vectors_catalog_id_fkey,
    drop constraint tool_vectors_pkey;
alter table intent_examples drop constraint intent_examples_tool_pk_fkey,
    drop constraint intent_examples_catalog_id_fkey, drop constraint intent_examples_pkey,
    drop constraint intent_examples_tool_query_key;
alter table tools drop constraint tools_pkey, add constraint tools_pkey primary key (catalog_id, pk);
alter table tool_vectors add constraint tool_vectors_pkey primary key (catalog_id, tool_pk),
    add constraint tool_vectors_tool_fkey foreign key (catalog_id, tool_pk)
        references tools (catalog_id, pk) on delete cascade;
alter table intent_examples add constraint intent_examples_pkey primary key (catalog_id, pk),
    add constraint intent_examples_tool_query_key unique (catalog_id, tool_pk, query),
    add constraint intent_examples_tool_fkey foreign key (catalog_id, tool_pk)
        references tools (catalog_id, pk) on delete cascade;
drop index tool_vectors_catalog_id_idx, intent_examples_catalog_id_idx;

alter table postings drop constraint postings_catalog_id_fkey;
alter table lexeme_stats drop constraint lexeme_stats_catalog_id_fkey;
alter table field_stats drop constraint field_stats_catalog_id_fkey;
drop index postings_tool_pk_idx;
"""

# BM25's term-frequency part; bm25_term() (0002) now calls it, so the formula is still written once. A posting's
# impact is that part at a fixed typical length per field (name, description, expansion documents): a function of
# the posting alone, so the primary key can order a term's postings best first and a delete can still find a row by
# its key. Only the order of a term's postings depends on the reference lengths; scores use the real average.
BM25 = """
create function bm25_tf(tf float8, dl float8, avgdl float8) returns float8
language sql immutable parallel safe
return tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl));

create or replace function bm25_term(tf float8, dl float8, df float8, n float8, avgdl float8) returns float8
language sql immutable parallel safe
return ln(1 + (n - df + 0.5) / (df + 0.5)) * bm25_tf(tf, dl, avgdl);

create function bm25_impact(field smallint, tf integer, dl integer) returns real
language sql immutable parallel safe
return bm25_tf(tf, dl, case field when 1 then 16 when 2 then 40 else 20 end);

alter table postings add column impact real not null generated always as (bm25_impact(field, tf, dl)) stored,
    drop constraint postings_pkey,
    add constraint postings_pkey primary key (catalog_id, field, lexeme, impact, tool_pk) include (tf, dl);
"""

# The statistics triggers, fed from the transition tables' tsvectors (arrays of bm25_doc): no lookup of tools or
# postings by tool_pk. Impacts use the field's average length after the change.
TRIGGERS = """
drop trigger tools_bm25_insert on tools;
drop trigger tools_bm25_delete on tools;
drop trigger tools_bm25_update on tools;
drop function tools_after_insert(), tools_after_delete(), tools_after_update(), bm25_add(bigint[]),
    bm25_remove(bigint[], integer[]);

create type bm25_doc as (catalog_id integer, pk bigint, name_tsv tsvector, description_tsv tsvector,
                         expansion_tsv tsvector);

-- Every (tool, field) of some tools, with the field's length (the sum of its lexemes' frequencies).
create function bm25_fields(p_docs bm25_doc[])
returns table (catalog_id integer, tool_pk bigint, field smallint, tsv tsvector, len integer)
language sql immutable parallel safe
begin atomic
    select d.catalog_id, d.pk, f.field, f.tsv,
           coalesce((select sum(coalesce(array_length(u.positions, 1), 1)) from unnest(f.tsv) u), 0)::integer
    from unnest(p_docs) d
    cross join lateral (values (1::smallint, d.name_tsv), (2::smallint, d.description_tsv),
                               (3::smallint, d.expansion_tsv)) as f (field, tsv);
end;

create function bm25_add(p_docs bm25_doc[]) returns void
language plpgsql set search_path from current set work_mem = '64MB' as $$
begin
    insert into field_stats (catalog_id, field, n, total_len)
    select f.catalog_id, f.field, count(*), sum(f.len)
    from bm25_fields(p_docs) f
    group by f.catalog_id, f.field
    order by f.catalog_id, f.field
    on conflict (catalog_id, field) do update
        set n = field_stats.n + excluded.n, total_len = field_stats.total_len + excluded.total_len;

    with f as materialized (  -- each field's length computed once, not once per lexeme
        select * from bm25_fields(p_docs)
    )
    insert into postings (catalog_id, field, lexeme, tool_pk, tf, dl)
    select f.catalog_id, f.field, u.lexeme, f.tool_pk, coalesce(array_length(u.positions, 1), 1), f.len
    from f
    cross join lateral unnest(f.tsv) u
    -- in key order: a bulk insert takes half the time
    order by 1, 2, 3, bm25_impact(f.field, coalesce(array_length(u.positions, 1), 1), f.len), 4;

    insert into lexeme_stats (catalog_id, field, lexeme, df)
    select f.catalog_id, f.field, u.lexeme, count(*)
    from bm25_fields(p_docs) f
    cross join lateral unnest(f.tsv) u
    group by f.catalog_id, f.field, u.lexeme
    order by f.catalog_id, f.field, u.lexeme
    on conflict (catalog_id, field, lexeme) do update set df = lexeme_stats.df + excluded.df;
end
$$;

create function bm25_remove(p_docs bm25_doc[]) returns void
language plpgsql set search_path from current set work_mem = '64MB' as $$
begin
    with gone as (
        select f.catalog_id, f.field, u.lexeme, count(*) as cnt
        from bm25_fields(p_docs) f
        cross join lateral unnest(f.tsv) u
        group by f.catalog_id, f.field, u.lexeme
    ),
    emptied as (
        delete from lexeme_stats s
        using gone g
        where s.catalog_id = g.catalog_id and s.field = g.field and s.lexeme = g.lexeme and s.df <= g.cnt
    )
    update lexeme_stats s set df = s.df - g.cnt
    from gone g
    where s.catalog_id = g.catalog_id and s.field = g.field and s.lexeme = g.lexeme and s.df > g.cnt;

    with gone as (
        select f.catalog_id, f.field, count(*) as cnt, sum(f.len) as len
        from bm25_fields(p_docs) f
        group by f.catalog_id, f.field
    ),
    emptied as (
        delete from field_stats s
        using gone g
        where s.catalog_id = g.catalog_id and s.field = g.field and s.n <= g.cnt
    )
    update field_stats s set n = s.n - g.cnt, total_len = s.total_len - g.len
    from gone g
    where s.catalog_id = g.catalog_id and s.field = g.field and s.n > g.cnt;

    delete from postings p
    using bm25_fields(p_docs) f cross join lateral unnest(f.tsv) u
    where p.catalog_id = f.catalog_id and p.field = f.field and p.lexeme = u.lexeme
      and p.impact = bm25_impact(f.field, coalesce(array_length(u.positions, 1), 1), f.len)
      and p.tool_pk = f.tool_pk;
end
$$;

create function tools_after_insert() returns trigger
language plpgsql set search_path from current as $$
begin
    perform bm25_add(array(select row(n.catalog_id, n.pk, n.name_tsv, n.description_tsv, n.expansion_tsv)::bm25_doc
                           from new_rows n));
    return null;
end
$$;

-- Tools deleted with their catalog need nothing: catalogs_after_delete purges the catalog's statistics at once.
create function tools_after_delete() returns trigger
language plpgsql set search_path from current as $$
begin
    perform bm25_remove(array(select row(o.catalog_id, o.pk, o.name_tsv, o.description_tsv, o.expansion_tsv)::bm25_doc
                              from old_rows o
                              where exists (select 1 from catalogs c where c.id = o.catalog_id)));
    return null;
end
$$;

create function tools_after_update() returns trigger
language plpgsql set search_path from current as $$
begin
    perform bm25_remove(array(
        select row(o.catalog_id, o.pk, o.name_tsv, o.description_tsv, o.expansion_tsv)::bm25_doc
        from old_rows o join new_rows n on n.pk = o.pk
        where o.name_tsv is distinct from n.name_tsv or o.description_tsv is distinct from n.description_tsv
           or o.expansion_tsv is distinct from n.expansion_tsv or o.catalog_id is distinct from n.catalog_id));
    perform bm25_add(array(
        select row(n.catalog_id, n.pk, n.name_tsv, n.description_tsv, n.expansion_tsv)::bm25_doc
        from old_rows o join new_rows n on n.pk = o.pk
        where o.name_tsv is distinct from n.name_tsv or o.description_tsv is distinct from n.description_tsv
           or o.expansion_tsv is distinct from n.expansion_tsv or o.catalog_id is distinct from n.catalog_id));
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

create function catalogs_after_delete() returns trigger
language plpgsql set search_path from current as $$
begin
    delete from postings where catalog_id = any (array(select id from old_catalogs));
    delete from lexeme_stats where catalog_id = any (array(select id from old_catalogs));
    delete from field_stats where catalog_id = any (array(select id from old_catalogs));
    return null;
end
$$;

create trigger catalogs_purge after delete on catalogs
    referencing old table as old_catalogs for each statement execute function catalogs_after_delete();
"""

KNN = """
create or replace function knn(p_table text, p_catalog integer, p_dim integer, p_query vector, p_limit integer,
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


def upgrade() -> None:
    op.execute(VERSIONS)
    op.execute(KEYS)
    op.execute(BM25)
    op.execute(TRIGGERS)
    op.execute(KNN)


# -- downgrade: revision 0006's schema, its functions as 0001 and 0002 wrote them --------------------------------

TRIGGERS_0001 = """
drop trigger catalogs_purge on catalogs;
drop trigger tools_bm25_insert on tools;
drop trigger tools_bm25_delete on tools;
drop trigger tools_bm25_update on tools;
drop function catalogs_after_delete(), tools_after_insert(), tools_after_delete(), tools_after_update(),
    bm25_add(bm25_doc[]), bm25_remove(bm25_doc[]), bm25_fields(bm25_doc[]);
drop type bm25_doc;

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
"""

BM25_0002 = """
alter table postings drop constraint postings_pkey, drop column impact,
    add constraint postings_pkey primary key (catalog_id, field, lexeme, tool_pk) include (tf, dl);
create or replace function bm25_term(tf float8, dl float8, df float8, n float8, avgdl float8) returns float8
language sql immutable parallel safe
return ln(1 + (n - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl));
drop function bm25_impact(smallint, integer, integer), bm25_tf(float8, float8, float8);
"""

KEYS_0005 = """
create index postings_tool_pk_idx on postings (tool_pk);
alter table postings add constraint postings_catalog_id_fkey
    foreign key (catalog_id) references catalogs (id) on delete cascade;
alter table lexeme_stats add constraint lexeme_stats_catalog_id_fkey
    foreign key (catalog_id) references catalogs (id) on delete cascade;
alter table field_stats add constraint field_stats_catalog_id_fkey
    foreign key (catalog_id) references catalogs (id) on delete cascade;

alter table tool_vectors drop constraint tool_vectors_tool_fkey, drop constraint tool_vectors_pkey;
alter table intent_examples drop constraint intent_examples_tool_fkey, drop constraint intent_examples_pkey,
    drop constraint intent_examples_tool_query_key;
alter table tools drop constraint tools_pkey, add constraint tools_pkey primary key (pk);
alter table tool_vectors add constraint tool_vectors_pkey primary key (tool_pk),
    add constraint tool_vectors_tool_pk_fkey foreign key (tool_pk) references tools (pk) on delete cascade,
    add constraint tool_vectors_catalog_id_fkey foreign key (catalog_id) references catalogs (id) on delete cascade;
alter table intent_examples add constraint intent_examples_pkey primary key (pk),
    add constraint intent_examples_tool_query_key unique (tool_pk, query),
    add constraint intent_examples_tool_pk_fkey foreign key (tool_pk) references tools (pk) on delete cascade,
    add constraint intent_examples_catalog_id_fkey
        foreign key (catalog_id) references catalogs (id) on delete cascade;
create index tool_vectors_catalog_id_idx on tool_vectors (catalog_id);
create index intent_examples_catalog_id_idx on intent_examples (catalog_id);
"""

KNN_0001 = KNN.replace("join tools t on t.catalog_id = %2$s and t.pk = v.tool_pk", "join tools t on t.pk = v.tool_pk")
assert KNN_0001 != KNN

VERSIONS_0005 = """
drop function route_catalog(integer, bigint);
drop trigger catalogs_version on catalogs;
drop function catalogs_bump_version();
alter table catalogs drop column version;
"""


def downgrade() -> None:
    op.execute(TRIGGERS_0001)
    op.execute(BM25_0002)
    op.execute(KEYS_0005)
    op.execute(KNN_0001)
    op.execute(VERSIONS_0005)
