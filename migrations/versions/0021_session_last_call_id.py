"""sessions.last_call_id: the last call id a session logged, kept when retention or a prune trims its log.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27

A write to the session log skips the calls it was given up to the last one whose call id the session has logged
(``_sessions._append``: an agent passes its whole message list at every step). That was read from the log alone, so
a session whose calls retention or a prune by age had all taken (or trimmed to calls without a call id) took the
same message list for new calls and logged them again, with fresh times and the transitions the log no longer had.
The session's row now keeps the call id of the latest call it logged with one, set by every append and kept when
its calls go; a trim therefore keeps a row that holds one (``drop_empty_sessions``: only a prune of every call of a
session forgets it, and an import replaces it). The column is filled from each session's log.
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

UPGRADE = """
alter table sessions add column last_call_id text;
update sessions s set last_call_id = l.call_id
from (
    select distinct on (catalog_id, session_id) catalog_id, session_id, call_id
    from session_calls
    where call_id is not null
    order by catalog_id, session_id, seq desc
) l
where s.catalog_id = l.catalog_id and s.session_id = l.session_id;
"""

# A row kept for its call id alone stays, a session without calls as revision 0020 also has them (an import of none).
DOWNGRADE = """
alter table sessions drop column last_call_id;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
