"""The session log read back (``sql/sessions.sql``): the sessions, one session's calls, whether a session exists, the
transition counts. Connection-level functions, as ``_sessions``' writes; the stores' methods (``_session_methods``)
run them on the primary, where the log is written."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._errors import InvalidInputError
from ._input import MAX_ID_CHARS, check_session, check_text
from ._models import CatalogInfo, LoggedCall
from ._sql import query

#: Rows a listing shows at most: Postgres's LIMIT is a bigint.
MAX_LIMIT = 2**63 - 1


def check_limit(limit: object) -> int:
    """A listing's ``limit``, an integer from 1 to :data:`MAX_LIMIT`; InvalidInputError otherwise (the database said
    'LIMIT must not be negative' or 'bigint out of range' as a DatabaseError)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be an integer from 1 to {MAX_LIMIT:,}, got {limit!r:.80}")
    return limit


def list_sessions(conn: psycopg.Connection[Any], info: CatalogInfo, *, limit: int = 100) -> list[dict[str, Any]]:
    """The catalog's sessions, most recently written first: id, number of calls, first and last call times."""
    params = {"catalog": info.id, "limit": check_limit(limit)}
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("list_sessions"), params).fetchall()


def session_log(conn: psycopg.Connection[Any], info: CatalogInfo, session: str) -> list[LoggedCall]:
    """Every logged call of one session, oldest first."""
    params = {"catalog": info.id, "session": check_session(session)}
    return [LoggedCall(*row) for row in conn.execute(query("session_log"), params)]


def has_session(conn: psycopg.Connection[Any], info: CatalogInfo, session: str) -> bool:
    """Whether the catalog has a row for ``session``: logged calls, or none left but the call ids it has seen."""
    row = conn.execute(query("session_exists"), {"catalog": info.id, "session": check_session(session)}).fetchone()
    return bool(row and row[0])


def transitions(
    conn: psycopg.Connection[Any], info: CatalogInfo, *, prev: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The catalog's transition counts (``prev_tool``, ``next_tool``, ``n``), most frequent first."""
    prev = None if prev is None else check_text(prev, "prev", max_chars=MAX_ID_CHARS)  # a number matched nothing
    params = {"catalog": info.id, "prev": prev, "limit": check_limit(limit)}
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("transition_counts"), params).fetchall()
