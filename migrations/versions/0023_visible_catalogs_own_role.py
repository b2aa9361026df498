"""visible_catalogs() answers a role only about itself (and the roles it is a member of).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28

The row-level security policies (migration 0005) call ``visible_catalogs(current_user, write)``, a SECURITY DEFINER
function (a granted role may not read the grant tables itself) that everyone may execute. It answered for any role
it was given: a granted role could call ``visible_catalogs('another_role', false)`` and learn which catalog ids that
role sees (and, naming a tenant role with ``toolstore.tenant`` set to any name, the id of any catalog). Inside a
SECURITY DEFINER function ``current_user`` is the owner, so the caller cannot be read there; the role asked about
must now be one the session's user is a member of (itself, or a role it may act as, whose grants it already sees
through the policies), else the answer is no catalog. The policies pass ``current_user``, which is that role for
every query of a session (``SET ROLE`` included), so what they let through is unchanged.
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_BODY = """
create or replace function visible_catalogs(p_role name, p_write boolean) returns integer[]
language sql stable security definer set search_path from current as $$
    select coalesce(array_agg(distinct s.id), '{{}}')
    from (
        select g.catalog_id as id
        from catalog_grants g
        join pg_roles r on r.rolname = g.role
        where pg_has_role(p_role, r.oid, 'MEMBER') and (g.can_write or not p_write)
        union all
        select c.id
        from tenant_roles t
        join pg_roles r on r.rolname = t.role
        join catalogs c on c.name = current_setting('toolstore.tenant', true)
        where pg_has_role(p_role, r.oid, 'MEMBER') and (t.can_write or not p_write)
    ) s{guard}
$$;
"""

UPGRADE = _BODY.format(guard="\n    where pg_has_role(session_user, p_role, 'MEMBER')")
DOWNGRADE = _BODY.format(guard="")


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
