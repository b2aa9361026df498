"""What a write committed before its connection was lost: the pool's connections (:class:`WatchedConnection`) note
each outermost transaction's id while ``_connect.Connector.run`` watches them (:class:`Commits`), and a COMMIT lost
with its connection is settled by asking a fresh connection ``pg_xact_status``: committed, the write goes on as after
any COMMIT; aborted, it was not written. ``run`` tries a write once more only when nothing of it was committed.
What follows a committed write and can be done twice (:func:`follow_up`: its index build, ANALYZE), lost with the
connection, ``run`` does once more on a fresh one instead.

A server that restarted meanwhile (a crash) may have handed the id out again: a transaction whose commit record never
reached its disk leaves no trace, and after recovery its id can be another's. Then "committed" may be the other's
(:data:`RESTARTED`: not told, so not tried again), while any other answer, and "in the future", say it did not commit
(had it, its id would never be given again)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from ._deadline import Unanswered
from ._errors import DatabaseError, first_line
from ._lending import connection_lost
from ._observe import logger
from ._sql import query

#: Seconds between two questions about a transaction whose outcome is not final yet (its backend still ending), and
#: between two tries to connect to ask (the server restarting).
POLL, RECONNECT = 0.05, 0.25
#: Why a transaction said committed by a server that restarted since it began is not taken for done.
RESTARTED = "the server restarted since, and may have given its id to another transaction"
#: What to do after a write whose outcome is unknown.
LOOK_FIRST = (
    "look before running it again (an upsert, an import or add_examples run again writes the same catalog; "
    "a remove run again says the tool is not there if the first took effect)"
)
#: pg_xact_status of an id the server has not handed out (yet, after a restart that lost it): invalid_parameter_value.
FUTURE = "22023"


@dataclass(frozen=True)
class FollowUp:
    """Work that follows a committed write and can be done twice (:func:`follow_up`): ``step`` on a connection,
    ``what`` it does (``"building catalog 'c''s HNSW indexes"``) and ``later``: who does it when it is not done."""

    step: Callable[[psycopg.Connection[Any]], object]
    what: str
    later: str


class Commits:
    """One try of a write, as its connection's transactions tell it: whether a transaction of it committed (so a
    second try would write twice) or one's COMMIT was lost and its outcome could not be told (``undecided``), and
    what follows the committed write that the connection was lost before doing (``pending``, in order).

    ``dsn`` and ``timeout``: where and for how long :meth:`took_effect` asks."""

    def __init__(self, dsn: str, timeout: float) -> None:
        self.dsn, self.timeout = dsn, timeout
        self.committed = self.undecided = False
        self.pending: list[FollowUp] = []

    @property
    def clean(self) -> bool:
        """Nothing of the write was committed, nor may have been: trying it again writes it once."""
        return not (self.committed or self.undecided)

    def unknown(self, unanswered: DatabaseError) -> DatabaseError:
        """The error of a write whose COMMIT got no answer (``unanswered``, ``_deadline``): its outcome unknown."""
        return DatabaseError(
            f"{unanswered}; that was the write's COMMIT: whether the write took effect is unknown, and it was not "
            f"run again; {LOOK_FIRST}"
        )

    def took_effect(self, xid: str, pid: int, started: object, lost: BaseException) -> bool:
        """Whether transaction ``xid``, begun on backend ``pid`` of a server up since ``started`` and whose COMMIT was
        sent when the connection was lost (``lost``), committed, asked of a fresh connection (the pool's may all be in
        use) within ``timeout`` seconds; else DatabaseError, and the try is ``undecided`` (the server down meanwhile,
        the status unknown, or "committed" from a server that restarted since: :data:`RESTARTED`)."""
        deadline, reason = time.monotonic() + self.timeout, "no answer"
        while time.monotonic() < deadline:
            try:
                status, now = self._status(xid, pid, deadline)
            except psycopg.Error as exc:
                if exc.sqlstate == FUTURE:  # an id not handed out since a restart: it never committed
                    return False
                reason = first_line(exc)  # the server restarting: ask again
                time.sleep(RECONNECT)
                continue
            if now != started:  # restarted: had it committed, its id would not have been given again
                if status != "committed":
                    return False
                reason = RESTARTED
            elif status in ("committed", "aborted"):
                return status == "committed"
            else:
                reason = "Postgres keeps no status of it" if status is None else "it is still in progress"
            break
        self.undecided = True
        raise DatabaseError(
            f"the connection was lost during a COMMIT ({first_line(lost)}) and whether the write took effect could "
            f"not be told ({reason}): it was not run again; look before repeating it"
        ) from lost

    def _status(self, xid: str, pid: int, deadline: float) -> tuple[str | None, object]:
        """``pg_xact_status`` of ``xid``, once the backend ``pid`` no longer holds it (ended if it still does: its
        COMMIT never arrived), so the answer is final; asked again while it is in progress, until ``deadline``. And
        since when the server is up."""
        wait = max(1, math.ceil(deadline - time.monotonic()))
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=wait) as conn:
            try:
                conn.execute(query("end_lost_transaction"), {"pid": pid, "xid": xid})
            except psycopg.errors.InsufficientPrivilege:  # a role may end its own backends: only wait then
                pass
            while True:
                status, started = conn.execute(query("transaction_status"), {"xid": xid}).fetchone() or (None, None)
                if status != "in progress" or time.monotonic() >= deadline:
                    return status, started
                time.sleep(POLL)


class WatchedConnection(psycopg.Connection[Any]):
    """A pool connection that, while :class:`Commits` watch it (:meth:`watch`), reads each outermost transaction's id
    right before its COMMIT (one round trip more per transaction; none assigned: it wrote nothing, so neither a lost
    COMMIT nor a second try can change anything) and settles a COMMIT lost with the connection
    (:meth:`Commits.took_effect`): a committed one is not an error (the block's work is done), an aborted one raises
    the loss as before. Unwatched (a caller's own ``store.connection()``), and in :func:`repeatable` blocks,
    transactions are psycopg's."""

    commits: Commits | None = None
    repeatable = False

    @contextmanager
    def watch(self, commits: Commits) -> Iterator[None]:
        self.commits = commits
        try:
            yield
        finally:
            self.commits = None

    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[psycopg.Transaction]:
        commits = self.commits
        if commits is None or self.repeatable or self.info.transaction_status != TransactionStatus.IDLE:
            with super().transaction(savepoint_name, force_rollback) as tx:
                yield tx
            return
        xid: str | None = None
        started, pid = None, self.info.backend_pid
        try:
            with super().transaction(savepoint_name, force_rollback) as tx:
                yield tx
                if not force_rollback:  # the block ended well: its id before the COMMIT, None when it wrote nothing
                    xid, started = self.execute(query("transaction_id")).fetchone()  # type: ignore[misc]
        except psycopg.Error as exc:
            if xid is not None and isinstance(exc, Unanswered):  # the COMMIT was sent: no answer, no one to ask
                commits.undecided = True
            if not (xid is not None and connection_lost(exc) and commits.took_effect(xid, pid, started, exc)):
                raise
        commits.committed = commits.committed or xid is not None


@contextmanager
def repeatable(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """The block's transactions write what a second try writes the same (the embedding cache): committed, they do not
    keep ``Connector.run`` from trying the write again. Any connection (only a watched one takes note)."""
    if not isinstance(conn, WatchedConnection) or conn.repeatable:
        yield
        return
    conn.repeatable = True
    try:
        yield
    finally:
        conn.repeatable = False


def follow_up(conn: psycopg.Connection[Any], work: FollowUp) -> None:
    """``work.step(conn)``, what follows a write and can be done twice (an index build, ANALYZE). On a watched
    connection (``Connector.run``) lost once a transaction of the write committed, before or during the step, it is
    left ``pending`` for ``run`` to do on a fresh connection (so is any follow-up after it: they keep their order), and
    the write goes on as done; elsewhere the loss raises, as any error."""
    commits = conn.commits if isinstance(conn, WatchedConnection) else None
    if commits is None or not commits.committed:
        work.step(conn)
        return
    if not commits.pending and not conn.closed:
        try:
            work.step(conn)
        except psycopg.Error as exc:
            if isinstance(exc, Unanswered):  # the server stopped answering: not done, and not done again (``run``)
                commits.pending.append(work)
            if not connection_lost(exc):
                raise
        else:
            if not conn.closed:  # done (a step may stop short on a dead connection: it is done again then)
                return
    commits.pending.append(work)


def do_again(pending: list[FollowUp], connection: Callable[[], AbstractContextManager[Any]]) -> None:
    """Do once more, on a fresh ``connection()`` (``Connector.run``'s, whose failures are DatabaseErrors), what followed
    a committed write and was lost with its connection (:func:`follow_up`); if that fails too, a DatabaseError says
    what committed and what was not done."""
    done = 0
    try:
        with connection() as conn:
            for work in pending:
                work.step(conn)
                done += 1
    except DatabaseError as exc:
        undone = pending[done]
        raise DatabaseError(
            f"the write committed, but {undone.what} after it did not: its connection was lost, and a second try "
            f"on a fresh connection failed ({first_line(exc)}); {undone.later}"
        ) from exc
    whats = ", ".join(work.what for work in pending)
    logger.info("connection lost after a write committed: %s done again on a fresh connection", whats)
