-- Catalogs, tools, vectors and intent examples: the write path and listings.

-- name: ensure_catalog
insert into catalogs (name) values (%(name)s)
on conflict (name) do nothing;

-- name: get_catalog
select id, name, embed_model, embed_dim, settings, version,
       (select count(*) from tools t where t.catalog_id = c.id) as n_tools,
       (select count(*) from intent_examples e where e.catalog_id = c.id) as n_examples
from catalogs c
where c.name = %(name)s;

-- name: get_catalog_light
-- What route() needs, without counting rows.
select id, name, embed_model, embed_dim, settings, version, 0 as n_tools, 0 as n_examples
from catalogs c
where c.name = %(name)s;

-- name: lock_catalog
-- Every write to a catalog takes its row lock first, so writers of one catalog queue in one order (no deadlock).
-- `no key update`: the key stays, so the session log's rows, whose foreign keys share-lock the catalog's key, are
-- written while a catalog write is in progress (logging calls never waits for an import).
select id, name, embed_model, embed_dim, settings, version, 0 as n_tools, 0 as n_examples
from catalogs
where name = %(name)s
for no key update;

-- name: list_catalogs
select c.name, c.embed_model, c.embed_dim,
       (select count(*) from tools t where t.catalog_id = c.id) as n_tools,
       (select count(*) from intent_examples e where e.catalog_id = c.id) as n_examples,
       c.created_at, c.updated_at
from catalogs c
order by c.name;

-- name: drop_catalog
-- Run under the catalog's lock, which every writer of its tools and examples takes: the counts are of what is dropped.
delete from catalogs c where c.name = %(name)s
returning c.id,
          (select count(*) from tools t where t.catalog_id = c.id) as n_tools,
          (select count(*) from intent_examples e where e.catalog_id = c.id) as n_examples;

-- name: set_catalog_model
update catalogs set embed_model = %(model)s, embed_dim = %(dim)s, updated_at = now()
where id = %(catalog)s;

-- name: set_catalog_settings
update catalogs set settings = %(settings)s::jsonb, updated_at = now() where id = %(catalog)s;

-- name: tool_hashes
select id, content_hash from tools where catalog_id = %(catalog)s;

-- name: upsert_tools
-- One statement for the whole batch: the statement-level BM25 triggers fire once, set-based.
-- parameters_json and spec_json arrive as JSON text inside the row, so their key order survives the jsonb batch.
insert into tools (catalog_id, id, name, title, provider, description, parameters, categories, tags, keywords,
                   examples, expansion, avoid_when, always_on, spec, parameters_json, spec_json, content_hash,
                   name_doc, description_doc, expansion_doc)
select %(catalog)s, r.id, r.name, r.title, r.provider, r.description, r.parameters_json::jsonb, r.categories, r.tags,
       r.keywords, r.examples, r.expansion, r.avoid_when, r.always_on, r.spec_json::jsonb, r.parameters_json::json,
       r.spec_json::json, r.content_hash, r.name_doc, r.description_doc, r.expansion_doc
from jsonb_to_recordset(%(rows)s::jsonb) as r (
    id text, name text, title text, provider text, description text, categories text[],
    tags text[], keywords text[], examples text[], expansion text, avoid_when text, always_on boolean,
    parameters_json text, spec_json text, content_hash text, name_doc text, description_doc text, expansion_doc text)
on conflict (catalog_id, id) do update set
    name = excluded.name, title = excluded.title, provider = excluded.provider,
    description = excluded.description, parameters = excluded.parameters, categories = excluded.categories,
    tags = excluded.tags, keywords = excluded.keywords, examples = excluded.examples,
    expansion = excluded.expansion, avoid_when = excluded.avoid_when, always_on = excluded.always_on,
    spec = excluded.spec, parameters_json = excluded.parameters_json, spec_json = excluded.spec_json,
    content_hash = excluded.content_hash, name_doc = excluded.name_doc,
    description_doc = excluded.description_doc, expansion_doc = excluded.expansion_doc, updated_at = now()
where tools.content_hash is distinct from excluded.content_hash
returning id, (xmax = 0) as inserted;

-- name: vectorless_count
-- How many of the catalog's tools have no vector (a tool has at most one): two index-only counts, 11 ms at 100k
-- tools where the anti-join below takes 40, so a write with the embedder runs that only when there are some.
select (select count(*) from tools where catalog_id = %(catalog)s)
       - (select count(*) from tool_vectors where catalog_id = %(catalog)s);

