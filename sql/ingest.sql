-- Ingestion and enrichment: scoped pruning for MCP syncs, intent examples for offline expansions.

-- name: prune_provider_tools
-- A sync owns the tools of its provider only: other servers' tools in the same catalog stay.
delete from tools
where catalog_id = %(catalog)s and provider = %(provider)s and id <> all (%(keep)s::text[])
returning id;

-- name: intent_queries
-- The labelled example requests of every tool of a catalog, oldest first per tool.
select t.id, e.query
from intent_examples e
join tools t on t.pk = e.tool_pk
where e.catalog_id = %(catalog)s
order by t.id, e.pk;
