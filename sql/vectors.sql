-- Vectors: the embedding cache, tool vectors, and each catalog's HNSW indexes.

-- name: cache_lookup
select text_sha256, embedding from embedding_cache
where model = %(model)s and text_sha256 = any (%(hashes)s::bytea[]);

-- name: cache_writable
-- Only the owner writes the cache (granted roles read it): a vector a tenant wrote would be another tenant's.
select has_table_privilege('embedding_cache', 'insert');

-- name: cache_store
-- Rows go in hash order: two writers caching overlapping texts lock the same keys in the same order.
insert into embedding_cache (model, text_sha256, embedding)
select %(model)s, r.h, r.e from unnest(%(hashes)s::bytea[], %(vectors)s::vector[]) as r (h, e)
order by r.h
on conflict (model, text_sha256) do nothing;

-- name: cache_forget
-- Cached vectors of another width than the embedder's now (a server at the same address restarted serving the model
-- name at another dimension): replaced next by copy_cache or cache_store on the same connection (in autocommit when
-- a write embeds before its transaction, so not always in one).
delete from embedding_cache
where model = %(model)s and text_sha256 = any (%(hashes)s::bytea[]) and vector_dims(embedding) <> %(dim)s;

-- name: cache_prunable
-- Only the owner of toolstore's tables prunes the cache: row-level security shows a granted role its catalogs only,
-- and every other catalog's model would look unused to it.
select pg_has_role(c.relowner, 'USAGE') from pg_class c where c.oid = 'catalogs'::regclass;

-- name: catalog_models
-- The models the catalogs record (a catalog's first vectors set its model).
select distinct embed_model from catalogs where embed_model is not null;

-- name: cache_keys
-- The cache's keys, one index probe each (a loose scan of the primary key), not a read of every vector.
with recursive keys (model) as (
    (select model from embedding_cache order by model limit 1)
    union all
    select (select c.model from embedding_cache c where c.model > k.model order by c.model limit 1)
    from keys k where k.model is not null
)
select model from keys where model is not null;

-- name: cache_prune
-- Not the entries younger than the grace: a catalog's first import caches vectors before it records their model.
delete from embedding_cache where model = any (%(keys)s::text[]) and created_at < now() - %(grace)s::interval;

-- name: copy_cache
copy embedding_cache (model, text_sha256, embedding) from stdin (format binary);

-- name: copy_tool_vectors
-- After delete_tool_vectors of the same tools, in the writer's transaction.
copy tool_vectors (tool_pk, catalog_id, embedding) from stdin (format binary);

-- name: copy_examples
-- Examples not stored yet (checked under the catalog lock).
copy intent_examples (catalog_id, tool_pk, query, embedding) from stdin (format binary);

-- name: copy_example_vectors
-- New vectors of a catalog's examples (a model switch), into a table update_example_vectors then reads.
copy example_vectors_in (pk, embedding) from stdin (format binary);

-- name: example_vectors_in
create temp table if not exists example_vectors_in (pk bigint primary key, embedding vector) on commit delete rows;

-- name: update_example_vectors
update intent_examples e set embedding = n.embedding
from example_vectors_in n
where e.pk = n.pk and e.catalog_id = %(catalog)s;

-- name: upsert_tool_vectors
insert into tool_vectors (tool_pk, catalog_id, embedding)
select t.pk, t.catalog_id, r.embedding
from unnest(%(ids)s::text[], %(vectors)s::vector[]) as r (id, embedding)
join tools t on t.catalog_id = %(catalog)s and t.id = r.id
on conflict (catalog_id, tool_pk) do update set embedding = excluded.embedding;

-- name: delete_tool_vectors
-- Vectors of tools whose content changed without an embedder to re-embed them: none is better than a stale one.
delete from tool_vectors v
using tools t
where v.catalog_id = %(catalog)s and t.catalog_id = %(catalog)s and t.pk = v.tool_pk
  and t.id = any (%(ids)s::text[]);

-- name: clear_tool_vectors
delete from tool_vectors where catalog_id = %(catalog)s;

-- name: vector_indexes
-- A catalog's HNSW indexes on its partitions of both tables, of any dimension, with the parent table's name and
-- whether each is valid (an interrupted CREATE INDEX CONCURRENTLY leaves an invalid one behind).
select c.relname as name, p.relname as table_name, i.indisvalid as valid
from pg_index i
join pg_class c on c.oid = i.indexrelid
join pg_inherits h on h.inhrelid = i.indrelid
join pg_class p on p.oid = h.inhparent
where p.relnamespace = (select oid from pg_namespace where nspname = current_schema())
  and p.relname in ('tool_vectors', 'intent_examples')
  and c.relname ~ ('^(tool_vectors|intent_examples)_hnsw_' || %(catalog)s::text || '(_[0-9]+)?$');

-- name: owns_vector_partitions
-- Whether the session's role may build and drop indexes on these partitions: CREATE INDEX and DROP INDEX need the
-- table's owner (or a member of its role; a superuser may), which a role granted write access is not.
select coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), true)
from pg_class c
where c.relnamespace = (select oid from pg_namespace where nspname = current_schema())
  and c.relname = any (%(partitions)s::text[]);

