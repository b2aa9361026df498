"""Whether a pool connection not told of a transaction pooler (a store's ``transaction_pooling`` False) is behind one
(PgBouncer's ``pool_mode = transaction``), no pool: the session each connection set up through a proxy (its server
backend, search_path, tenant), kept per connector (:class:`Backends`), and the :class:`TransactionPoolingError` naming
the option that a connection gets once its session looks lost (:func:`session_lost`), rather than what the lost
session makes of its statements: a prepared statement gone, a name or the store's catalog not found."""

from __future__ import annotations

import select
import threading
import weakref
from typing import Any

import psycopg

from ._errors import TransactionPoolingError, UnknownCatalogError, first_line
from ._sql import query

#: A name not found (undefined table, function, object): what a statement run where toolstore's search_path is not
#: set gets; also what a role that may not use the schema gets (``_connect.schema_denied``).
UNDEFINED = frozenset({"42P01", "42883", "42704"})
#: A prepared statement not found (psycopg's InvalidSqlStatementName).
_NOT_PREPARED = "26000"
#: The errors after which a connection through a pooler asks whether its session is still where it set it.
_SUSPECT = UNDEFINED | {_NOT_PREPARED}
_FIX = (
    "give the store transaction_pooling=True (the command line: --transaction-pooling or "
    "$TOOLSTORE_TRANSACTION_POOLING=1), or connect directly or through a pooler in session mode"
)


#: The session a connection's ``set_session`` set, as its row says: the server backend it ran on, the search_path
#: and the tenant (as Postgres spelt them), which block ``backend_session`` reads back.
Session = tuple[int, str, str]
#: Every open pool connection set up through a pooler, in this process: where it connected (host, port, database,
#: user), its :data:`Session`, and its connector's :class:`Backends`.
_BEHIND: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Session, Backends]] = weakref.WeakKeyDictionary()
_BEHIND_LOCK = threading.Lock()


def _open(conn: Any) -> bool:
    """Whether ``conn`` is still open as far as can be told without I/O on it: not closed, and nothing to read on its
    socket (a pooler that ended it, in session mode too, leaves its end readable; psycopg notices at its next use). An
    idle connection has nothing else to read: toolstore listens to nothing, and one at work holds its backend."""
    try:
        return not conn.closed and not select.select([conn.fileno()], [], [], 0)[0]
    except (OSError, ValueError, psycopg.Error):
        return False


class Backends:
    """A connector's connections that reach the server through a proxy (a pooler), each with the session it set (its
    server backend, search_path, tenant), and the connector's verdict once one looked pooled in transaction mode; no
    I/O.

    Postgres tells a client its backend's pid at connect; a pooler tells it one of its own, so a connection whose
    ``set_session`` ran on another backend than that is behind one (a direct connection never is: nothing is kept for
    it, nothing checked). In session mode its statements keep running on that backend, in the session it set; in
    transaction mode each transaction may run on another, where the session toolstore set is not, while the one it
    set is left to the pooler's other clients, who may set theirs over it. That shows as two open connections of the
    process (one store's or two: two tenants) set up on one backend, or, after a prepared statement, a name or the
    store's catalog was not found, as another backend or another session than the one it set (:func:`session_lost`)."""

    def __init__(self) -> None:
        self.verdict: TransactionPoolingError | None = None

    def check(self) -> None:
        """Raise the verdict, if there is one: every call of a connector that looked pooled in transaction mode."""
        if self.verdict is not None:
            raise self.verdict

    def found(self, evidence: str) -> TransactionPoolingError:
        """The verdict (kept): the connection looks pooled in transaction mode, because of ``evidence``."""
        self.verdict = TransactionPoolingError(
            f"the database connection looks pooled in transaction mode (PgBouncer's pool_mode = transaction): "
            f"{evidence}; the session toolstore sets on a connection (search_path, tenant, prepared statements) does "
            f"not follow its transactions there, and is left to the pooler's other clients: {_FIX}"
        )
        return self.verdict

    def set_up(self, conn: Any, session: Session) -> None:
        """``conn``'s session was set (``session``: set_session's row); a :class:`TransactionPoolingError` (for both
        connectors) when another open connection set up through the same pooler was set up on that backend too."""
        info = conn.info
        if info.backend_pid == session[0]:
            return
        where = (info.host, info.port, info.dbname, info.user)
        with _BEHIND_LOCK:
            for other, (at, theirs, owner) in list(_BEHIND.items()):
                if (at, theirs[0]) == (where, session[0]) and _open(other):
                    evidence = f"two open connections were set up on one server backend ({session[0]})"
                    owner.found(evidence)
                    raise self.found(evidence)
            _BEHIND[conn] = (where, session, self)

    @staticmethod
    def suspect(conn: Any, exc: BaseException) -> Session | None:
        """The session ``conn`` set, when it is behind a pooler and ``exc`` may say that session is gone: a prepared
        statement, a name or the store's catalog not found."""
        if not isinstance(exc, UnknownCatalogError) and getattr(exc, "sqlstate", None) not in _SUSPECT:
            return None
        behind = _BEHIND.get(conn)
        return None if behind is None else behind[1]

    def moved(self, session: Session, now: Any, exc: BaseException) -> TransactionPoolingError | None:
        """The verdict after ``exc`` on a connection that set ``session``: a prepared statement not found (psycopg
        forgets those a DEALLOCATE or DISCARD ALL drops), or else (``now``: ``backend_session``'s row read after it,
        None unasked) another backend, or another search_path or tenant, than it set."""
        what = first_line(exc) if isinstance(exc, psycopg.Error) else "its catalog was not found"
        if getattr(exc, "sqlstate", None) == _NOT_PREPARED:
            return self.found(f"a statement toolstore prepared on it is gone ({what})")
        if now is None or tuple(now) == session:
            return None
        if now[0] != session[0]:
            return self.found(f"set up on server backend {session[0]}, it ran on {now[0]}, where {what}")
        return self.found(f"the search_path or tenant on its server backend ({now[0]}) is not the one it set: {what}")


def session_lost(conn: psycopg.Connection[Any], exc: BaseException, backends: Backends) -> Exception | None:
    """After ``exc`` on ``conn`` (a pool connection not told of a transaction pooler): the
    :class:`TransactionPoolingError` when the session set on it is gone (:meth:`Backends.moved`), else None. Asks the
    server only after a name or the catalog not found on a connection through a pooler."""
    session = backends.suspect(conn, exc)
    if session is None:
        return None
    try:
        now = None if _prepared(exc) else conn.execute(query("backend_session")).fetchone()
    except psycopg.Error:  # a failed transaction, or the connection is gone: the original error stands
        return None
    return backends.moved(session, now, exc)


async def session_lost_async(
    conn: psycopg.AsyncConnection[Any], exc: BaseException, backends: Backends
) -> Exception | None:
    """:func:`session_lost` on an async connection."""
    session = backends.suspect(conn, exc)
    if session is None:
        return None
    try:
        now = None if _prepared(exc) else await (await conn.execute(query("backend_session"))).fetchone()
    except psycopg.Error:
        return None
    return backends.moved(session, now, exc)


def _prepared(exc: BaseException) -> bool:
    """Whether ``exc`` is a prepared statement not found."""
    return getattr(exc, "sqlstate", None) == _NOT_PREPARED
