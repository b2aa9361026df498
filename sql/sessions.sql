-- The session log: calls appended per session, read back, pruned. Transition counts follow by trigger (migration
-- 0006). Writers of a session lock its `sessions` row first; nothing here locks the catalog.

-- name: call_candidates
-- Tools a model may have meant by the names it called: by id, or by call_key() (migrations 0020, 0029) of their name or
-- id against that of the names' parts (`_names.call_keys`); each lookup indexed. Every tool one of the names may mean
-- under `_names.resolve_name` is among them (the fallback `tool` of a part with no valid character too: `call_keys`
-- also looks a name up without such parts), but for a name form carrying a hash (a name over 64 characters): one that
-- finds no tool here is resolved across the whole catalog (`_steps.resolve_steps`). A call inside a Responses
-- namespace is looked up by its name and kept to the tools in that namespace: `namespace`, the one a tool was imported
-- from (`_names.call_namespace`: else its provider; read from the few rows found, not from every tool).
select id, name, provider, spec -> 'x-toolstore-namespace' -> 'name' as namespace
from tools
where catalog_id = %(catalog)s
  and (id = any (%(names)s::text[])
       or call_key(name) = any (array(select call_key(k) from unnest(%(keys)s::text[]) k))
       or call_key(id) = any (array(select call_key(k) from unnest(%(keys)s::text[]) k)))
order by id;

-- name: call_names
-- `tool_names` with each tool's Responses namespace (as `call_candidates`): the whole catalog's, for resolving calls,
-- some inside a namespace, that `call_candidates` did not all resolve. Kept apart from `tool_names`, which does not
-- read every tool's spec.
select id, name, provider, spec -> 'x-toolstore-namespace' -> 'name' as namespace
from tools where catalog_id = %(catalog)s order by id;

-- name: database_now
-- The database's time, this transaction's: what a call logged without its time gets (`append_calls`), against which
-- a call given its time is checked (`_input.check_call_times`: not more than a clock skew ahead).
select now();

-- name: open_session
-- The session's row, created when new, locked for this transaction: its latest position.
insert into sessions (catalog_id, session_id) values (%(catalog)s, %(session)s)
on conflict (catalog_id, session_id) do update set updated_at = now()
returning last_seq;

-- name: seen_call_ids
-- Of the given call ids, those the session has seen: in its log, among the last ones it logged (`seen_calls`, their
-- call_id_hash(): migration 0024), or among those of the calls its retention keeps (`session_seen_calls`, migration
-- 0025); both kept when its calls go, so calls a prune took are not taken for new ones. Indexed lookups
-- (session_calls_call_id_key, the primary key and session_seen_calls_hash_idx).
select call_id from session_calls
where catalog_id = %(catalog)s and session_id = %(session)s and call_id = any (%(call_ids)s::text[])
union
select c.id from sessions s, unnest(%(call_ids)s::text[]) as c (id)
where s.catalog_id = %(catalog)s and s.session_id = %(session)s
  and (call_id_hash(c.id) = any (s.seen_calls) or c.id = s.last_call_id)
union
select c.id from unnest(%(call_ids)s::text[]) as c (id)
where exists (select 1 from session_seen_calls k
              where k.catalog_id = %(catalog)s and k.session_id = %(session)s and k.call_hash = call_id_hash(c.id));

-- name: reported_call_ids
-- Of the given call ids, those of calls that resolved to no tool that the session has reported already
-- (`reported_calls`, migration 0024): each is reported once, and logged once it resolves.
select c.id from sessions s, unnest(%(call_ids)s::text[]) as c (id)
where s.catalog_id = %(catalog)s and s.session_id = %(session)s and call_id_hash(c.id) = any (s.reported_calls);

-- name: append_calls
-- The calls appended after %(last_seq)s, all or none, and the call ids among them remembered (`session_seen_calls`,
-- migration 0025): each tool id is checked here, in the write, against the catalog's tools (tools_catalog_id_id_key),
-- not taken on trust from the caller that resolved it. Returns the given tool ids that name no tool of the catalog
-- (then nothing is written: `_sessions` resolves them as names, or refuses them).
with c as (
    select c.* from unnest(%(tools)s::text[], %(oks)s::boolean[], %(times)s::timestamptz[], %(call_ids)s::text[])
                    with ordinality as c (tool_id, ok, at, call_id, i)
), missing as (
    select distinct c.tool_id from c
    where not exists (select 1 from tools t where t.catalog_id = %(catalog)s and t.id = c.tool_id)
), appended as (
    insert into session_calls (catalog_id, session_id, seq, tool_id, ok, called_at, call_id)
    select %(catalog)s, %(session)s, %(last_seq)s + c.i, c.tool_id, c.ok, coalesce(c.at, now()), c.call_id
    from c where not exists (select 1 from missing)
), remembered as (
    insert into session_seen_calls (catalog_id, session_id, seq, call_hash, called_at)
    select %(catalog)s, %(session)s, %(last_seq)s + c.i, call_id_hash(c.call_id), coalesce(c.at, now())
    from c where c.call_id is not null and not exists (select 1 from missing)
)
select tool_id from missing;

