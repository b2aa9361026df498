"""A stdio MCP server's stderr, shown on toolstore's stderr a line at a time, each line redacted and named.

The server writes to a pipe that a thread reads as it comes (a server writing a lot never stalls on a full pipe), and
each line goes to ``sys.stderr`` prefixed with the upstream's description (:meth:`Upstream.describe`): what toolstore
handed the server that is secret by definition (its env values and secret flags' values, ``${VAR}`` expanded:
:meth:`Upstream.secrets`) replaced wherever it appears, then the line read as the gateway reads an upstream's error
text (:func:`client_text`: URLs cut to their scheme and host, what looks like a credential redacted). Bytes that are
not UTF-8 become replacement characters, a line longer than :data:`MAX_LINE` characters is cut (saying so), and a last
line without its newline is shown when the server exits.

The SDK does not hand on how the server's process ended, so on Linux the server runs under ``/bin/sh``
(:meth:`ServerStderr.command`), which writes its exit status when it ends to a file of ours that has no name (removed
once made, written through ``/proc/PID/fd/N``: nothing is left behind if toolstore ends without cleaning up): a session
that failed because its server exited says with what status (:meth:`ServerStderr.ended`), e.g. "Connection closed (the
server exited with status 127)", and so does a call that failed on a session held open (:class:`Ending`, read once
the session has closed). A command not found is started as it is, for the SDK's own error ("No such file ...").
"""

from __future__ import annotations

import os
import re
import select
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import BinaryIO, TextIO

import anyio

from ._mcp_upstream import REDACTED, client_text

#: Characters of one line shown; the rest is cut, and the line says how long it was.
MAX_LINE = 4000
#: A value of fewer characters is not hidden wherever it appears (``DEBUG=1``: hiding every "1" would garble the
#: lines), only where an env variable's value follows its name: ``DEBUG=[redacted]``, ``"DEBUG": "[redacted]"``.
MIN_SECRET = 4
#: Seconds at most a closed session waits for the server's last lines: its process has ended, so they are in the pipe,
#: and the wait ends once the pipe is empty (a process the server left that holds the pipe is not waited for).
FINISH_WAIT = 2.0
_CHUNK = 65536
#: How :meth:`ServerStderr.ended` begins.
ENDED = "the server exited with status"
_SHELL = "/bin/sh"
#: Runs the server (the arguments after the status file's path) and writes its exit status to that file when it ends:
#: a shell's ``$?``, 128 + N for a server ended by signal N. Killed itself (the SDK's stop, which signals the server's
#: whole process group), it writes nothing; nor when toolstore has ended (the path is gone).
_REPORTER = 'status=$1; shift; "$@"; code=$?; { echo "$code" > "$status"; } 2>/dev/null; exit "$code"'
_WRITING = threading.Lock()  # one line at a time from every upstream's reader


class Ending:
    """How a session's stdio server ended (:meth:`ServerStderr.ended`), told once the session has closed
    (:func:`~._mcp_client.open_session` closes it): what a call that failed on a session held open, once its server
    exited, says (the session's own failure says it already)."""

    def __init__(self) -> None:
        self.text = ""
        self._closed = anyio.Event()

    def close(self, text: str) -> None:
        self.text = text
        self._closed.set()

    async def told(self, bound: float) -> str:
        """:attr:`text`, once the session has closed (``bound`` seconds at most: then empty)."""
        with anyio.move_on_after(bound):
            await self._closed.wait()
        return self.text if self._closed.is_set() else ""


