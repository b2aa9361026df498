"""What a user's log says of a database its pools cannot reach, no I/O: one warning when a pool that had connected
first fails to connect again (:func:`failed`: an outage; later attempts, whatever their reason, at DEBUG), one when a
pool connects again, saying how long after (:func:`connected`); every pool of the process that connects to the same
place (a store's async pool and its writer's, several stores) shares them. A pool that never connected (a store's open
that fails raises the error) is not said to be down, nor back. A read replica's outage is said once by the first read
that leaves it out (``_replicas.Rotation``, :func:`left_out`: what it means for reads), its pools' failures at DEBUG,
and its end as any. psycopg_pool's own warning for each attempt (about 2 a second while calls wait) and for each
reconnection it gives up are said at DEBUG instead, for the pools ``_lending`` makes (:func:`quiet_pool`), on the
same ``psycopg.pool`` logger."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from ._observe import logger, pool_logger

#: psycopg_pool's warnings that a failed attempt to connect and a reconnection given up log, as they read once
#: formatted (3.2.0 formats the first itself, an f-string; later releases pass arguments), the pool's name quoted.
_ATTEMPTS = re.compile(r"(?:error connecting in |reconnection attempt in pool )(?P<name>'[^']*'|\"[^\"]*\")")
#: psycopg_pool's warning that its close() did not wait for a worker or its scheduler to end (``_lending.CLOSE_WAIT``),
#: which it names after the pool.
_UNSTOPPED = re.compile(r"couldn't stop (?:thread|task) ['\"](?P<name>.*)-(?:worker-\d+|scheduler)['\"] within ")

#: psycopg_pool's warning for each connection given back broken or closed, which it discards: one of toolstore's (its
#: class's module, in the connection's repr) whose statement got no answer (``_deadline``), or lost with the server,
#: whose outage toolstore says itself.
_DISCARDED = re.compile(r"discarding (?:closed|broken) connection: <toolstore\.")


def _pool_named(message: str) -> str | None:
    """The pool a psycopg_pool warning of :data:`_ATTEMPTS` or :data:`_UNSTOPPED` names, else None."""
    if (found := _ATTEMPTS.match(message)) is not None:
        return found["name"][1:-1]
    return found["name"] if (found := _UNSTOPPED.match(message)) is not None else None


@dataclass
class _Down:
    since: float
    attempts: int
    reason: str = ""  # the last attempt's error
    said: bool = False  # a warning said the outage began, so its end is said too
    pools: set[int] = field(default_factory=set)  # the pools failing (``_lending``'s tokens) until one connects
    began: str = "it was left out of reads"  # what began it, when no attempt to connect failed


_down: dict[str, _Down] = {}  # where pools could not connect, by the place they connect to (``_lending``'s ``where``)
_quiet: Counter[str] = Counter()  # the names of the pools whose psycopg_pool warnings of attempts are said at DEBUG
_lock = threading.Lock()  # held for a look and an update only, never across I/O or a log call


def failed(where: str, reason: str, pool: int, *, lost: bool, replica: bool = False) -> None:
    """Pool ``pool`` could not connect to ``where`` (``reason``: the error's first line); ``lost``: it had connected
    before. A warning when that begins an outage (none said yet), DEBUG otherwise, and always for a read replica's
    pool (``replica``: its outage is said once by the reads it sends elsewhere, :func:`left_out`)."""
    with _lock:
        down = _down.setdefault(where, _Down(time.monotonic(), 0))
        down.attempts, down.reason = down.attempts + 1, reason
        down.pools.add(pool)
        say = lost and not down.said and not replica
        down.said = down.said or say
    if not say:
        logger.debug("%s: cannot connect to the database (attempt %d): %s", where, down.attempts, reason)
        return
    logger.warning(
        "%s: cannot connect to the database: %s; toolstore's pools keep trying in the background (calls meanwhile "
        "fail within their timeout) and say when they connect",
        where,
        reason,
    )


def left_out(where: str, pool: int) -> bool:
    """A read replica's pool ``pool`` (at ``where``) is left out of reads: whether that is news to say as a warning
    (``_replicas.Rotation`` says it: none said yet for this outage); from now on it is said, so its pools' failures say
    nothing more, and a pool connecting there says its end (:func:`connected`)."""
    with _lock:
        down = _down.setdefault(where, _Down(time.monotonic(), 0))
        down.pools.add(pool)
        news, down.said = not down.said, True
    return news


def stopped_answering(where: str, reason: str, pool: int) -> None:
    """A statement of pool ``pool`` (the primary's) got no answer from ``where`` (``reason``: ``_deadline``'s): a
    warning when that begins an outage (none said yet), nothing otherwise (the call's error says it too); its end is
    said when a pool connects there again (:func:`connected`)."""
    with _lock:
        down = _down.setdefault(where, _Down(time.monotonic(), 0, began="it stopped answering"))
        down.pools.add(pool)
        news, down.said = not down.said, True
    if news:
        logger.warning("%s: %s; calls meanwhile fail, and toolstore says when it connects again", where, reason)


def connected(where: str, again: bool = True) -> None:
    """A pool connected to ``where`` (``again``: it had connected before): a warning when a failure was said since,
    saying how long after."""
    with _lock:
        down = _down.pop(where, None)
    if down is not None and down.said and not down.attempts:  # left out by a read (lost, unanswered), no attempt failed
        seconds = time.monotonic() - down.since
        logger.warning("%s: connected again, %.1f s after %s", where, seconds, down.began)
    elif down is not None and down.said:
        seconds = time.monotonic() - down.since
        logger.warning(
            "%s: connected%s, %.1f s after the first attempt that failed (%d attempts failed)",
            where,
            " again" if again else "",
            seconds,
            down.attempts,
        )


def retired(where: str, pool: int) -> None:
    """Pool ``pool`` is closed (or collected): no longer one of those failing to connect to ``where``; when none is
    left, the outage is forgotten, its end not said (nothing tries any more)."""
    with _lock:
        down = _down.get(where)
        if down is not None:
            down.pools.discard(pool)
            if not down.pools:
                del _down[where]


def down_reason(where: str) -> str | None:
    """Why pools cannot connect to ``where`` now (the last attempt's error), None when none failed since one did."""
    with _lock:
        down = _down.get(where)
        return down.reason if down is not None else None


class _Quieter(logging.Filter):
    """On the ``psycopg.pool`` logger: a warning of :data:`_ATTEMPTS` or :data:`_UNSTOPPED` (matched as formatted)
    about a pool of :func:`quiet_pool`, or of :data:`_DISCARDED`, goes to the logger's handlers at DEBUG (when the
    logger is enabled for it), not as a warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return True
        message = record.getMessage()
        name = _pool_named(message)
        if (name is None or _quiet[name] <= 0) and not _DISCARDED.match(message):
            return True
        if pool_logger.isEnabledFor(logging.DEBUG):
            quiet = logging.makeLogRecord(record.__dict__)
            quiet.levelno, quiet.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
            pool_logger.handle(quiet)  # back through this filter, as DEBUG
        return False


_QUIETER = _Quieter()


def quiet_pool(name: str) -> None:
    """Say psycopg_pool's warnings of attempts to connect for the pool ``name`` at DEBUG, until :func:`loud_pool`."""
    with _lock:
        _quiet[name] += 1
    pool_logger.addFilter(_QUIETER)  # once: a filter added again is not added twice


def loud_pool(name: str) -> None:
    """The pool ``name`` is gone (closed, or collected): :func:`quiet_pool` no longer applies to it."""
    with _lock:
        _quiet[name] -= 1
        if _quiet[name] <= 0:
            del _quiet[name]
