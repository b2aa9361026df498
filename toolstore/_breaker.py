"""The circuit breaker in front of an embedder's server: after a call fails, the calls it guards fail at once for a
cool-down, then one is let through to probe the server again.

One per embedder object (an ``OpenAIEmbedder`` is one server and model): ``OpenAIEmbedder.breaker``, which route()'s
query vectors (``_vectors.QueryVectors``, of every store using the embedder), its width probe (``OpenAIEmbedder.dim``)
and its writes' requests share, so what one found of the server spares the others the wait; an embedder without one
gets its store's (``QueryVectors.breaker``). A failure has a :class:`Level` (an error, the server unavailable, the
server unavailable through retries). Each caller says how long it trusts a failure (``cooldown``: route()'s
``embedder_cooldown``, the embedder's own) and the lowest level that stops it: route()'s query vectors any failure,
the probe a server found unavailable, and a write's texts to embed only one found so through retries (the probe's or a
write's), not by a route's one attempt (the server may only be slow, as one loading its model): they keep their
patient retries."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum

from ._errors import EmbedderError, EmbedderUnavailableError, InvalidInputError, redact

#: After a guarded call fails, the calls it guards fail at once for this many seconds, then one probes the server.
BREAKER_COOLDOWN = 30.0


def check_cooldown(cooldown: float) -> float:
    """``cooldown`` as seconds; InvalidInputError unless a number, 0 or more."""
    if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or not 0 <= cooldown < math.inf:
        raise InvalidInputError(f"embedder_cooldown must be a number of seconds, 0 or more, got {cooldown!r}")
    return float(cooldown)


class Level(IntEnum):
    """How much a failure says of the server, each level more than the one before."""

    NONE = 0  #: no failure: the breaker is closed
    ERROR = 1  #: a call failed (route()'s query vectors stop)
    UNAVAILABLE = 2  #: the server was found unavailable, maybe by one attempt (the width probe stops)
    RETRIED = 3  #: the server was found unavailable through retries (a write's texts to embed stop)


class Breaker:
    """Open for a cool-down after a failure (``cooldown`` seconds unless a caller gives its own; ``clock``: seconds,
    monotonic; a stub in tests). Thread-safe."""

    def __init__(self, cooldown: float = BREAKER_COOLDOWN, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = check_cooldown(cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self._failed_at = 0.0
        self._failure = ""
        self._failure_type = ""
        self._level = Level.NONE

    def admit(self, cooldown: float | None = None, *, stops: Level = Level.ERROR) -> None:
        """Before the call: while open (``cooldown`` seconds since the failure, default the breaker's) by a failure of
        level ``stops`` or more, raise at once what that failure was (EmbedderUnavailableError for a server
        unavailable, else EmbedderError), saying for how long; after the cool-down, let this call probe (the others
        wait for it a cool-down more). A failure of a lower level lets the call through."""
        with self._lock:
            if self._level < stops:
                return
            wait = self._failed_at + (self.cooldown if cooldown is None else cooldown) - self._clock()
            if wait > 0:
                kind = EmbedderUnavailableError if self._level >= Level.UNAVAILABLE else EmbedderError
                failure = self._failure
                if self._failure_type != kind.__name__:  # named when it is another (a TimeoutError, an EmbedderError)
                    failure = f"{self._failure_type}: {failure}"
                raise kind(f"{failure} (not retried for another {wait:.0f} s)")
            self._failed_at = self._clock()

    def failed(self, exc: BaseException, *, retried: bool = False) -> None:
        """The call failed: open, remembering why (redacted) and its level: EmbedderUnavailableError is the server
        unavailable, through retries when ``retried`` or when it already was (kept while the server stays down)."""
        with self._lock:
            if not isinstance(exc, EmbedderUnavailableError):
                self._level = Level.ERROR
            elif retried or self._level is Level.RETRIED:
                self._level = Level.RETRIED
            else:
                self._level = Level.UNAVAILABLE
            self._failed_at = self._clock()
            self._failure, self._failure_type = redact(str(exc)), type(exc).__name__

    def succeeded(self) -> None:
        """The server answered: close."""
        with self._lock:
            self._failure = self._failure_type = ""
            self._level = Level.NONE

    @contextmanager
    def guard(
        self,
        opens: type[Exception] = Exception,
        cooldown: float | None = None,
        *,
        stops: Level = Level.ERROR,
        retries: bool = False,
    ) -> Iterator[None]:
        """Around one call: :meth:`admit` first (``cooldown``, ``stops``), :meth:`failed` when it raises ``opens``
        (``retries``: the call retried before it did); another error is an answer of the server, which closes. Closing
        after a call that returns is the caller's, once it has checked the answer (:meth:`succeeded`)."""
        self.admit(cooldown, stops=stops)
        try:
            yield
        except opens as exc:
            self.failed(exc, retried=retries)
            raise
        except Exception:
            self.succeeded()
            raise