class ServerStderr:
    """The pipe a stdio server writes its stderr to (:attr:`file`, handed to the SDK) and the thread that reads it."""

    def __init__(self, description: str, secrets: Iterable[str], env: Mapping[str, str] | None = None) -> None:
        short = [(name, value.strip()) for name, value in (env or {}).items() if 0 < len(value.strip()) < MIN_SECRET]
        self._short = [  # NAME=VALUE, NAME: VALUE, "NAME": "VALUE": the value alone, not inside a longer word
            re.compile(rf"(?<!\w)({re.escape(name)}[\"']?[ \t]*[=:][ \t]*[\"']?){re.escape(value)}(?!\w)")
            for name, value in short
        ]
        pieces = {p.strip() for s in secrets for p in s.splitlines() if len(p.strip()) >= MIN_SECRET}
        longest = sorted(pieces, key=len, reverse=True)  # a value inside a longer one: the longer one hidden whole
        self._secrets = re.compile("|".join(map(re.escape, longest))) if longest else None
        # bytes of a line kept: the shown part and enough after it that a secret across the cut is found whole
        self._kept = MAX_LINE + max(map(len, longest), default=0) + 256
        self._prefix = f"[{self._literal(description)}]"  # described redacted already: no URL cut
        read_end, write_end = os.pipe()  # neither inherited by other processes (PEP 446)
        self.file: TextIO = os.fdopen(write_end, "w")
        self._ended, self._ending = os.pipe()  # finish closes _ending: the server's process has ended
        self._drained = threading.Event()  # every line the ended server wrote has been shown
        self._thread = threading.Thread(target=self._read, args=(read_end,), name="mcp-stderr", daemon=True)
        self._thread.start()
        self._status: int | None = None  # the file the server's exit status is written to, when it runs wrapped
        self.status: int | None = None  # the server's exit status, once it ended on its own (read by finish)

    def command(self, command: str, args: list[str], env: Mapping[str, str] | None) -> tuple[str, list[str]]:
        """The command and arguments that start the server so that its exit status is written for :attr:`status`:
        under ``/bin/sh`` where this process's files are reached by ``/proc/PID/fd`` (Linux), unless the command is not
        found on ``env``'s PATH (or this process's), which is started as it is, for the SDK's error naming it. The shell
        runs the command found (its path: never a builtin of the shell's of that name)."""
        found = shutil.which(command, path=(env or {}).get("PATH", os.environ.get("PATH")))
        files = f"/proc/{os.getpid()}/fd"
        if not os.path.isdir(files) or not os.access(_SHELL, os.X_OK) or found is None:
            return command, args
        self._status, path = tempfile.mkstemp(prefix="toolstore-mcp-", suffix=".status")  # not inherited (PEP 446)
        os.unlink(path)
        return _SHELL, ["-c", _REPORTER, "toolstore-mcp", f"{files}/{self._status}", found, *args]

    def ended(self) -> str:
        """How the server ended, when it exited on its own with a status other than 0: "the server exited with status
        N"; else empty."""
        return f"{ENDED} {self.status}" if self.status else ""

    def started(self) -> None:
        """The server has its copy of the pipe: close ours, so the reader ends when the server's copy closes."""
        self.file.close()

    async def finish(self) -> None:
        """After the server's process ended: wait (:data:`FINISH_WAIT` at most, in a worker thread) for its last
        lines to be shown, those in the pipe now; a process the server left that holds the pipe is not waited for (its
        later lines are shown as they come)."""
        self.file.close()
        os.close(self._ending)
        self.status = self._read_status()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._drained.wait, FINISH_WAIT)

    def _read_status(self) -> int | None:
        """The exit status the shell wrote (the process has ended: the SDK waited for it), None when it wrote none;
        the file closed."""
        if self._status is None:
            return None
        try:
            written = os.pread(self._status, 16, 0).decode("ascii", "replace").strip()
        finally:
            os.close(self._status)
        return int(written) if written.isdigit() else None

    def _read(self, fd: int) -> None:
        line, dropped = bytearray(), 0
        with open(fd, "rb", buffering=0) as pipe:
            for chunk in self._chunks(pipe):
                if chunk is None:  # all the ended server wrote is read: its last line shown, with its newline or not
                    if line or dropped:
                        self._show(line, dropped)
                    line, dropped = bytearray(), 0
                    self._drained.set()
                    continue
                *ended, rest = chunk.split(b"\n")
                for piece in ended:
                    dropped = self._keep(line, piece, dropped)
                    self._show(line, dropped)
                    line, dropped = bytearray(), 0
                dropped = self._keep(line, rest, dropped)
        if line or dropped:
            self._show(line, dropped)
        self._drained.set()

    def _chunks(self, pipe: BinaryIO) -> Iterator[bytes | None]:
        """The bytes the pipe holds as they come, until its end; and None once, when the server's process has ended
        (:meth:`finish`) and the pipe is empty. Where ``select`` takes no pipe (Windows), only the pipe's end."""
        ended: int | None = self._ended
        fd = pipe.fileno()
        try:
            while True:
                if ended is not None and sys.platform != "win32":
                    ready = select.select([fd, ended], [], [])[0]
                    if ended in ready and not select.select([fd], [], [], 0)[0]:
                        os.close(ended)
                        ended = None
                        yield None
                        continue
                chunk = pipe.read(_CHUNK)
                if not chunk:
                    return
                yield chunk
        finally:
            if ended is not None:
                os.close(ended)

    def _keep(self, line: bytearray, piece: bytes, dropped: int) -> int:
        """Add what fits of ``piece`` to ``line``; the count of bytes of the line dropped so far."""
        room = max(0, self._kept - len(line))
        line += piece[:room]
        return dropped + max(0, len(piece) - room)

    def _show(self, line: bytearray, dropped: int) -> None:
        text = self._hide(line.decode("utf-8", "replace").removesuffix("\r"))
        if dropped or len(text) > MAX_LINE:
            text = f"{text[:MAX_LINE]} [line cut: {len(line) + dropped} bytes]"
        stream = sys.stderr
        if stream is None:  # pragma: no cover - no stderr at all (pythonw)
            return
        try:
            with _WRITING:
                stream.write(f"{self._prefix} {text}\n")
                stream.flush()
        except (OSError, ValueError):  # our stderr closed: keep reading, so the server never stalls
            pass

    def _hide(self, text: str) -> str:
        return client_text(self._literal(text))

    def _literal(self, text: str) -> str:
        """``text`` with each value toolstore handed the server as a secret replaced by ``[redacted]`` (a short env
        value where it follows its variable's name: :data:`MIN_SECRET`)."""
        text = self._secrets.sub(REDACTED, text) if self._secrets is not None else text
        for pattern in self._short:
            text = pattern.sub(lambda found: found.group(1) + REDACTED, text)
        return text
