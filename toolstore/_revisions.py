"""toolstore's schema revisions: the head this toolstore ships, what a revision name means (``0017``, ``head-1``,
``base+1``: toolstore's revisions are one numbered line), the revision a schema is at, and a schema newer than this
toolstore refused."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from ._connect import schema_denied
from ._errors import DatabaseError, SchemaAccessError
from ._sql import query

VERSION_TABLE = "toolstore_alembic_version"
HEAD_REVISION = "0029"  # kept equal to alembic's head by a test
_REVISION = re.compile(r"[0-9]{4}")  # toolstore's revisions: 0001, 0002, ...
_STEP = re.compile(r"(head|heads|base|[0-9]{4})([+-][0-9]+)")  # alembic's relative revision: head-1, 0020+2


def current_revision(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """The applied revision, or None when toolstore's schema was never migrated; SchemaAccessError when the role may
    not use the schema (Postgres would say only "permission denied for schema")."""
    denied = schema_denied(conn, schema)
    if isinstance(denied, SchemaAccessError):  # not a schema without tables: that is one never migrated here
        raise denied
    table = sql.Identifier(schema, VERSION_TABLE)
    found = conn.execute(query("version_table"), {"table": table.as_string(conn)}).fetchone()
    if found is None or found[0] is None:
        return None
    row = conn.execute(sql.SQL(query("version_num")).format(table=table)).fetchone()
    return row[0] if row else None


def past_head(revision: str | None) -> bool:
    """Whether ``revision`` is a numbered revision past this toolstore's head (a newer release's)."""
    return revision is not None and revision.isdigit() and int(revision) > int(HEAD_REVISION)


def newer_schema(revision: str | None, schema: str) -> None:
    """DatabaseError when the database was migrated by a newer toolstore (a revision past this one's head)."""
    if past_head(revision):
        raise DatabaseError(
            f"the database's schema {schema!r} is at {revision}, newer than this toolstore ({HEAD_REVISION}): "
            "upgrade toolstore"
        )


def is_below(revision: str, current: str) -> bool:
    """Whether ``revision`` names a revision before ``current`` (toolstore's revisions are numbered)."""
    target = revision_number(revision)
    return target is not None and current.isdigit() and target < int(current)


def is_above(revision: str, current: str | None) -> bool:
    """Whether ``revision`` names a revision after ``current`` (None: the schema is at base)."""
    target = revision_number(revision)
    return target is not None and target > (int(current) if current is not None and current.isdigit() else 0)


def quoted(revision: str) -> str:
    """``revision`` quoted, with the number it names when it is a step or ``head`` (``'head-1' (0025)``)."""
    plain = revision == "base" or _REVISION.fullmatch(revision)
    return repr(revision) if plain else f"{revision!r} ({revision_number(revision):04d})"


def revision_number(revision: str) -> int | None:
    """The number of the revision ``revision`` names: a revision (``0017``), ``base`` (0), ``head``, or one of those
    and a step (``head-1``, ``0020+2``, ``base+1``: toolstore's revisions are one line); None for what alembic alone
    resolves or refuses (a step from the current revision, ``-1``, a revision that does not exist)."""
    if revision in ("head", "heads"):
        return int(HEAD_REVISION)
    if revision == "base":
        return 0
    if _REVISION.fullmatch(revision):
        return int(revision) if 0 < int(revision) <= int(HEAD_REVISION) else None
    step = _STEP.fullmatch(revision)
    start = revision_number(step.group(1)) if step else None
    if step is None or start is None:
        return None
    target = start + int(step.group(2))
    return target if 0 <= target <= int(HEAD_REVISION) else None
