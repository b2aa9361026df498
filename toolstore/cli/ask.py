"""A yes/no question on the terminal whose answer is read so that a Ctrl-C typed at it cannot be missed.

click's ``confirm`` reads the answer with ``input()``: Python runs a signal's handler only between bytecodes, and a
blocking ``read()`` of the terminal ends early only for a signal delivered while it waits. A Ctrl-C delivered after the
question was written but before that ``read()`` began (a busy machine: the user, or a test, answering the question as
it appears) had its handler noted and never run, and the command waited for an answer that was never to come. Here the
answer is waited for as the library waits for a pipe (``_interrupts.wait_readable``: on the terminal and on a wakeup
pipe, ``signal.set_wakeup_fd``, to which Python's C handler writes a byte however early the signal came): the wait
ends, and the handler runs.
"""

from __future__ import annotations

import os
import sys
import threading

import click

from .._interrupts import Wakeup, wait_readable


def confirm(question: str) -> None:
    """Ask ``question [y/N]:`` on stderr and go on only on "y" or "yes"; otherwise (an answer of "n", none, Ctrl-C,
    Ctrl-D) :class:`click.Abort`, as ``click.confirm(question, abort=True, err=True)``, whose words it keeps."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # no descriptor: a test's stdin; click reads it
        fd = -1
    if fd < 0 or os.name != "posix" or threading.current_thread() is not threading.main_thread():
        click.confirm(question, abort=True, err=True)  # set_wakeup_fd needs the main thread, poll a POSIX file
        return
    with Wakeup() as wakeup:  # before the question is drawn: a Ctrl-C typed once it is cannot be missed
        while True:
            try:  # the question's echo too: a Ctrl-C handled as it is written leaves its line open as well
                click.echo(f"{question} [y/N]: ", nl=False, err=True)
                answer = _line(fd, wakeup).strip().lower()
            except (KeyboardInterrupt, EOFError):
                raise click.Abort() from None  # as click's: its context is the interrupt, which main.py looks at
            if answer in ("y", "yes"):
                return
            if answer in ("", "n", "no"):
                raise click.Abort()
            click.echo("Error: invalid input", err=True)


def _line(fd: int, wakeup: Wakeup) -> str:
    """One line read from ``fd`` (a terminal gives a line at a time), without its end; EOFError on none (Ctrl-D).
    A signal whose Python handler raises (Ctrl-C: KeyboardInterrupt) ends the wait, however early it came."""
    data = b""
    while not data.endswith(b"\n"):
        wait_readable(fd, wakeup)  # Ctrl-C ends the wait
        chunk = os.read(fd, 4096)
        if not chunk:
            if data:
                break
            raise EOFError
        data += chunk
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    return data.decode(encoding, errors="replace").rstrip("\r\n")
