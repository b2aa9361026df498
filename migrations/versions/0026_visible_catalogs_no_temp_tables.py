"""visible_catalogs() reads toolstore's tables, never a session's temporary tables of the same names.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-30

The row-level security policies (migration 0005) call ``visible_catalogs(current_user, write)``, a SECURITY DEFINER
function that reads ``catalog_grants``, ``tenant_roles``, ``catalogs`` and ``pg_roles`` by unqualified names, its
search_path pinned to toolstore's schema and pgvector's. Postgres searches a session's temporary schema first for a
relation unless the search_path names ``pg_temp``, before ``pg_catalog`` even; and any role may create temporary tables
(the TEMPORARY privilege PUBLIC has on a database by default). So a granted role, read-only, could create a temporary
``catalog_grants`` granting itself every catalog id, with write: the policies then let it read and change every
catalog. The function's search_path is now toolstore's schema, then ``pg_catalog``, then ``pg_temp`` last, as
Postgres' documentation on writing SECURITY DEFINER functions advises; its body is unchanged.
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# The schema's name is only known when the migration runs (first on the search_path): %I quotes it.
UPGRADE = """
do $$
begin
    execute format('alter function visible_catalogs(name, boolean) set search_path = %I, pg_catalog, pg_temp',
                   current_schema());
end
$$;
"""

DOWNGRADE = """
alter function visible_catalogs(name, boolean) set search_path from current;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
