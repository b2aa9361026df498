"""call_key(): the coarse key by which the tools a model's call names are found, and its indexes.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26

A model calls a tool by one of its model-facing names (``toolstore/_names.py``): its name made valid (runs of other
characters than ``[a-zA-Z0-9_-]`` as ``_``), ``provider__name``, or its id's parts joined by ``__``. The tools such
a name may mean were looked up by ``lower(name)`` of the called name and of its part after ``provider__``, which
misses a tool whose own name is not valid as it stands (``do it`` offered as ``a__do_it``): then the name could
resolve to another tool, or an ambiguity go unseen. ``call_key()`` keeps only the letters and digits, lower-cased;
every name form of a tool that carries no hash then has the ``call_key()`` of its name, of its id, or (the part after
the provider) of its name again, so ``call_candidates`` (``sql/sessions.sql``) finds every tool a name may mean, but
where a name or id part has no valid character and is offered as ``tool``: there ``_names.indexed_lookup_suffices``
sends the lookup to the whole catalog.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

UPGRADE = """
create function call_key(p_name text) returns text
language sql immutable parallel safe strict as $$
    select lower(regexp_replace(p_name, '[^a-zA-Z0-9]+', '', 'g'))
$$;
create index tools_call_name_idx on tools (catalog_id, call_key(name));
create index tools_call_id_idx on tools (catalog_id, call_key(id));
"""

DOWNGRADE = """
drop index tools_call_id_idx;
drop index tools_call_name_idx;
drop function call_key(text);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