-- name: orphan_partitions
-- Partitions (and tables detached from the vector tables but not dropped) whose catalog no longer exists, with the
-- parent while attached and whether a concurrent detach was left pending.
select c.relname as name, p.relname as parent, coalesce(h.inhdetachpending, false) as pending
from pg_class c
left join pg_inherits h on h.inhrelid = c.oid
left join pg_class p on p.oid = h.inhparent
where c.relnamespace = (select oid from pg_namespace where nspname = current_schema())
  and c.relkind = 'r'
  and c.relname ~ '^(tool_vectors|intent_examples)_c[0-9]+$'
  and not exists (select 1 from catalogs k where k.id = substring(c.relname from '_c([0-9]+)$')::integer)
order by c.relname;

-- name: catalog_vector_rows
-- How many vectors the catalog has in each vector table, counted up to %(cap)s (enough to decide on an index), and
-- the type an index of its dimension is built on (vector_index_type(), below).
select (select count(*) from (select 1 from tool_vectors v where v.catalog_id = %(catalog)s limit %(cap)s) t),
       (select count(*) from (select 1 from intent_examples e
                              where e.catalog_id = %(catalog)s and e.embedding is not null limit %(cap)s) e),
       vector_index_type(%(dim)s);

-- name: vector_index_type
-- The type a catalog's HNSW index of this dimension is built on (migrations 0011 and 0015): halfvec up to 4,000
-- dimensions, null past that (no index: searched exactly).
select vector_index_type(%(dim)s);

-- name: maintenance_try_lock
-- One index build or ANALYZE at a time per toolstore schema (see toolstore/_indexes.py: maintenance_lock).
select pg_try_advisory_lock(hashtext('toolstore maintenance ' || current_schema()));

-- name: maintenance_unlock
select pg_advisory_unlock(hashtext('toolstore maintenance ' || current_schema()));

-- name: raise_build_memory
-- maintenance_work_mem for an HNSW build, raised to %(kb)s kB when lower (never lowered): for the transaction when
-- %(local)s, else for the session until restore_build_memory. Returns the value it had.
select s.previous,
       set_config('maintenance_work_mem',
                  greatest(pg_size_bytes(s.previous) / 1024, %(kb)s::bigint)::text || 'kB', %(local)s::boolean)
from (select current_setting('maintenance_work_mem') as previous) s;

-- name: restore_build_memory
select set_config('maintenance_work_mem', %(previous)s, false);

-- DDL cannot take bind parameters, and the planner matches a partial index only when the dimension is spelled in:
-- the templates below are composed with psycopg.sql (Identifier for the names, Literal for the integers) in
-- toolstore/_indexes.py, never with string formatting.

-- name: create_vector_index
-- {vtype}: vector_index_type()'s (halfvec up to 4,000 dimensions); knn() orders by the same expression.
create index {concurrently} if not exists {name} on {partition}
using hnsw ((embedding::{vtype}({dim})) {vtype}_cosine_ops) with (m = 16, ef_construction = {ef_construction})
where vector_dims(embedding) = {dim};

-- name: partition_vectors
select count(*) from {partition} where vector_dims(embedding) = {dim};

-- name: drop_vector_index
drop index {concurrently} if exists {name};

-- name: detach_partition
alter table {parent} detach partition {partition} concurrently;

-- name: finalize_detach
alter table {parent} detach partition {partition} finalize;

-- name: drop_partition
drop table if exists {partition};

-- name: drop_lock_wait
-- How long drop_partition waits for its lock (local to its transaction): DROP TABLE of a detached partition takes
-- ACCESS EXCLUSIVE on `tools` (its foreign key's triggers there), and while it waits every reader of `tools` queues.
select set_config('lock_timeout', %(wait)s, true);
