"""Memory traffic beside a measurement: a child process copying a large array in a loop, paused and resumed.

The in-process reference's intent search reads every example vector per request (461 MB at 100k tools), so it is
bound by memory bandwidth, which other work on a shared machine takes; the statement reads far less. Timing both
with the copier running and paused, request by request in one run, gives the ratio's range on this machine
(``bench/route.py --memory-traffic MB``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import TracebackType

_COPIER = """
import sys
import numpy as np
a = np.ones(int(sys.argv[1]) * 2**20 // 8)
b = np.empty_like(a)
print("ready", flush=True)
while True:
    np.copyto(b, a)
"""


class MemoryTraffic:
    """A copier of ``mb`` megabytes (two arrays of that size), started paused; :meth:`running` resumes or pauses it."""

    def __init__(self, mb: int) -> None:
        if mb <= 0:
            raise ValueError(f"--memory-traffic takes a size in MB above 0, got {mb}")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _COPIER, str(mb)], stdout=subprocess.PIPE, text=True, env={"OMP_NUM_THREADS": "1"}
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the memory copier did not start")
        self._on = True
        self.running(False)

    def running(self, on: bool) -> None:
        if on != self._on:
            self._proc.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
            self._on = on
            if on:
                time.sleep(0.002)  # scheduled again and copying before the next timing starts

    def close(self) -> None:
        self._proc.send_signal(signal.SIGCONT)
        self._proc.terminate()
        self._proc.wait(timeout=10)

    def __enter__(self) -> MemoryTraffic:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
