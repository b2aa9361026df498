"""A pseudo-terminal for CLI tests that look at what a command draws on a terminal (progress bars, notes)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios


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
