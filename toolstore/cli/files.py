"""The one way the command line writes a file (``export -o``, ``eval --report``): whole when it can, never through a
symbolic link."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

#: Permission bits of a new file, before the umask (what ``open(..., "w")`` gives).
NEW_FILE_MODE = 0o666


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path``, atomically when it can: into a new temporary file beside it, then
    renamed over it, so a crash or a full disk leaves the old file whole (or none) and never half a file. A symlink at
    ``path`` is replaced by the file, never written through; an existing regular file keeps its permission bits (and
    owners, where they can be given). An existing regular file that is writable is written in place (truncated, then
    written) where a rename would lose what it is: it has other hard links or owners a new file cannot be given; and
    so is one in a directory that is not writable (the old in-place write worked there, and still does). One that is
    not writable is replaced."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        old: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        old = None  # a symlink or anything else at path is replaced, never written through
    if old is not None and old.st_nlink > 1 and os.access(path, os.W_OK):
        _write_in_place(path, raw, old)  # a rename would cut it from its other links
    elif not _write_beside(path, raw, old):
        assert old is not None
        _write_in_place(path, raw, old)


def _write_beside(path: Path, raw: bytes, old: os.stat_result | None) -> bool:
    """Write a temporary file beside ``path`` and rename it over it; False, having written nothing, when the existing
    regular file ``old`` is better written in place (its directory is not writable, or its owners not ours to give)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)  # O_EXCL: never through a link
    except PermissionError as exc:
        if old is not None:
            return False
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    except OSError as exc:  # named by the file asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    try:
        with os.fdopen(fd, "wb") as out:
            if old is not None:
                if not _keep_owners(out.fileno(), old) and os.access(path, os.W_OK):
                    os.unlink(temporary)
                    return False
                os.fchmod(out.fileno(), stat.S_IMODE(old.st_mode))
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
    _sync_directory(path.parent)
    return True


def _keep_owners(fd: int, old: os.stat_result) -> bool:
    """Give the new file ``fd`` the old file's owner and group; False when they cannot be given (not ours to give)."""
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) == (old.st_uid, old.st_gid):
        return True
    try:
        os.fchown(fd, old.st_uid, old.st_gid)
    except PermissionError:
        return False
    return True


def _write_in_place(path: Path, raw: bytes, old: os.stat_result) -> None:
    """Truncate the regular file at ``path`` (the one ``old`` describes, never a link swapped in since) and write."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "wb") as out:
            now = os.fstat(out.fileno())
            if (now.st_dev, now.st_ino) != (old.st_dev, old.st_ino):
                raise OSError(errno.EAGAIN, "the file was replaced while it was written; try again")
            out.truncate(0)
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None


def _sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (fsync the directory) where the system allows it; best effort."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
