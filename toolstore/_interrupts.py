"""A Ctrl-C said as the KeyboardInterrupt it is, however it arrives.

:func:`run_async` runs an async function to its end from sync code (``anyio.run``): on Python 3.10 a Ctrl-C during it
came out as ``asyncio.CancelledError``, where 3.11 and later raise KeyboardInterrupt. anyio's event loop runner (its
backport of 3.11's ``asyncio.Runner``) answers SIGINT by cancelling the main task, and only 3.11's tasks can tell a
cancel the interrupt made (``Task.uncancel``) from another, so on 3.10 the cancellation itself is raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(fn)``, a Ctrl-C during it a KeyboardInterrupt on every Python, the 3.10 CancelledError its cause.
    Nothing but the runner's SIGINT handler holds the main task to cancel it: its cancellation ends only so."""
    try:
        return anyio.run(fn)
    except asyncio.CancelledError as exc:
        raise KeyboardInterrupt() from exc
