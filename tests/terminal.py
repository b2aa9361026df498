"""A pseudo-terminal for CLI tests that look at what a command draws on a terminal (progress bars, notes)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Sequence

#: How long a read of the terminal waits for the command to draw more before the command is killed and the test fails
#: with what it drew: far past any command's time, a guard against one that hangs (which stalled the whole suite), not
#: a timed assertion.
HANG_SECONDS = 120.0

_commands: dict[int, subprocess.Popen[bytes]] = {}  # a terminal's leader -> the command on it, killed if it hangs


def open_terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal of 24 rows and ``columns`` columns: (leader, follower)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return leader, follower


def read_all(leader: int) -> str:
    """Everything drawn on the terminal until its last writer closed it; the leader is closed after."""
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = _read(leader, b"".join(chunks))
            except OSError:  # Linux: EIO once every follower is closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        _commands.pop(leader, None)
        os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def _read(leader: int, drawn: bytes) -> bytes:
    """What the terminal draws next; if nothing for HANG_SECONDS, the command on it is killed and AssertionError
    says what it drew."""
    if not select.select([leader], [], [], HANG_SECONDS)[0]:
        proc = _commands.pop(leader, None)
        if proc is not None:
            proc.kill()
        raise AssertionError(f"the command drew nothing more for {HANG_SECONDS:.0f} s (hung?), after: {drawn!r}")
    return os.read(leader, 65536)


def answered(cmd: Sequence[str], answer: bytes) -> tuple[int, str, str]:
    """``cmd`` run with its stdin and stdout a terminal on which the user types ``answer``: exit status, what the
    terminal shows, stderr."""
    leader, follower = open_terminal(200)
    with subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=subprocess.PIPE) as proc:
        os.close(follower)
        _commands[leader] = proc
        os.write(leader, answer)  # held by the terminal until the prompt reads it
        drawn = read_all(leader)
        err = proc.stderr.read().decode() if proc.stderr else ""
        return proc.wait(timeout=300), drawn.replace("\r\n", "\n"), err


def controlling(cmd: Sequence[str], *, stderr: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``cmd`` started on a terminal that is its controlling one (Ctrl-C typed on it interrupts the command, and is
    echoed as ``^C``, as a shell's terminal does) and its stdin, stdout and stderr (or ``stderr``: a pipe, as
    ``2>log``): the process, and the terminal's leader to read what is drawn and type on."""
    leader, follower = echoing()
    proc = subprocess.Popen(
        cmd,
        stdin=follower,
        stdout=follower,
        stderr=follower if stderr is None else stderr,
        start_new_session=True,
        preexec_fn=_take_terminal,
    )
    os.close(follower)
    _commands[leader] = proc
    return proc, leader


def echoing(columns: int = 200) -> tuple[int, int]:
    """A pseudo-terminal that echoes control characters (``^C``), as a shell's does: (leader, follower)."""
    leader, follower = open_terminal(columns)
    modes = termios.tcgetattr(follower)
    modes[3] |= termios.ISIG | termios.ECHO | termios.ECHOCTL
    termios.tcsetattr(follower, termios.TCSANOW, modes)
    return leader, follower


#: A session leader whose stdin's terminal is its controlling one, running its arguments as a command in a process
#: group of their own (a shell's ``COMMAND &``: a background job), its pid on the leader's stdout; it exits with the
#: command's exit status.
_BACKGROUND = (
    "import fcntl, os, subprocess, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "job = subprocess.Popen(sys.argv[1:], preexec_fn=os.setpgrp, stdout=2); print(job.pid, flush=True); "
    "sys.exit(job.wait())"
)


def in_background(cmd: Sequence[str]) -> tuple[subprocess.Popen[bytes], int, int]:
    """``cmd`` run as a background job on a terminal that is its controlling one and its stdout and stderr (a typed
    Ctrl-C does not reach it): the process of the session leader that waits for it, the command's pid, and the
    terminal's leader to read what is drawn."""
    leader, follower = echoing()
    lead = [sys.executable, "-c", _BACKGROUND, *cmd]
    proc = subprocess.Popen(lead, stdin=follower, stdout=subprocess.PIPE, stderr=follower, start_new_session=True)
    os.close(follower)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline()), leader


def _take_terminal() -> None:
    """In the child, a session leader: its stdin's terminal becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def drawn_until(leader: int, text: str) -> str:
    """What is drawn on the terminal until ``text`` is (a prompt), ``\\r\\n`` read as ``\\n``."""
    drawn = b""
    while text.encode() not in drawn.replace(b"\r\n", b"\n"):
        drawn += _read(leader, drawn)  # raises OSError (EIO) when the command ended first
    return drawn.decode(errors="replace").replace("\r\n", "\n")
