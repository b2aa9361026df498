"""A yes/no question on the terminal whose answer is read so that a Ctrl-C typed at it cannot be missed.

click's ``confirm`` reads the answer with ``input()``: Python runs a signal's handler only between bytecodes, and a
blocking ``read()`` of the terminal ends early only for a signal delivered while it waits. A Ctrl-C delivered after the
question was written but before that ``read()`` began (a busy machine: the user, or a test, answering the question as
it appears) had its handler noted and never run, and the command waited for an answer that was never to come. Here the
answer is waited for with ``select`` on the terminal and on a wakeup pipe (``signal.set_wakeup_fd``), to which Python's
C handler writes a byte however early the signal came: the wait ends, and the handler runs.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click


def confirm(question: str) -> None:
    """Ask ``question [y/N]:`` on stderr and go on only on "y" or "yes"; otherwise (an answer of "n", none, Ctrl-C,
    Ctrl-D) :class:`click.Abort`, as ``click.confirm(question, abort=True, err=True)``, whose words it keeps."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # no descriptor: a test's stdin; click reads it
        fd = -1
    if fd < 0 or os.name != "posix" or threading.current_thread() is not threading.main_thread():
        click.confirm(question, abort=True, err=True)  # set_wakeup_fd needs the main thread, select a POSIX file
        return
    with _woken() as wake:  # before the question is drawn: a Ctrl-C typed once it is cannot be missed
        while True:
            try:  # the question's echo too: a Ctrl-C handled as it is written leaves its line open as well
                click.echo(f"{question} [y/N]: ", nl=False, err=True)
                answer = _line(fd, wake).strip().lower()
            except (KeyboardInterrupt, EOFError):
                raise click.Abort() from None  # as click's: its context is the interrupt, which main.py looks at
            if answer in ("y", "yes"):
                return
            if answer in ("", "n", "no"):
                raise click.Abort()
            click.echo("Error: invalid input", err=True)


@contextmanager
def _woken() -> Iterator[int]:
    """The read end of a pipe to which Python's C signal handler writes a byte on every signal Python handles
    (``signal.set_wakeup_fd``) while the block runs; the wakeup descriptor before is put back after."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)  # set_wakeup_fd's rule: the C handler must never block on it
    try:
        previous = signal.set_wakeup_fd(wake_write)
        try:
            yield wake_read
        finally:
            signal.set_wakeup_fd(previous)
    finally:
        os.close(wake_read)
        os.close(wake_write)


def _line(fd: int, wake: int) -> str:
    """One line read from ``fd`` (a terminal gives a line at a time), without its end; EOFError on none (Ctrl-D).
    A signal whose Python handler raises (Ctrl-C: KeyboardInterrupt) ends the wait, however early it came."""
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd, wake], [], [])
        if wake in ready:
            os.read(wake, 512)  # the signal's handler runs as the loop goes round: KeyboardInterrupt for Ctrl-C
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            if data:
                break
            raise EOFError
        data += chunk
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    return data.decode(encoding, errors="replace").rstrip("\r\n")
