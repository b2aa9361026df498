"""Progress of long writes (embedding thousands of tools or examples), reported to whoever listens.

The library reports, it never prints: :func:`report` calls the callback installed by :func:`reporting` in the
current context (the CLI installs a tqdm bar on a terminal), and does nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: ``callback(done, total)``: ``done`` of ``total`` texts embedded so far in the current batch run.
Callback = Callable[[int, int], None]
_callback: ContextVar[Callback | None] = ContextVar("toolstore_progress", default=None)


@contextmanager
def reporting(callback: Callback | None) -> Iterator[None]:
    """Send progress to ``callback`` inside the block (None: nowhere)."""
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def report(done: int, total: int) -> None:
    """Tell the listener, if any, that ``done`` of ``total`` items are finished."""
    callback = _callback.get()
    if callback is not None:
        callback(done, total)


@contextmanager
def part(before: int, total: int) -> Iterator[None]:
    """Inside the block, a report of ``done`` items is one of ``before + done`` of ``total``: a run made of parts
    (the first batch of an import embedded alone) reports as one."""
    outer = _callback.get()
    with reporting(None if outer is None else lambda done, _: outer(before + done, total)):
        yield
