"""A session log's retention: how many calls of each session and how old a catalog's log keeps (``Retention``, kept
in the catalog's settings under :data:`RETENTION_KEY`), and the checks of a prune's age and idle time. No I/O: the log
itself (``_sessions``) applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ._errors import InvalidInputError

#: Where a catalog's retention lives in its settings.
RETENTION_KEY = "sessions"
#: Calls kept per session unless the catalog says otherwise: the oldest go as new ones come.
DEFAULT_MAX_CALLS = 1000
MAX_RETENTION_CALLS = 10_000_000
#: The shortest retention age: a shorter one rounds to 0 (timedelta keeps microseconds; settings store days).
MIN_RETENTION_AGE = timedelta(seconds=1)
#: The longest age, in days, a retention keeps calls, a prune deletes them by or a forget of idle sessions takes.
MAX_AGE_DAYS = 100_000


@dataclass(frozen=True)
class Retention:
    """How much of each session the log keeps: at most ``max_calls`` calls (the newest), none older than
    ``max_age``; None means no limit. Applied to a session at each write to it, and to the whole catalog by
    :func:`._sessions.prune`."""

    max_calls: int | None = DEFAULT_MAX_CALLS
    max_age: timedelta | None = None

    def as_dict(self) -> dict[str, Any]:
        days = None if self.max_age is None else self.max_age.total_seconds() / 86400
        return {"max_calls": self.max_calls, "max_age_days": days}


def prune_before(older_than: timedelta | None, session: str | None, keep: Retention) -> datetime | None:
    """The time before which a prune deletes calls (None: no age limit; every call of ``session`` when one is given);
    ``older_than`` defaults to the retention age unless a session is given. InvalidInputError when nothing says what
    to prune (no age, no session, no retention limit) or the age is bad."""
    if older_than is None and session is None:
        older_than = keep.max_age
        if older_than is None and keep.max_calls is None:
            raise InvalidInputError("give older_than or a session, or set a retention limit (set_session_retention)")
    if older_than is not None and (
        not isinstance(older_than, timedelta) or not timedelta(0) <= older_than <= timedelta(days=MAX_AGE_DAYS)
    ):
        raise InvalidInputError(f"older_than must be a timedelta from 0 to {MAX_AGE_DAYS:,} days, got {older_than!r}")
    return None if older_than is None else datetime.now(timezone.utc) - older_than


def check_idle(forget_idle: object, session: str | None) -> timedelta | None:
    """``forget_idle`` checked: None, or a positive timedelta of at most :data:`MAX_AGE_DAYS` days, given without a
    session (it forgets every idle session of the catalog); InvalidInputError naming it otherwise."""
    if forget_idle is None:
        return None
    if session is not None:
        raise InvalidInputError("forget_idle forgets every idle session of the catalog: give it without session")
    if not isinstance(forget_idle, timedelta) or not timedelta(0) < forget_idle <= timedelta(days=MAX_AGE_DAYS):
        raise InvalidInputError(
            f"forget_idle must be a timedelta over 0 and up to {MAX_AGE_DAYS:,} days, got {forget_idle!r}"
        )
    return forget_idle


def check_retention(max_calls: int | None, max_age_days: float | None) -> Retention:
    """A Retention from its settings' form; InvalidInputError naming a bad value."""
    if max_calls is not None and (
        isinstance(max_calls, bool) or not isinstance(max_calls, int) or not 1 <= max_calls <= MAX_RETENTION_CALLS
    ):
        raise InvalidInputError(
            f"max_calls must be None or an integer from 1 to {MAX_RETENTION_CALLS:,}, got {max_calls!r}"
        )
    if max_age_days is not None and (
        isinstance(max_age_days, bool)
        or not isinstance(max_age_days, (int, float))
        or not 0 < max_age_days <= MAX_AGE_DAYS  # exact for any int (math.isfinite overflows), false for NaN
        or timedelta(days=max_age_days) < MIN_RETENTION_AGE  # would be stored as 0 days, refused when read back
    ):
        raise InvalidInputError(
            f"max_age_days must be None or a number of days from 1 second (1/86,400 of a day) to {MAX_AGE_DAYS:,}, "
            f"got {max_age_days!r}"
        )
    return Retention(max_calls, None if max_age_days is None else timedelta(days=max_age_days))


def retention(settings: Mapping[str, Any]) -> Retention:
    """The retention a catalog's settings hold, or the default."""
    stored = settings.get(RETENTION_KEY) if settings else None
    if not stored:
        return Retention()
    return check_retention(stored.get("max_calls"), stored.get("max_age_days"))
