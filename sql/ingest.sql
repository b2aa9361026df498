-- Ingestion and enrichment: intent examples for offline expansions.

-- name: intent_queries
-- The labelled example requests of every tool of a catalog, oldest first per tool.
select t.id, e.query
from intent_examples e
join tools t on t.catalog_id = e.catalog_id and t.pk = e.tool_pk
where e.catalog_id = %(catalog)s
order by t.id, e.pk;

-- name: save_upstream
-- How a synced provider's MCP server is reached, for the gateway's call_tool (one row per catalog and provider).
insert into mcp_upstreams (catalog_id, provider, transport, command, args, env, url, headers)
values (%(catalog)s, %(provider)s, %(transport)s, %(command)s, %(args)s, %(env)s::jsonb, %(url)s, %(headers)s::jsonb)
on conflict (catalog_id, provider) do update set
    transport = excluded.transport, command = excluded.command, args = excluded.args, env = excluded.env,
    url = excluded.url, headers = excluded.headers, updated_at = now();

-- name: records_upstreams
-- Whether the connected role may record how the gateway reaches an upstream: the owner of toolstore's tables (a granted
-- role may not, whatever its grant: the gateway runs a stdio upstream's command and expands its ${VAR}s).
select has_table_privilege('mcp_upstreams', 'insert') and has_table_privilege('mcp_upstreams', 'update');

-- name: get_upstream
select transport, command, args, env, url, headers
from mcp_upstreams
where catalog_id = %(catalog)s and provider = %(provider)s;

-- name: upstreams
-- Every MCP upstream recorded in a catalog, by provider: the gateway looks for a tool the catalog lacks in the latest
-- listings of those it holds a session to.
select provider, transport, command, args, env, url, headers
from mcp_upstreams
where catalog_id = %(catalog)s
order by provider;

-- name: foreign_tools
-- Of the ids a sync writes, those the catalog holds that this upstream did not sync (imported by hand, or synced by
-- another upstream): a sync refuses to take them over unless told to (migration 0022).
select id, upstream
from tools
where catalog_id = %(catalog)s and id = any (%(ids)s::text[]) and upstream is distinct from %(upstream)s::text
order by id;

-- name: claim_tools
-- The tools a sync wrote (new, changed or unchanged) as its upstream's: they are what its --prune may remove.
update tools set upstream = %(upstream)s::text
where catalog_id = %(catalog)s and id = any (%(ids)s::text[]) and upstream is distinct from %(upstream)s::text;

-- name: repeatable_read
-- First in a transaction: one snapshot for all its reads (`toolstore expand`: the tools, their hashes and examples).
set transaction isolation level repeatable read;
