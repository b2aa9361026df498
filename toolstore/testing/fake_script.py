"""What a :class:`~toolstore.testing.fake_openai.FakeOpenAI` is scripted to do to its next requests, checked as it is
scripted: a count that is no whole number of requests, a stall of no length, an error status that is none or a
malformed kind it cannot make is an InvalidInputError naming the method, not a failure in the server's thread later
(or, for ``times=-1`` or ``status=200``, nothing scripted without a word)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidInputError

MALFORMED_KINDS = ("missing_data", "wrong_count", "wrong_dimension", "non_numeric", "not_json")


@dataclass
class Scripted:
    """One request's script: an error ``status`` (200: answered), a ``malformed`` 200, a ``stall`` before either."""

    status: int = 200
    malformed: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    stall: float = 0.0


def script_entries(method: str, times: object, entry: Scripted) -> list[Scripted]:
    """``times`` copies of ``entry``, scripted by ``method``; InvalidInputError when any part is wrong."""
    if isinstance(times, bool) or not isinstance(times, int) or times < 0:
        raise InvalidInputError(
            f"FakeOpenAI.{method}: times must be a whole number of requests (0 or more), got {times!r}"
        )
    stall = entry.stall
    if isinstance(stall, bool) or not isinstance(stall, (int, float)) or not math.isfinite(stall) or stall < 0:
        raise InvalidInputError(f"FakeOpenAI.{method}: seconds must be a finite number, 0 or more, got {stall!r}")
    if method == "fail_next" and (isinstance(entry.status, bool) or entry.status not in range(400, 600)):
        raise InvalidInputError(
            f"FakeOpenAI.fail_next: status must be an HTTP error status (400-599), got {entry.status!r}"
        )
    if entry.malformed is not None and entry.malformed not in MALFORMED_KINDS:
        raise InvalidInputError(
            f"FakeOpenAI.{method}: unknown malformed kind {entry.malformed!r}; expected one of {MALFORMED_KINDS}"
        )
    return [Scripted(entry.status, entry.malformed, entry.body, dict(entry.headers), entry.stall) for _ in range(times)]
