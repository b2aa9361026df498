"""Tenants enforced by Postgres: row-level security on every catalog-scoped table.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

A database role other than the tables' owner sees and changes only the catalogs granted to it:

- ``catalog_grants``: explicit grants, one row per (catalog, role), read-only or read-write
  (``toolstore grant ROLE [--write]`` with ``--catalog``).
- ``tenant_roles``: roles that see the one catalog their connection names in the ``toolstore.tenant`` setting
  (``ToolStore`` sets it to its catalog on every connection). For applications with one login role that keep
  tenants apart themselves: it guards against the application's mistakes, not against the application.

The owner (the role that ran the migrations) is not subject to the policies. ``visible_catalogs(role, write)`` is
SECURITY DEFINER so that a granted role can evaluate a policy without reading the grant tables; policies call it
through a sub-select, so it runs once per statement and table, not once per row. ``embedding_cache`` is shared on
purpose (vectors keyed by model and sha256 of a text; it holds no text and no catalog).
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCOPED = {  # table -> its catalog column
    "catalogs": "id",
    "tools": "catalog_id",
    "postings": "catalog_id",
    "lexeme_stats": "catalog_id",
    "field_stats": "catalog_id",
    "tool_vectors": "catalog_id",
    "intent_examples": "catalog_id",
    "mcp_upstreams": "catalog_id",
}

TABLES = """
create table catalog_grants (
    catalog_id integer not null references catalogs (id) on delete cascade,
    role text not null,
    can_write boolean not null default false,
    created_at timestamptz not null default now(),
    constraint catalog_grants_pkey primary key (catalog_id, role)
);

create table tenant_roles (
    role text not null,
    can_write boolean not null default false,
    created_at timestamptz not null default now(),
    constraint tenant_roles_pkey primary key (role)
);

create function visible_catalogs(p_role name, p_write boolean) returns integer[]
language sql stable security definer set search_path from current as $$
    select coalesce(array_agg(distinct s.id), '{}')
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
    ) s
$$;
"""


def _policies(table: str, column: str) -> str:
    visible = f"{column} = any ((select visible_catalogs(current_user, false))::integer[])"
    writable = f"{column} = any ((select visible_catalogs(current_user, true))::integer[])"
    return f"""
alter table {table} enable row level security;
create policy {table}_read on {table} for select using ({visible});
create policy {table}_insert on {table} for insert with check ({writable});
create policy {table}_update on {table} for update using ({writable}) with check ({writable});
create policy {table}_delete on {table} for delete using ({writable});
"""


def upgrade() -> None:
    op.execute(TABLES)
    for table, column in SCOPED.items():
        op.execute(_policies(table, column))


def downgrade() -> None:
    for table in SCOPED:
        op.execute(
            f"""
drop policy if exists {table}_read on {table};
drop policy if exists {table}_insert on {table};
drop policy if exists {table}_update on {table};
drop policy if exists {table}_delete on {table};
alter table {table} disable row level security;
"""
        )
    op.execute("drop function if exists visible_catalogs(name, boolean)")
    op.execute("drop table if exists tenant_roles, catalog_grants")