-- name: tools_without_vectors
-- The catalog's tools that have no vector (written while no embedder was at hand), which a write with the embedder
-- embeds: an anti-join of the catalog's tools with its vectors' primary key. With the upstream that synced each (a
-- sync's prune removes that upstream's tools it does not keep, which are not embedded first).
select t.id, t.upstream
from tools t
where t.catalog_id = %(catalog)s
  and not exists (select 1 from tool_vectors v where v.catalog_id = t.catalog_id and v.tool_pk = t.pk)
order by t.id;

-- name: prune_tools
-- The catalog's tools not kept; with an upstream, only those it synced (a sync owns its server's tools only, never a
-- tool imported by hand under the same provider: migration 0022).
delete from tools
where catalog_id = %(catalog)s and id <> all (%(keep)s::text[])
  and (%(upstream)s::text is null or upstream = %(upstream)s::text)
returning id;

-- name: namespace_records
-- The Responses namespaces of the names given that the catalog's tools were imported from (each tool's record in its
-- spec, _formats.build.NAMESPACE_KEY): one row (its first tool) per distinct record, so a name of two rows is a
-- namespace given twice, differently, which a write refuses.
select distinct on (spec -> 'x-toolstore-namespace') id, spec -> 'x-toolstore-namespace' as record
from tools
where catalog_id = %(catalog)s and spec -> 'x-toolstore-namespace' ->> 'name' = any (%(names)s::text[])
order by spec -> 'x-toolstore-namespace', id;

-- name: delete_tool
delete from tools where catalog_id = %(catalog)s and id = %(id)s returning id;

-- name: tool_pks
select id, pk from tools where catalog_id = %(catalog)s and id = any (%(ids)s::text[]);

-- name: insert_examples
insert into intent_examples (catalog_id, tool_pk, query, embedding)
select %(catalog)s, t.pk, r.query, r.embedding
from unnest(%(ids)s::text[], %(queries)s::text[], %(vectors)s::vector[]) as r (id, query, embedding)
join tools t on t.catalog_id = %(catalog)s and t.id = r.id
on conflict (catalog_id, tool_pk, query) do nothing
returning pk;

-- name: existing_examples
select t.id, e.query
from intent_examples e
join tools t on t.catalog_id = e.catalog_id and t.pk = e.tool_pk
where e.catalog_id = %(catalog)s and e.embedding is not null;

-- name: list_tools
select id, name, description, title, provider, parameters_json as parameters, categories, tags, keywords, examples,
       expansion, avoid_when, always_on, spec_json as spec
from tools
where catalog_id = %(catalog)s
order by id;

-- name: get_tools
select id, name, description, title, provider, parameters_json as parameters, categories, tags, keywords, examples,
       expansion, avoid_when, always_on, spec_json as spec
from tools
where catalog_id = %(catalog)s and id = any (%(ids)s::text[])
order by id;

-- name: all_examples
select e.pk, e.query from intent_examples e where e.catalog_id = %(catalog)s order by e.pk;

-- name: analyze_tables
-- Fresh statistics after a bulk load: without them the BM25 joins start from the postings, not the terms. The
-- vector tables by the catalog's partitions (composed in toolstore/_indexes.py: analyze_ddl). Of tools and the
-- vector partitions, only the columns statements select or join by: the documents, schemas, tsvectors and vectors
-- are never estimated, and their statistics took most of the time (after an import of 10k tools, alternated 8
-- times: 402 ms whole, 182 ms so, medians). Autovacuum's own ANALYZEs still cover every column.
analyze tools (catalog_id, pk, id, name, provider, always_on, avoid_when, categories, tags), postings,
        lexeme_stats, field_stats, {tool_vectors} (catalog_id, tool_pk),
        {intent_examples} (catalog_id, pk, tool_pk, query);

-- name: analyze_examples
-- After a write of intent examples only: the catalog's partition of them (not their vectors, as above).
analyze {intent_examples} (catalog_id, pk, tool_pk, query);

-- name: tool_names
-- What resolving a model's tool name needs: every way a tool can be named (narrow rows, no documents).
select id, name, provider from tools where catalog_id = %(catalog)s order by id;
