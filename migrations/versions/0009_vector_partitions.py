"""Vector tables partitioned by catalog: a database of thousands of catalogs plans a k-NN search as fast as one.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

``tool_vectors`` and ``intent_examples`` become LIST-partitioned by ``catalog_id``, one partition per catalog per
table (``tool_vectors_c<id>``, ``intent_examples_c<id>``), made by a trigger when the catalog row is inserted. Why:
with one table, each catalog's HNSW index was a partial index of that table, and the planner weighs every partial
index of a table for every query: at 1,000 catalogs, ``knn()`` took 6.3 ms to plan (docs/SCALING.md). With
partitions, ``knn()``'s statement (the catalog spelled in) is pruned to the catalog's partition before the planner
opens any index, and the HNSW index of a large catalog is an index of its own partition.

- Partitions are made with ``CREATE TABLE`` + ``ATTACH PARTITION``, which takes only a SHARE UPDATE EXCLUSIVE lock on
  the parent (``CREATE TABLE ... PARTITION OF`` takes ACCESS EXCLUSIVE: every route of every catalog would wait).
  A dropped catalog's empty partitions are detached concurrently and dropped outside the write's transaction
  (``toolstore._vectors.drop_partitions``) for the same reason.
- Row-level security stays on the parents (queries through a parent are checked against the parent's policies);
  each partition has row-level security enabled and no policy, so a role granted SELECT on every table of the schema
  reads nothing from a partition directly.
- Rows, grants and policies are carried over in both directions; HNSW indexes are rebuilt for the catalogs that
  had them (:data:`toolstore._indexes.HNSW_MIN_ROWS` rows in a table).

Upgrading rewrites both tables and rebuilds their indexes in one transaction that holds them exclusively: routes
wait until it commits, for a time that grows with the number of vectors (not measured on a large database: the
1,000-catalog bench database of 4M vectors was built, not migrated).
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Rows, grants, policies and row-level security flags of both tables, kept in temporary tables while they are remade.
SAVE = """
create temp table saved_tool_vectors as select * from tool_vectors;
create temp table saved_intent_examples as select * from intent_examples;
create temp table saved_grants as
    select c.relname as table_name, a.grantee, a.privilege_type
    from pg_class c cross join lateral aclexplode(c.relacl) a
    where c.oid in ('tool_vectors'::regclass, 'intent_examples'::regclass) and a.grantee <> c.relowner;
create temp table saved_policies as
    select p.* from pg_policies p
    where p.schemaname = current_schema() and p.tablename in ('tool_vectors', 'intent_examples');
create temp table saved_security as
    select relname as table_name, relrowsecurity, relforcerowsecurity from pg_class
    where oid in ('tool_vectors'::regclass, 'intent_examples'::regclass);
drop table tool_vectors, intent_examples;
"""

RESTORE = """
insert into tool_vectors (tool_pk, catalog_id, embedding)
select tool_pk, catalog_id, embedding from saved_tool_vectors;
insert into intent_examples (pk, catalog_id, tool_pk, query, embedding, created_at) overriding system value
select pk, catalog_id, tool_pk, query, embedding, created_at from saved_intent_examples;
select setval(pg_get_serial_sequence('intent_examples', 'pk'), greatest(max(pk), 1), max(pk) is not null)
from saved_intent_examples;

do $$
declare
    r record;
begin
    for r in select * from saved_grants loop
        execute format('grant %s on %I to %s', r.privilege_type, r.table_name,
                       case when r.grantee = 0 then 'public' else quote_ident(r.grantee::regrole::text) end);
    end loop;
    for r in select * from saved_security loop
        if r.relrowsecurity then
            execute format('alter table %I enable row level security', r.table_name);
        end if;
        if r.relforcerowsecurity then
            execute format('alter table %I force row level security', r.table_name);
        end if;
    end loop;
    for r in select * from saved_policies loop
        execute format('create policy %I on %I as %s for %s to %s %s %s', r.policyname, r.tablename, r.permissive,
                       r.cmd, (select string_agg(quote_ident(x), ', ') from unnest(r.roles) x),
                       case when r.qual is null then '' else 'using (' || r.qual || ')' end,
                       case when r.with_check is null then '' else 'with check (' || r.with_check || ')' end);
    end loop;
end
$$;

