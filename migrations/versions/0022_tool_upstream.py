"""tools.upstream: the MCP upstream that synced a tool (its provider in ``mcp_upstreams``), null for a tool imported.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

``toolstore sync mcp --prune`` removed every tool of the provider that the server no longer offered, so a first sync
of a provider whose tools had been imported by hand (``toolstore import tools.json`` under ``github``) deleted them. A
sync now marks each tool it writes with its upstream, prunes only tools so marked, and refuses to take over a tool of
the same id imported by hand (``_mcp_sync``). Tools synced before this revision are marked here: those of a provider
with an upstream recorded whose definition is an MCP tool's (its spec has ``inputSchema``, as a synced tool's always
has), so an upgraded catalog's next ``--prune`` still removes what its upstream synced before. A tool imported by hand
in the MCP format under a provider synced since cannot be told apart and is counted as synced, as it was before.
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

UPGRADE = """
alter table tools add column upstream text;
update tools t set upstream = t.provider
from mcp_upstreams u
where u.catalog_id = t.catalog_id and u.provider = t.provider and t.spec ? 'inputSchema';
"""

DOWNGRADE = """
alter table tools drop column upstream;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
