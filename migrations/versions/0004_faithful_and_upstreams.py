"""Faithful definitions and MCP upstreams: each tool's schema and source definition as written, and how to reach
the MCP server a synced tool came from.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

``jsonb`` sorts object keys, and models read a schema in order, so ``tools.parameters_json`` and ``tools.spec_json``
(``json``: the text as written, key order kept) are what toolstore returns; the ``jsonb`` columns stay for queries.
Existing rows are filled from the ``jsonb`` columns (their original order is lost already; a re-import restores it).

``mcp_upstreams`` is written by ``toolstore sync mcp``: per catalog and provider, the command (stdio) or URL
(streamable HTTP) the gateway forwards ``call_tool`` to. Header and env values may be ``${VAR}`` references, expanded
from the gateway's environment at call time, so a secret need not be stored.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        alter table tools add column parameters_json json, add column spec_json json;
        update tools set parameters_json = parameters::json, spec_json = spec::json;

        create table mcp_upstreams (
            catalog_id integer not null references catalogs (id) on delete cascade,
            provider text not null,
            transport text not null check (transport in ('stdio', 'http')),
            command text,
            args text[] not null default '{}',
            env jsonb not null default '{}'::jsonb,
            url text,
            headers jsonb not null default '{}'::jsonb,
            updated_at timestamptz not null default now(),
            constraint mcp_upstreams_pkey primary key (catalog_id, provider),
            constraint mcp_upstreams_target_check
                check ((transport = 'stdio' and command is not null) or (transport = 'http' and url is not null))
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        drop table if exists mcp_upstreams;
        alter table tools drop column if exists parameters_json, drop column if exists spec_json;
        """
    )