-- name: advance_session
-- The session's latest position; the call ids it has just logged (oldest first) after those it logged before, as
-- call_id_hash(), the newest %(seen_limit)s kept; those of the list's unresolved calls still new (`reported`), in place
-- of the ones before (null: none in this write, the record kept); and `last_call_id`, the last call id logged, which
-- the release before migration 0024 reads and sets alone (it may run beside this one during a rolling upgrade).
update sessions
set last_seq = %(last_seq)s, updated_at = now(),
    seen_calls = (seen_calls || array(select call_id_hash(c.id)
                                      from unnest(%(seen)s::text[]) with ordinality as c (id, i) order by c.i))
                 [greatest(cardinality(seen_calls) + cardinality(%(seen)s::text[]) - %(seen_limit)s + 1, 1):],
    reported_calls = case when %(reported)s::text[] is null then reported_calls
                          else array(select call_id_hash(c.id) from unnest(%(reported)s::text[]) as c (id)) end,
    last_call_id = coalesce((%(seen)s::text[])[cardinality(%(seen)s::text[])], last_call_id)
where catalog_id = %(catalog)s and session_id = %(session)s;

-- name: reset_session
-- An import replaces the session: no position, no call seen.
with forgotten as (
    delete from session_seen_calls where catalog_id = %(catalog)s and session_id = %(session)s
)
update sessions set last_seq = 0, seen_calls = '{}', reported_calls = '{}', last_call_id = null, updated_at = now()
where catalog_id = %(catalog)s and session_id = %(session)s;

-- name: trim_session
-- The session's calls beyond the catalog's retention: more than max_calls back, or older than max_age (null: none);
-- and the call ids it remembers of them (`session_seen_calls`).
with forgotten as (
    delete from session_seen_calls
    where catalog_id = %(catalog)s and session_id = %(session)s
      and (seq <= %(last_seq)s - %(max_calls)s::bigint or called_at < now() - %(max_age)s::interval)
)
delete from session_calls
where catalog_id = %(catalog)s and session_id = %(session)s
  and (seq <= %(last_seq)s - %(max_calls)s::bigint or called_at < now() - %(max_age)s::interval);

-- name: clear_session
delete from session_calls where catalog_id = %(catalog)s and session_id = %(session)s;

-- name: sessions_to_prune
-- Sessions holding calls a prune deletes (`prune_calls`), or call ids past the retention (`session_seen_calls`), to
-- lock in id order.
select c.session_id
from session_calls c
join sessions s on s.catalog_id = c.catalog_id and s.session_id = c.session_id
where c.catalog_id = %(catalog)s
  and (%(session)s::text is null or c.session_id = %(session)s::text)
  and (%(every)s::boolean or c.called_at < %(before)s::timestamptz or c.seq <= s.last_seq - %(max_calls)s::bigint)
union
select k.session_id
from session_seen_calls k
join sessions s on s.catalog_id = k.catalog_id and s.session_id = k.session_id
where k.catalog_id = %(catalog)s
  and (%(session)s::text is null or k.session_id = %(session)s::text)
  and (%(every)s::boolean or k.called_at < now() - %(max_age)s::interval
       or k.seq <= s.last_seq - %(max_calls)s::bigint)
order by 1;

-- name: lock_sessions
-- The sessions' rows, locked in id order for this transaction, as a writer's `open_session` locks one: an insert, so
-- it also waits for a first write to a session still in progress elsewhere (a select would not see that row and
-- lock nothing). Rows it creates hold no call: `drop_empty_sessions` takes them away again, and `created` says which
-- they are (a row this statement inserted has no xmax; one it updated carries its lock), so a prune counts only the
-- sessions that existed.
insert into sessions (catalog_id, session_id)
select %(catalog)s, s.id from unnest(%(sessions)s::text[]) as s (id) order by s.id
on conflict (catalog_id, session_id) do update set last_seq = sessions.last_seq
returning session_id, xmax = 0 as created;