drop table saved_tool_vectors, saved_intent_examples, saved_grants, saved_policies, saved_security;
"""

# The two tables as revision 0008 had them; upgrade() makes them partitioned by catalog (TABLES + PARTITION_BY).
TABLES = """
create table tool_vectors (
    tool_pk bigint not null,
    catalog_id integer not null,
    embedding vector not null,
    constraint tool_vectors_pkey primary key (catalog_id, tool_pk),
    constraint tool_vectors_tool_fkey foreign key (catalog_id, tool_pk)
        references tools (catalog_id, pk) on delete cascade
);

create table intent_examples (
    pk bigint generated always as identity,
    catalog_id integer not null,
    tool_pk bigint not null,
    query text not null,
    embedding vector,
    created_at timestamptz not null default now(),
    constraint intent_examples_pkey primary key (catalog_id, pk),
    constraint intent_examples_tool_query_key unique (catalog_id, tool_pk, query),
    constraint intent_examples_tool_fkey foreign key (catalog_id, tool_pk)
        references tools (catalog_id, pk) on delete cascade
);
"""
PARTITION_BY = ") partition by list (catalog_id);"

PARTITIONED = (
    TABLES.replace(");\n", PARTITION_BY + "\n")
    + """
-- A catalog's partitions: CREATE TABLE + ATTACH (SHARE UPDATE EXCLUSIVE on the parent, so routes never wait),
-- row-level security on with no policy (direct reads of a partition see nothing; reads go through the parent).
create function create_vector_partitions(p_catalog integer) returns void
language plpgsql set search_path from current as $$
declare
    t text;
begin
    foreach t in array array['tool_vectors', 'intent_examples'] loop
        execute format('create table if not exists %I (like %I)', t || '_c' || p_catalog, t);
        if not exists (select 1 from pg_inherits where inhrelid = (t || '_c' || p_catalog)::regclass) then
            execute format('alter table %I attach partition %I for values in (%s)', t, t || '_c' || p_catalog,
                           p_catalog);
        end if;
        execute format('alter table %I enable row level security', t || '_c' || p_catalog);
    end loop;
end
$$;

create function catalogs_vector_partitions() returns trigger
language plpgsql set search_path from current as $$
begin
    perform create_vector_partitions(new.id);
    return null;
end
$$;

create trigger catalogs_vector_partitions after insert on catalogs
for each row execute function catalogs_vector_partitions();

select create_vector_partitions(id) from catalogs order by id;
"""
)

PLAIN = (
    """
drop trigger catalogs_vector_partitions on catalogs;
drop function catalogs_vector_partitions();
drop function create_vector_partitions(integer);
"""
    + TABLES
)

# HNSW indexes for the catalogs large enough to have had them (2,000 vectors in a table: HNSW_MIN_ROWS). The DDL's
# arguments: 1 the index, 2 the catalog's partition, 3 the table, 4 the dimension, 5 the catalog.
INDEX_ON_PARTITION = (
    "'create index %1$I on %2$I using hnsw ((embedding::vector(%4$s)) vector_cosine_ops) "
    "where vector_dims(embedding) = %4$s'"
)
INDEX_ON_TABLE = (  # as revision 0003 named and shaped them
    "'create index %1$I on %3$I using hnsw ((embedding::vector(%4$s)) vector_cosine_ops) "
    "where catalog_id = %5$s and vector_dims(embedding) = %4$s'"
)
INDEXES = """
do $$
declare
    r record;
begin
    for r in
        select c.id, c.embed_dim, t.name
        from catalogs c cross join unnest(array['tool_vectors', 'intent_examples']) t (name)
        where c.embed_dim is not null
    loop
        if (case r.name
                when 'tool_vectors' then (select count(*) from tool_vectors where catalog_id = r.id)
                else (select count(*) from intent_examples where catalog_id = r.id and embedding is not null)
            end) >= 2000 then
            execute format(DDL, r.name || '_hnsw_' || r.id || '_' || r.embed_dim, r.name || '_c' || r.id, r.name,
                           r.embed_dim, r.id);
        end if;
    end loop;
end
$$;
"""


def upgrade() -> None:
    op.execute(SAVE)
    op.execute(PARTITIONED)
    op.execute(RESTORE)
    op.execute(INDEXES.replace("DDL", INDEX_ON_PARTITION))


def downgrade() -> None:
    op.execute(SAVE)
    op.execute(PLAIN)
    op.execute(RESTORE)
    op.execute(INDEXES.replace("DDL", INDEX_ON_TABLE))
