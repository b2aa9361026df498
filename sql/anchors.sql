-- Anchors: per-catalog rules `pattern -> tool, boost` (migration 0008), written under the catalog's lock.
-- route.sql's `anchored` part applies them.

-- name: anchor_tool_pks
select id, pk from tools where catalog_id = %(catalog)s and id = any (%(ids)s::text[]);

-- name: anchor_trial
-- Whether the pattern matches the empty string (every request), then a trial match against adversarial requests
-- of the longest length route() accepts, under a short statement_timeout set by the caller.
select '' ~* %(pattern)s::text as matches_empty,
       (select bool_or(s ~* %(pattern)s::text) from unnest(%(inputs)s::text[]) s) as matched;

-- name: statement_timeout
-- statement_timeout for the rest of the transaction (local), and what it was: the anchors' trial match, and each
-- statement of a route, sent with it in one pipeline (one round trip, one implicit transaction: nothing else capped).
select current_setting('statement_timeout') as previous, set_config('statement_timeout', %(value)s, true);

-- name: clear_anchors
-- What went (`anchors import --replace` counts it, less the rules written again).
delete from anchors where catalog_id = %(catalog)s returning tool_pk, pattern;

-- name: insert_anchors
insert into anchors (catalog_id, tool_pk, pattern, boost)
select %(catalog)s, a.tool_pk, a.pattern, a.boost
from unnest(%(tool_pks)s::bigint[], %(patterns)s::text[], %(boosts)s::float8[]) as a (tool_pk, pattern, boost)
on conflict (catalog_id, tool_pk, pattern) do update set boost = excluded.boost
returning pk;

-- name: count_anchors
select count(*) from anchors where catalog_id = %(catalog)s;

-- name: list_anchors
select a.pk as id, a.pattern, t.id as tool, a.boost
from anchors a
join tools t on t.catalog_id = a.catalog_id and t.pk = a.tool_pk
where a.catalog_id = %(catalog)s and (%(ids)s::bigint[] is null or a.pk = any (%(ids)s::bigint[]))
order by a.pk;

-- name: remove_anchors
delete from anchors where catalog_id = %(catalog)s and pk = any (%(ids)s::bigint[]) returning pk;
