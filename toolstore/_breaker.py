"""The circuit breaker in front of an embedder's server: after a call fails, the calls it guards fail at once for a
cool-down, then one is let through to probe the server again.

One per embedder object (an ``OpenAIEmbedder`` is one server and model): ``OpenAIEmbedder.breaker``, which route()'s
query vectors (``_vectors.QueryVectors``, of every store using the embedder), its width probe (``OpenAIEmbedder.dim``)
and its writes' requests share, so what one found of the server spares the others the wait; an embedder without one
gets its store's (``QueryVectors.breaker``). Each caller says how long it trusts a failure (``cooldown``: route()'s
``embedder_cooldown``, the embedder's own) and which failures stop it: the probe and writes only a server found
unavailable, and a write's texts to embed only one found so through the probe's retries (``retried``), not by a
route's one attempt (the server may only be slow, as one loading its model): they keep their patient retries."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._errors import EmbedderError, EmbedderUnavailableError, InvalidInputError, redact

#: After a guarded call fails, the calls it guards fail at once for this many seconds, then one probes the server.
BREAKER_COOLDOWN = 30.0


def check_cooldown(cooldown: float) -> float:
    """``cooldown`` as seconds; InvalidInputError unless a number, 0 or more."""
    if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or not 0 <= cooldown < math.inf:
        raise InvalidInputError(f"embedder_cooldown must be a number of seconds, 0 or more, got {cooldown!r}")
    return float(cooldown)


class Breaker:
    """Open for a cool-down after a failure (``cooldown`` seconds unless a caller gives its own; ``clock``: seconds,
    monotonic; a stub in tests). Thread-safe."""

    def __init__(self, cooldown: float = BREAKER_COOLDOWN, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = check_cooldown(cooldown)
        self._clock = clock
        self._lock = threading.Lock()
        self._failed_at = 0.0
        self._failure = ""
        self._kind: type[EmbedderError] = EmbedderError
        self._retried = False

    def admit(
        self, cooldown: float | None = None, *, only_unavailable: bool = False, only_retried: bool = False
    ) -> None:
        """Before the call: while open (``cooldown`` seconds since the failure, default the breaker's), raise at once
        what the failure that opened it was (EmbedderUnavailableError for a server unavailable, else EmbedderError),
        saying for how long; after the cool-down, let this call probe (the others wait for it a cool-down more).
        ``only_unavailable``: only a server found unavailable stops this call; ``only_retried``: only one found so
        through retries, not by one attempt."""
        with self._lock:
            if not self._failure or (only_unavailable and self._kind is not EmbedderUnavailableError):
                return
            if only_retried and not self._retried:
                return
            wait = self._failed_at + (self.cooldown if cooldown is None else cooldown) - self._clock()
            if wait > 0:
                raise self._kind(f"{self._failure} (not retried for another {wait:.0f} s)")
            self._failed_at = self._clock()

    def failed(self, exc: BaseException, *, retried: bool = False) -> None:
        """The call failed: open, remembering why (redacted) and whether retries were spent on it (``retried``; kept
        while the server stays down)."""
        with self._lock:
            self._retried = retried or (self._retried and bool(self._failure))
            self._failed_at = self._clock()
            self._failure = redact(f"{type(exc).__name__}: {exc}")
            self._kind = EmbedderUnavailableError if isinstance(exc, EmbedderUnavailableError) else EmbedderError

    def succeeded(self) -> None:
        """The server answered: close."""
        with self._lock:
            self._failure = ""
            self._retried = False

    @contextmanager
    def guard(
        self,
        opens: type[Exception] = Exception,
        cooldown: float | None = None,
        *,
        only_unavailable: bool = False,
        only_retried: bool = False,
        retries: bool = False,
    ) -> Iterator[None]:
        """Around one call: :meth:`admit` first (``cooldown``, ``only_unavailable``, ``only_retried``), :meth:`failed`
        when it raises ``opens`` (``retries``: the call retried before it did); another error is an answer of the
        server, which closes. Closing after a call that returns is the caller's, once it has checked the answer
        (:meth:`succeeded`)."""
        self.admit(cooldown, only_unavailable=only_unavailable, only_retried=only_retried)
        try:
            yield
        except opens as exc:
            self.failed(exc, retried=retries)
            raise
        except Exception:
            self.succeeded()
            raise
