"""sessions.seen_calls and reported_calls: the call ids a session has logged and reported unresolved (hashed, the
newest 64 of each).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29

A write to the session log skips the calls up to the last one the session has seen. Migration 0021 kept only the last
call id it logged (``last_call_id``) beyond its log, so a message list edited to drop that call, once retention or a
prune by age had emptied the log, was taken for new calls and logged again; and a call that resolved to no tool was
never recorded at all, so ``route_messages`` reported it unresolved at every step until a later call was logged. The row
now keeps ``seen_calls``: ``call_id_hash()`` (the first 8 bytes of the id's sha256, as a bigint) of the last call ids it
has logged, oldest first, cut to the newest 64 at each write (``_sessions.SEEN_CALLS``); and ``reported_calls``, those
of the calls of the last message list that resolved to no tool and are still new (reported once; logged once they
resolve, unless a later call was logged first). They go with the row when the session is forgotten, and an import
replaces them. ``seen_calls`` is filled from each session's log and ``last_call_id``. ``last_call_id`` stays, set to the
last call id logged and still read with ``seen_calls``, so that the processes of the previous release, which read and
set only it, keep logging beside this one during a rolling upgrade; a later revision drops it.

A downgrade sets ``last_call_id`` from each session's log, as 0021 did: a hash cannot be read back, so a session whose
log no longer holds a call id keeps the one it had.
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UPGRADE = """
create function call_id_hash(p_call_id text) returns bigint
language sql immutable parallel safe strict as $$
    select ('x' || left(encode(sha256(convert_to(p_call_id, 'UTF8')), 'hex'), 16))::bit(64)::bigint
$$;
alter table sessions add column seen_calls bigint[] not null default '{}';
alter table sessions add column reported_calls bigint[] not null default '{}';
update sessions s set seen_calls = k.seen
from (
    select catalog_id, session_id, array_agg(call_id_hash(call_id) order by seq) as seen
    from (
        select catalog_id, session_id, call_id, seq,
               row_number() over (partition by catalog_id, session_id order by seq desc) as back
        from (
            select catalog_id, session_id, call_id, seq from session_calls where call_id is not null
            union all
            select s.catalog_id, s.session_id, s.last_call_id, s.last_seq + 1
            from sessions s
            where s.last_call_id is not null
              and not exists (select 1 from session_calls c
                              where c.catalog_id = s.catalog_id and c.session_id = s.session_id
                                and c.call_id = s.last_call_id)
        ) ids
    ) numbered
    where back <= 64
    group by catalog_id, session_id
) k
where s.catalog_id = k.catalog_id and s.session_id = k.session_id;
"""

DOWNGRADE = """
update sessions s set last_call_id = l.call_id
from (
    select distinct on (catalog_id, session_id) catalog_id, session_id, call_id
    from session_calls
    where call_id is not null
    order by catalog_id, session_id, seq desc
) l
where s.catalog_id = l.catalog_id and s.session_id = l.session_id;
alter table sessions drop column seen_calls, drop column reported_calls;
drop function call_id_hash(text);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
