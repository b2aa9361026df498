"""The one way the command line writes a file (``export -o``, ``eval --report``): whole or not at all."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

#: Permission bits of a new file, before the umask (what ``open(..., "w")`` gives).
NEW_FILE_MODE = 0o666


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically: into a new temporary file beside it, then renamed over
    it, so a crash or a full disk leaves the old file whole (or none) and never half a file. A symlink at ``path`` is
    replaced by the file, never written through; an existing regular file's permission bits are kept."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        old = os.lstat(path)
    except FileNotFoundError:
        mode = None
    else:
        mode = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else None
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)  # O_EXCL: never through a link
    except OSError as exc:  # named by the file asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
        raise
