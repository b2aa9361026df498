"""Which thread a call acts for (:func:`caller_thread`): its own, or, for work an event loop's coroutine awaits in a
worker thread (:func:`to_thread`, ``AsyncToolStore``'s migration and writes), the loop's thread. ``_migrate``
refuses the migrations' lock to a call whose thread's own open transaction holds it: the coroutine that awaits the
worker cannot end that transaction, so the worker would wait for ever."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")
_ACTING_FOR: ContextVar[int | None] = ContextVar("toolstore_acting_for", default=None)


def caller_thread() -> int:
    """The ident of the thread this call acts for: the one :func:`to_thread` was awaited in, else its own."""
    return _ACTING_FOR.get() or threading.get_ident()


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread(func, *args, **kwargs)``, acting for the thread that awaits it (which asyncio's copy of
    the context carries into the worker)."""
    token = _ACTING_FOR.set(caller_thread())
    try:
        return await asyncio.to_thread(func, *args, **kwargs)
    finally:
        _ACTING_FOR.reset(token)
