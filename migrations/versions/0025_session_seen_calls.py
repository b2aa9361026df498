"""session_seen_calls: the call ids of the calls a session's retention keeps, remembered when a prune takes the calls.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-26

A write to the session log skips the calls up to the last one the session has seen: in its log, or among the newest 64
call ids it logged (``sessions.seen_calls``, migration 0024). A message list cut back further than those 64, once a
prune by age had emptied the log, was taken for new calls and logged again. ``session_seen_calls`` keeps, per logged
call with a call id, its position, ``call_id_hash()`` and time: written with the calls (``append_calls``), looked up by
hash, and trimmed by the catalog's retention (more than ``max_calls`` positions back, or older than ``max_age_days``)
with the log at each write and by a prune, but not by a prune's own age: so it holds the call ids of the calls the
retention keeps, whether or not a prune has taken them from the log. Its rows go with the session's row (a session
forgotten, the catalog dropped) and an import replaces them. Row-level security as on the other session tables. Filled
from each session's log.
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

UPGRADE = """
create table session_seen_calls (
    catalog_id integer not null,
    session_id text not null,
    seq bigint not null check (seq > 0),
    call_hash bigint not null,
    called_at timestamptz not null,
    constraint session_seen_calls_pkey primary key (catalog_id, session_id, seq),
    constraint session_seen_calls_session_fkey foreign key (catalog_id, session_id)
        references sessions (catalog_id, session_id) on delete cascade
);
create index session_seen_calls_hash_idx on session_seen_calls (catalog_id, session_id, call_hash);
insert into session_seen_calls (catalog_id, session_id, seq, call_hash, called_at)
select catalog_id, session_id, seq, call_id_hash(call_id), called_at from session_calls where call_id is not null;
alter table session_seen_calls enable row level security;
create policy session_seen_calls_read on session_seen_calls for select
    using (catalog_id = any ((select visible_catalogs(current_user, false))::integer[]));
create policy session_seen_calls_insert on session_seen_calls for insert
    with check (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));
create policy session_seen_calls_update on session_seen_calls for update
    using (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]))
    with check (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));
create policy session_seen_calls_delete on session_seen_calls for delete
    using (catalog_id = any ((select visible_catalogs(current_user, true))::integer[]));
"""

DOWNGRADE = """
drop table session_seen_calls;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
