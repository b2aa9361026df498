"""The circuit breaker in front of an embedder's server: after a call fails, the calls it guards fail at once for a
cool-down, then one is let through to probe the server again. route()'s query vectors (``_vectors.QueryVectors``,
``embedder_cooldown``) keep one, and so does ``OpenAIEmbedder`` for its writes' requests and its width probe
(``OpenAIEmbedder.dim``): while its server is known to be down, a write whose texts are all cached does not wait
through the probe's retries again, and one with texts to embed fails at once."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._errors import EmbedderError, EmbedderUnavailableError, InvalidInputError, redact

#: After a guarded call fails, the calls it guards fail at once for this many seconds, then one probes the server.
BREAKER_COOLDOWN = 30.0


class Breaker:
    """Open for ``cooldown`` seconds after a failure (``clock``: seconds, monotonic; a stub in tests). Thread-safe."""

    def __init__(self, cooldown: float = BREAKER_COOLDOWN, *, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or not 0 <= cooldown < math.inf:
            raise InvalidInputError(f"embedder_cooldown must be a number of seconds, 0 or more, got {cooldown!r}")
        self.cooldown = float(cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self._open_until = 0.0
        self._failure = ""
        self._kind: type[EmbedderError] = EmbedderError

    def admit(self) -> None:
        """Before the call: while open, raise at once what the failure that opened it was (EmbedderUnavailableError
        for a server unavailable, else EmbedderError), saying for how long; after the cool-down, let this call probe
        (others still fail at once until it ends)."""
        with self._lock:
            if not self._failure:
                return
            wait = self._open_until - self._clock()
            if wait > 0:
                raise self._kind(f"{self._failure} (not retried for another {wait:.0f} s)")
            self._open_until = self._clock() + self.cooldown

    def failed(self, exc: BaseException) -> None:
        """The call failed: open for ``cooldown`` seconds, remembering why (redacted)."""
        with self._lock:
            self._open_until = self._clock() + self.cooldown
            self._failure = redact(f"{type(exc).__name__}: {exc}")
            self._kind = EmbedderUnavailableError if isinstance(exc, EmbedderUnavailableError) else EmbedderError

    def succeeded(self) -> None:
        """The server answered: close."""
        with self._lock:
            self._failure = ""

    @contextmanager
    def guard(self, opens: type[Exception] = Exception) -> Iterator[None]:
        """Around one call: :meth:`admit` first, :meth:`failed` when it raises ``opens``; another error is an answer
        of the server, which closes. Closing after a call that returns is the caller's, once it has checked the
        answer (:meth:`succeeded`)."""
        self.admit()
        try:
            yield
        except opens as exc:
            self.failed(exc)
            raise
        except Exception:
            self.succeeded()
            raise
