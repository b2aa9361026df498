"""Ctrl-C ends a read of stdin that waits for a pipe's writer however early it comes (toolstore._textfile, which every
command reading FILE ``-`` uses): a SIGINT delivered just before the wait began was noted by Python's C handler and
nothing ended the wait (a ``poll`` for a non-blocking stdin, a blocking ``read`` otherwise)."""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

#: Rounds of two SIGINTs per test: the second lands, at random, as the read of the first ends and the next begins.
ROUNDS = 20_000
#: How long a SIGINT may go unhandled before its wait counts as hung: far past the time a handler takes, a guard
#: against a wait that never ends, not a timed assertion.
HANG_SECONDS = 10.0

#: Reads stdin (a pipe never written) again and again; every SIGINT handled writes the time it ran (CLOCK_MONOTONIC,
#: shared by the processes) and raises KeyboardInterrupt, which the nested loops catch wherever it lands.
READER = """
import os, signal, struct, time
from toolstore._textfile import Stdin, read_text_file

def handled(signum, frame):
    # SIGINT blocked while the time is told: on Python 3.10 a second handler run inside this one (the test sends
    # SIGINTs back to back) made time.monotonic() raise SystemError, and the reader died of it
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        os.write(1, struct.pack("d", time.monotonic()))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    raise KeyboardInterrupt

def reads():
    os.write(1, struct.pack("d", 0.0))
    while True:
        try:
            read_text_file(Stdin())
        except KeyboardInterrupt:
            pass

def level(n):
    while True:
        try:
            level(n - 1) if n else reads()
        except KeyboardInterrupt:
            pass

signal.signal(signal.SIGINT, handled)
level(30)
"""


class Reader:
    """The reader process, and the times its SIGINT handler ran, as it tells them."""

    def __init__(self, stdin: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", READER], stdin=stdin, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        self.told = b""

    def handled_after(self, sent: float) -> bool:
        """Whether a SIGINT handler ran after ``sent`` (told within HANG_SECONDS)."""
        deadline = time.monotonic() + HANG_SECONDS
        while True:
            while len(self.told) >= 8:
                ran = struct.unpack("d", self.told[:8])[0]
                self.told = self.told[8:]
                if ran > sent:
                    return True
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.out], [], [], left)[0]:
                return False
            chunk = os.read(self.out, 4096)
            assert chunk, f"the reader ended: {self.proc.wait()}"
            self.told += chunk

    def interrupt(self) -> float:
        """Send SIGINT; the time just before."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        return sent


@pytest.fixture(params=["non-blocking", "blocking"])
def reader(request: pytest.FixtureRequest) -> Iterator[Reader]:
    """A reader of a stdin pipe (left non-blocking by its caller, or not) whose writer writes nothing, ready."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, request.param == "blocking")
    try:
        reader = Reader(read_end)
    finally:
        os.close(read_end)
    try:
        assert reader.handled_after(-1.0), "the reader did not start"
        yield reader
    finally:
        reader.proc.kill()
        reader.proc.wait()
        os.close(write_end)
        assert reader.proc.stdout is not None
        reader.proc.stdout.close()


def test_ctrl_c_as_the_wait_for_stdin_begins_ends_it(reader: Reader) -> None:
    """Each round: a SIGINT, a random spin (so that the next lands anywhere from inside the handler of this one to the
    next wait), and a second SIGINT, whose handler must run. Before, about one round in a few thousand hung in the
    wait (the second SIGINT noted, the poll or read begun just after), till a third SIGINT."""
    spins = random.Random(49)
    hung = []
    for round_ in range(ROUNDS):
        reader.interrupt()
        for _ in range(spins.randrange(1000)):
            pass
        if not reader.handled_after(reader.interrupt()):
            hung.append(round_)
            assert reader.handled_after(reader.interrupt()), f"the reader is stuck for good (hung in rounds {hung})"
            break  # one is enough to fail
    assert not hung, f"a SIGINT was not handled for {HANG_SECONDS:.0f} s, the read waiting on (round {hung[0]})"
