"""Tenants enforced by Postgres (migration 0005): grant a database role one catalog, read-only or read-write, or make
it a tenant role that sees the catalog its connection names; row-level security does the rest.

Run as the role that owns toolstore's tables (the one that ran the migrations). Table privileges follow the grants:
a role with any grant may read toolstore's tables (rows of its catalogs only), a role with a write grant may change
them (rows of its writable catalogs only; of a ``catalogs`` row only the columns the write path sets: model, dimension,
settings, ``updated_at``), a role whose last grant is revoked loses its privileges
(``_migrate.set_privileges``, which a migration to head runs again for every granted role: tables it creates are
covered).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._catalog_row import lock_catalog
from ._errors import InvalidInputError
from ._input import check_text
from ._migrate import privileges_lock, set_privileges
from ._sql import query

MAX_ROLE_CHARS = 63  # Postgres truncates identifiers beyond this


def check_role(role: object) -> str:
    """A role name as grant and revoke take it: a non-empty string of at most :data:`MAX_ROLE_CHARS` characters."""
    return check_text(role, "role", max_chars=MAX_ROLE_CHARS)


def _exists(conn: psycopg.Connection[Any], role: str) -> bool:
    return conn.execute(query("role_exists"), {"role": role}).fetchone() is not None


def _role(conn: psycopg.Connection[Any], role: str) -> str:
    check_role(role)
    if not _exists(conn, role):
        raise InvalidInputError(f"no database role named {role!r} (create it first: CREATE ROLE ... LOGIN)")
    return _not_owner(conn, role)


def _not_owner(conn: psycopg.Connection[Any], role: str) -> str:
    """``role``, an InvalidInputError when it owns toolstore's tables (a grant to it would take its own away)."""
    if conn.execute(query("owns_tables"), {"role": role}).fetchone()[0]:  # type: ignore[index]
        raise InvalidInputError(
            f"role {role!r} owns toolstore's tables: it reads and writes every catalog without a grant (and the "
            "privileges a grant sets would take its own away)"
        )
    return role


def grant(conn: psycopg.Connection[Any], schema: str, catalog: str | None, role: str, *, write: bool) -> None:
    """Let ``role`` see (``write``: and change) ``catalog``; with ``catalog`` None, make it a tenant role."""
    with conn.transaction():
        privileges_lock(conn)
        role = _role(conn, role)
        if catalog is None:
            conn.execute(query("grant_tenant"), {"role": role, "write": write})
        else:
            info = lock_catalog(conn, catalog)
            conn.execute(query("grant_catalog"), {"catalog": info.id, "role": role, "write": write})
        set_privileges(conn, schema, role)


def revoke(conn: psycopg.Connection[Any], schema: str, catalog: str | None, role: str) -> bool:
    """Take ``catalog`` (None: the tenant role) away from ``role``; False when there was no such grant. A role that
    does not exist is an InvalidInputError naming it, nothing changed, unless a grant of it is left from before it was
    dropped: that is revoked (it has no privileges left to take)."""
    with conn.transaction():
        privileges_lock(conn)
        exists = _exists(conn, check_role(role))
        if exists:
            _not_owner(conn, role)
        if catalog is None:
            gone = conn.execute(query("revoke_tenant"), {"role": role}).fetchone()
        else:
            info = lock_catalog(conn, catalog)
            gone = conn.execute(query("revoke_catalog"), {"catalog": info.id, "role": role}).fetchone()
        if not exists and gone is None:  # raised inside the transaction: nothing is changed
            raise InvalidInputError(f"no database role named {role!r}: it has no grant to revoke")
        if exists:
            set_privileges(conn, schema, role)
    return gone is not None


def grants(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Every grant: ``{"catalog": name or None (a tenant role), "role", "write"}``."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("list_grants")).fetchall()
