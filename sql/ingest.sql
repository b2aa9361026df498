-- Ingestion and enrichment: intent examples for offline expansions.

-- name: intent_queries
-- The labelled example requests of every tool of a catalog, oldest first per tool.
select t.id, e.query
from intent_examples e
join tools t on t.pk = e.tool_pk
where e.catalog_id = %(catalog)s
order by t.id, e.pk;