-- name: prune_calls
-- Every call of the sessions (`every`), or those made before %(before)s or more than %(max_calls)s back (each null:
-- no such limit); and the call ids the sessions remember past the retention (`session_seen_calls`: more than
-- %(max_calls)s back or older than %(max_age)s, not %(before)s: a prune by age takes calls, not what was seen).
with forgotten as (
    delete from session_seen_calls k
    where k.catalog_id = %(catalog)s and k.session_id = any (%(sessions)s::text[])
      and (%(every)s::boolean
           or k.called_at < now() - %(max_age)s::interval
           or k.seq <= (select s.last_seq from sessions s
                        where s.catalog_id = k.catalog_id and s.session_id = k.session_id) - %(max_calls)s::bigint)
)
delete from session_calls c
where c.catalog_id = %(catalog)s and c.session_id = any (%(sessions)s::text[])
  and (%(every)s::boolean
       or c.called_at < %(before)s::timestamptz
       or c.seq <= (select s.last_seq from sessions s where s.catalog_id = c.catalog_id and s.session_id = c.session_id)
                   - %(max_calls)s::bigint);

-- name: drop_empty_sessions
-- The sessions left without calls: all of them when the prune took every call (`every`: the sessions are forgotten),
-- else those that remember no call id (a trim keeps the ones a session has logged or reported: `advance_session`,
-- `session_seen_calls`).
delete from sessions s
where s.catalog_id = %(catalog)s and s.session_id = any (%(sessions)s::text[])
  and (%(every)s::boolean
       or cardinality(s.seen_calls) + cardinality(s.reported_calls) = 0 and s.last_call_id is null
          and not exists (select 1 from session_seen_calls k
                          where k.catalog_id = s.catalog_id and k.session_id = s.session_id))
  and not exists (select 1 from session_calls c where c.catalog_id = s.catalog_id and c.session_id = s.session_id)
returning s.session_id;

-- name: idle_sessions
-- Sessions not written to for %(idle)s (`updated_at`: set by `open_session`, `advance_session`, `reset_session`; a
-- prune's `lock_sessions` leaves it), to lock in id order and forget. No index on updated_at: a scan of the catalog's
-- rows by primary key (31 ms at 100k sessions), where an index would cost every write to a session its HOT update
-- (updated_at changes at each: half the updates were not HOT with one, all were without).
select session_id from sessions
where catalog_id = %(catalog)s and updated_at < now() - %(idle)s::interval
order by session_id;

-- name: forget_idle_calls
-- Every call of the locked sessions that are still idle (a write since the listing made one active again).
delete from session_calls c
using sessions s
where s.catalog_id = %(catalog)s and s.session_id = any (%(sessions)s::text[])
  and s.updated_at < now() - %(idle)s::interval
  and c.catalog_id = s.catalog_id and c.session_id = s.session_id;

-- name: forget_idle_sessions
-- Then their rows (and the call ids each has seen): the sessions are forgotten.
delete from sessions
where catalog_id = %(catalog)s and session_id = any (%(sessions)s::text[])
  and updated_at < now() - %(idle)s::interval
returning session_id;

-- name: list_sessions
select s.session_id, count(c.seq) as calls, min(c.called_at) as first_call, max(c.called_at) as last_call,
       s.updated_at
from sessions s
left join session_calls c on c.catalog_id = s.catalog_id and c.session_id = s.session_id
where s.catalog_id = %(catalog)s
group by s.session_id, s.updated_at
order by s.updated_at desc, s.session_id
limit %(limit)s;

-- name: session_log
select seq, tool_id, ok, called_at, call_id
from session_calls
where catalog_id = %(catalog)s and session_id = %(session)s
order by seq;

-- name: session_exists
-- Whether the session has a row: one whose calls were all pruned keeps it for the call ids it has seen.
select exists (select 1 from sessions where catalog_id = %(catalog)s and session_id = %(session)s);

-- name: transition_counts
-- The catalog's transition counts (from one tool when %(prev)s is given), most frequent first.
select prev_tool, next_tool, n
from tool_transitions
where catalog_id = %(catalog)s and (%(prev)s::text is null or prev_tool = %(prev)s::text)
order by n desc, prev_tool, next_tool
limit %(limit)s;
