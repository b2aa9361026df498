"""A pseudo-terminal for CLI tests that look at what a command draws on a terminal (progress bars, notes)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from collections.abc import Sequence


def open_terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal of 24 rows and ``columns`` columns: (leader, follower)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return leader, follower


def read_all(leader: int) -> str:
    """Everything drawn on the terminal until its last writer closed it; the leader is closed after."""
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # Linux: EIO once every follower is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def answered(cmd: Sequence[str], answer: bytes) -> tuple[int, str, str]:
    """``cmd`` run with its stdin and stdout a terminal on which the user types ``answer``: exit status, what the
    terminal shows, stderr."""
    leader, follower = open_terminal(200)
    with subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=subprocess.PIPE) as proc:
        os.close(follower)
        os.write(leader, answer)  # held by the terminal until the prompt reads it
        drawn = read_all(leader)
        err = proc.stderr.read().decode() if proc.stderr else ""
        return proc.wait(timeout=300), drawn.replace("\r\n", "\n"), err
