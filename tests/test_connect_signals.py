"""Ctrl-C ends a store's wait for its pool's first connection however the signal came: the connector waited on an
event for the first connection's setup (15 s at least, a store's ``timeout`` when longer), and a wait for a lock ends
early only for a signal delivered to the waiting thread while it waits. One that another thread took (the kernel gives
a process's signal to any thread not blocking it: a pool worker's) or that came just before the wait began went
unheard until the wait's bound."""

from __future__ import annotations

import subprocess
import sys

#: How long the opener may take to end after the signal before the test fails: a guard against the wait running to its
#: bound (an hour), not a timed assertion.
HANG_SECONDS = 120.0

#: Opens a Connector on a server that accepts connections and never answers (the kernel's backlog: nothing accepts
#: them), with an hour's timeout; once the main thread waits in it, a SIGINT is sent to another thread of the process.
OPENER = """
import signal, socket, sys, threading, time
from toolstore._connect import Connector

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
dsn = f"postgresql://toolstore@127.0.0.1:{listener.getsockname()[1]}/toolstore"

def waiting():
    frame = sys._current_frames().get(threading.main_thread().ident)
    files = []
    while frame is not None:
        files.append(frame.f_code.co_filename)
        frame = frame.f_back
    return bool(files) and files[0] == threading.__file__ and any(f.endswith("_connect.py") for f in files)

def interrupt():
    while not waiting():
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread takes it, not the one waiting

threading.Thread(target=interrupt, daemon=True).start()
try:
    Connector(dsn, schema="toolstore", timeout=3600)
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_taken_by_another_thread_ends_the_wait_for_the_pools_first_connection() -> None:
    """Before, the SIGINT's handler ran only when the wait ended: an hour here (the guard's timeout failed the test)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", OPENER], capture_output=True, text=True, timeout=HANG_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the open was not interrupted in {HANG_SECONDS:.0f} s: the SIGINT went unheard") from None
    assert done.stdout.split() == ["interrupted"], done.stderr
