"""The session log: the tool calls of each conversation, and tool-to-tool transition counts kept from it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

``sessions`` holds one row per (catalog, session id): the position of its latest call. Writers of one session take
that row's lock first, so concurrent writers append in turn and positions stay gapless; writers of different
sessions never wait for each other (nothing here takes the catalog's lock).

``session_calls`` is the log: per call its position in the session (``seq``, from 1), the tool id, whether it
succeeded, when it was made and, when the caller had one, the provider's call id (so recording a message list twice
writes its calls once). No user text is stored. Tool ids are text, not references: removing a tool keeps its
history, and a tool that comes back finds it again.

``tool_transitions`` counts, per catalog, how often tool ``next_tool`` was the call right after ``prev_tool`` in the
same session: the number of pairs of calls at positions (s, s + 1) both present in the log. Statement-level triggers
keep it exact on every insert and delete of calls (a log prune, a session trimmed to its limit, a session or catalog
deleted), with upserts in key order so concurrent writers cannot deadlock on it. route() reads this small table and
never the log. All three tables get migration 0005's row-level security: a granted role reads the sessions of the
catalogs it may read and logs calls only where it may write.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLES = """
create table sessions (
    catalog_id integer not null references catalogs (id) on delete cascade,
    session_id text not null,
    last_seq bigint not null default 0,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint sessions_pkey primary key (catalog_id, session_id)
);

create table session_calls (
    catalog_id integer not null,
    session_id text not null,
    seq bigint not null check (seq > 0),
    tool_id text not null,
    ok boolean not null default true,
    called_at timestamptz not null default now(),
    call_id text,
    constraint session_calls_pkey primary key (catalog_id, session_id, seq),
    constraint session_calls_call_id_key unique (catalog_id, session_id, call_id),
    constraint session_calls_session_fkey foreign key (catalog_id, session_id)
        references sessions (catalog_id, session_id) on delete cascade
);
create index session_calls_called_at_idx on session_calls (catalog_id, called_at);

create table tool_transitions (
    catalog_id integer not null references catalogs (id) on delete cascade,
    prev_tool text not null,
    next_tool text not null,
    n bigint not null check (n >= 0),
    constraint tool_transitions_pkey primary key (catalog_id, prev_tool, next_tool) include (n)
);
"""

# Both triggers touch count rows in key order (rows locked in one order: concurrent writers cannot deadlock on them).
# A catalog's cascade deletes its counts with its log, so a delete finds nothing left to decrement there.
FUNCTIONS = """
-- New calls: each new call and the call right before it in its session (new or already logged) make one pair.
create function session_calls_after_insert() returns trigger
language plpgsql set search_path from current as $$
begin
    insert into tool_transitions (catalog_id, prev_tool, next_tool, n)
    select c.catalog_id, p.tool_id, c.tool_id, count(*)
    from new_rows c
    join session_calls p on p.catalog_id = c.catalog_id and p.session_id = c.session_id and p.seq = c.seq - 1
    group by c.catalog_id, p.tool_id, c.tool_id
    order by c.catalog_id, p.tool_id, c.tool_id
    on conflict (catalog_id, prev_tool, next_tool) do update set n = tool_transitions.n + excluded.n;
    return null;
end
$$;

-- Deleted calls: every pair with a deleted end goes, counted once: (deleted, deleted), (kept, deleted) and
-- (deleted, kept). The rows are locked in key order first, then decremented; those at 0 are dropped.
create function session_calls_after_delete() returns trigger
language plpgsql set search_path from current as $$
declare
    k_catalogs integer[];
    k_prev text[];
    k_next text[];
    k_counts bigint[];
begin
    select array_agg(g.catalog_id), array_agg(g.prev_tool), array_agg(g.next_tool), array_agg(g.cnt)
    into k_catalogs, k_prev, k_next, k_counts
    from (
        select p.catalog_id, p.prev_tool, p.next_tool, count(*) as cnt
        from (
            select b.catalog_id, a.tool_id as prev_tool, b.tool_id as next_tool
            from old_rows b
            join old_rows a on a.catalog_id = b.catalog_id and a.session_id = b.session_id and a.seq = b.seq - 1
            union all
            select b.catalog_id, a.tool_id, b.tool_id
            from old_rows b
            join session_calls a on a.catalog_id = b.catalog_id and a.session_id = b.session_id and a.seq = b.seq - 1
            union all
            select a.catalog_id, a.tool_id, b.tool_id
            from old_rows a
            join session_calls b on b.catalog_id = a.catalog_id and b.session_id = a.session_id and b.seq = a.seq + 1
        ) p
        group by p.catalog_id, p.prev_tool, p.next_tool
    ) g;
    if k_catalogs is null then
        return null;
    end if;
    perform 1
    from tool_transitions x
    join unnest(k_catalogs, k_prev, k_next) as z (catalog_id, prev_tool, next_tool)
      on x.catalog_id = z.catalog_id and x.prev_tool = z.prev_tool and x.next_tool = z.next_tool
    order by x.catalog_id, x.prev_tool, x.next_tool
    for update of x;
    update tool_transitions x set n = x.n - z.cnt
    from unnest(k_catalogs, k_prev, k_next, k_counts) as z (catalog_id, prev_tool, next_tool, cnt)
    where x.catalog_id = z.catalog_id and x.prev_tool = z.prev_tool and x.next_tool = z.next_tool;
    delete from tool_transitions x
    using unnest(k_catalogs, k_prev, k_next) as z (catalog_id, prev_tool, next_tool)
    where x.catalog_id = z.catalog_id and x.prev_tool = z.prev_tool and x.next_tool = z.next_tool and x.n = 0;
    return null;
end
$$;

create trigger session_calls_transitions_insert after insert on session_calls
    referencing new table as new_rows for each statement execute function session_calls_after_insert();
create trigger session_calls_transitions_delete after delete on session_calls
    referencing old table as old_rows for each statement execute function session_calls_after_delete();
"""

# Row-level security as on every catalog-scoped table (migration 0005): a role sees the sessions of the catalogs it
# may read and logs calls only in catalogs it may write.
SCOPED = ("sessions", "session_calls", "tool_transitions")


def _policies(table: str) -> str:
    visible = "catalog_id = any ((select visible_catalogs(current_user, false))::integer[])"
    writable = "catalog_id = any ((select visible_catalogs(current_user, true))::integer[])"
    return f"""
alter table {table} enable row level security;
create policy {table}_read on {table} for select using ({visible});
create policy {table}_insert on {table} for insert with check ({writable});
create policy {table}_update on {table} for update using ({writable}) with check ({writable});
create policy {table}_delete on {table} for delete using ({writable});
"""


DROP = """
drop table if exists tool_transitions, session_calls, sessions cascade;
drop function if exists session_calls_after_insert(), session_calls_after_delete();
"""


def upgrade() -> None:
    op.execute(TABLES)
    op.execute(FUNCTIONS)
    for table in SCOPED:
        op.execute(_policies(table))


def downgrade() -> None:
    op.execute(DROP)
