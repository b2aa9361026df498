"""A Ctrl-C said as the KeyboardInterrupt it is, however it arrives.

:func:`run_async` runs an async function to its end from sync code (``anyio.run``): on Python 3.10 a Ctrl-C during it
came out as ``asyncio.CancelledError``, where 3.11 and later raise KeyboardInterrupt. anyio's event loop runner (its
backport of 3.11's ``asyncio.Runner``) answers SIGINT by cancelling the main task, and only 3.11's tasks can tell a
cancel the interrupt made (``Task.uncancel``) from another, so on 3.10 the cancellation itself is raised.

:func:`wait_readable` waits for a descriptor to have something to read (a pipe, a terminal) so that a Ctrl-C cannot be
missed. Python runs a signal's handler between bytecodes; a system call that waits (``poll``, a blocking ``read``) ends
early only for a signal delivered while it waits. One delivered after Python last looked and before the call began
(a user, or a script, interrupting as the wait starts) had its handler noted and never run, and the wait went on for
ever. Here the wait is on the descriptor and on a wakeup pipe (:class:`Wakeup`: ``signal.set_wakeup_fd``), to
which Python's C handler writes a byte however early in the wait the signal came: the wait ends, and the handler runs.
A signal another thread of the process took (the kernel gives a process's signal to any thread not blocking it: a
numerical library's worker) as the pipe was being set may leave no byte there; the wait looks for a due handler every
:data:`RECHECK_MS` too.

:func:`wait_event` waits for a :class:`threading.Event` so: a wait for a lock ends early only for a signal delivered to
the waiting thread while it waits, so one that came just before, or that another thread took (a connection pool's
worker), went unheard until the event was set or the wait's bound passed (a connector's open: 15 s at least). It
waits in slices of :data:`RECHECK_MS`, a due handler run between them. :func:`wait_event_async` waits for an
:class:`asyncio.Event` so that a cancel (Ctrl-C, under ``asyncio.run`` or :func:`run_async`) is never lost:
``asyncio.wait_for`` before Python 3.12 drops a cancel that comes as the event is set, and the task goes on.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")
#: How often (milliseconds) a wait looks for a signal whose handler is due but has not run: one the wakeup pipe did
#: not tell of (another thread took the signal as the wakeup pipe was being set) is acted on within this.
RECHECK_MS = 1000


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(fn)``, a Ctrl-C during it a KeyboardInterrupt on every Python, the 3.10 CancelledError its cause.
    Nothing but the runner's SIGINT handler holds the main task to cancel it: its cancellation ends only so."""
    try:
        return anyio.run(fn)
    except asyncio.CancelledError as exc:
        raise KeyboardInterrupt() from exc


class Wakeup:
    """While the ``with`` block runs, a pipe to which Python's C signal handler writes a byte on every signal Python
    handles (``signal.set_wakeup_fd``), its read end :attr:`fd`; the wakeup descriptor set before is put back after, and
    what is read of the pipe passed on to it (an event loop that learns of its signals so, as asyncio's
    ``add_signal_handler``, still does). :attr:`fd` is -1 where a signal cannot be heard so: outside the main thread
    (which alone runs signal handlers) or off POSIX.

    A class, not a generator: a Ctrl-C handled at any point of entering or leaving (Python runs a handler between any
    two bytecodes) stops it there and leaves at worst the pipe open and still set, never closed while set (the C
    handler would write to a closed descriptor, or to whatever reused its number: a database connection), nor put back
    later, out of order, by a generator finalized by the garbage collector."""

    def __init__(self) -> None:
        self.fd = -1
        self._write = -1
        self._previous = -1

    def __enter__(self) -> Wakeup:
        if os.name == "posix" and threading.current_thread() is threading.main_thread():
            wake_read, wake_write = os.pipe()
            os.set_blocking(wake_read, False)  # drained without waiting
            os.set_blocking(wake_write, False)  # set_wakeup_fd's rule: the C handler must never block on it
            self._previous = signal.set_wakeup_fd(wake_write)
            self.fd, self._write = wake_read, wake_write
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd < 0:
            return
        signal.set_wakeup_fd(self._previous)  # first: the pipe is closed only once it is no longer set
        os.close(self.fd)
        os.close(self._write)
        self.fd = self._write = -1

    def drain(self) -> None:
        """Read what the signals wrote, and pass it on to the wakeup descriptor set before."""
        try:
            written = os.read(self.fd, 512)
        except BlockingIOError:  # drained already
            return
        if self._previous >= 0:
            try:
                os.write(self._previous, written)
            except OSError:  # full, or closed meanwhile: its owner loses no more than a full pipe loses
                pass


def wait_readable(fd: int, wakeup: Wakeup) -> None:
    """Return once ``fd`` has something to read, or its end (a pipe's writer gone). A signal whose Python handler
    raises (Ctrl-C: KeyboardInterrupt) ends the wait, however early in it it came: at once given an entered ``wakeup``,
    else (the wakeup pipe missed it) within :data:`RECHECK_MS`; a signal whose handler returns does not end it."""
    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    if wakeup.fd >= 0:
        waiting.register(wakeup.fd, select.POLLIN)
    while True:
        ready = {ready_fd for ready_fd, _ in waiting.poll(RECHECK_MS)}
        if not ready:  # the loop's turn runs a handler that is due
            continue
        if wakeup.fd < 0 or wakeup.fd not in ready:
            return
        wakeup.drain()  # the signal's handler runs as the loop goes round: KeyboardInterrupt for Ctrl-C


def wait_event(event: threading.Event, seconds: float) -> bool:
    """``event.wait(seconds)``, but a signal whose Python handler raises (Ctrl-C: KeyboardInterrupt) ends it within
    :data:`RECHECK_MS` however it came (just before the wait began, or taken by another thread). Whether it was set."""
    given_up = time.monotonic() + seconds
    while not event.is_set():
        left = given_up - time.monotonic()
        if left <= 0:
            return False
        event.wait(min(left, RECHECK_MS / 1000))  # the loop's turn runs a handler that is due
    return True


async def wait_event_async(event: asyncio.Event, seconds: float) -> bool:
    """``asyncio.wait_for(event.wait(), seconds)`` but for its timeout, False, and for a cancel of the caller, which
    is never lost: Python 3.10 and 3.11's ``wait_for`` returns the event's result when the cancel comes as it is set
    (in the same few turns of the loop), and the cancel is gone. Whether it was set."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return event.is_set()
