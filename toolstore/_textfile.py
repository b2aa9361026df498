"""Reading a file a caller names (a tools, examples, anchors, negatives or messages file, a model's configuration),
or stdin (:class:`Stdin`, the command line's FILE ``-``): its UTF-8 text, at most :data:`~._input.MAX_FILE_BYTES`, a
regular file, a pipe or /dev/null (empty), every failure an :class:`InvalidInputError` naming the file."""

from __future__ import annotations

import codecs
import os
import stat

from ._errors import InvalidInputError, InvalidTypeError
from ._input import MAX_FILE_BYTES
from ._interrupts import Wakeup, wait_readable

#: What stdin is called in what is said of it (``stdin line 3: ...``).
STDIN_NAME = "stdin"
#: The most one read asks for.
READ_CHUNK = 2**20


class Stdin:
    """Stdin as a file to read (the command line's FILE ``-``: ``jq ... | toolstore examples -``), named ``stdin`` in
    what is said of it. :func:`read_text_file` reads it once, to its end, and keeps the text: a command reading its
    file twice reads the same text, not a drained pipe's nothing. Empty, it is refused (nothing was piped in: the
    command before failed), where an empty file is its reader's to judge."""

    def __init__(self) -> None:
        self.text: str | None = None

    def __fspath__(self) -> str:
        return STDIN_NAME

    def __str__(self) -> str:
        return STDIN_NAME

    def __repr__(self) -> str:
        return "Stdin()"


def path_name(path: object, what: str = "file") -> str:
    """``path``'s name as what is said of it names it (``os.fspath``); a value that is no path (None, a number, a list
    of lines, bytes) is an :class:`InvalidTypeError` naming ``what`` and the type given, not Python's TypeError from
    deep in the reader."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"the {what} must be a path (a str or os.PathLike), got {type(path).__name__}")
    name = os.fspath(path)
    if not isinstance(name, str):
        raise InvalidTypeError(f"the {what} must be a path (a str or os.PathLike), got a path of {type(name).__name__}")
    return name


def read_text_file(path: str | os.PathLike[str], what: str = "file") -> str:
    """The UTF-8 text of a regular file or a pipe (a FIFO; ``<(curl ...)``'s /dev/fd/N) of at most
    :data:`MAX_FILE_BYTES`, waiting for a pipe's writer (:func:`_open`); /dev/null is empty, other devices and the
    rest are refused. The file is opened once and what is opened is checked and read, at most the limit and one byte
    more: a file swapped for another (a device, a larger file) or grown after its size was read is refused, never read
    past the limit. A :class:`Stdin` is read from descriptor 0, once (:func:`_read_stdin`)."""
    if isinstance(path, Stdin):
        if path.text is None:
            path.text = _read_stdin(what)
        return path.text
    name = path_name(path, what)
    fd, info = _open(name, what)
    return _read(fd, info, name, what)


def _read_stdin(what: str) -> str:
    """Stdin's text, read as a file is (:func:`_read`), from where it stands: a pipe, a file it is redirected from,
    /dev/null (empty, so refused as such); a terminal and other devices are refused (no wait for typing), and so is a
    closed or empty stdin."""
    try:
        info = os.fstat(0)
    except OSError:
        raise InvalidInputError(f"{STDIN_NAME} is closed: pipe the {what} in") from None
    if not _readable(info):
        raise InvalidInputError(f"{STDIN_NAME}: not a regular file or a pipe: pipe the {what} in")
    text = _read(0, info, STDIN_NAME, what, close=False)
    if not text:
        raise InvalidInputError(f"{STDIN_NAME} is empty: no {what} was piped in")
    return text


def _read(fd: int, info: os.stat_result, name: str, what: str, *, close: bool = True) -> str:
    """The UTF-8 text of ``fd`` (``info`` its fstat), read to its end but never past the limit (:func:`_read_bytes`);
    closed after, but with ``close`` false (stdin)."""
    try:
        if info.st_size > MAX_FILE_BYTES:
            raise InvalidInputError(f"{name}: {info.st_size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
        try:
            raw = _read_bytes(fd, MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise InvalidInputError(f"{name}: cannot read the {what}: {exc.strerror or exc}") from None
    finally:
        if close:
            os.close(fd)
    if len(raw) > MAX_FILE_BYTES:  # it grew after its size was read
        raise InvalidInputError(f"{name}: more than {MAX_FILE_BYTES:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    raw = raw.removeprefix(codecs.BOM_UTF8)  # a byte order mark is no text (as "utf-8-sig" reads it)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{name} {_position(raw, exc.start)}: not valid UTF-8 ({exc.reason})") from None


def _read_bytes(fd: int, limit: int) -> bytes:
    """What ``fd`` holds to its end, at most ``limit`` bytes. Each read waits first for ``fd`` to have something to read
    or its end (:func:`~._interrupts.wait_readable`: a Ctrl-C ends that wait however early it came, where a blocking
    ``read``, or a ``poll``, begun just after it missed it and waited on). A descriptor left non-blocking (O_NONBLOCK:
    stdin a pipe its caller set so, which this process shares and leaves as it is) is waited on so too, its "nothing
    yet" never taken for the end (half a file read as the whole) nor an error."""
    chunks: list[bytes] = []
    size = 0
    with Wakeup() as wakeup:
        while size < limit:
            wait_readable(fd, wakeup)  # data, or the writer's end; Ctrl-C ends the wait
            try:
                chunk = os.read(fd, min(limit - size, READ_CHUNK))
            except BlockingIOError:  # another reader of a shared pipe took what there was
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def _open(name: str, what: str) -> tuple[int, os.stat_result]:
    """A descriptor to read the regular file or pipe ``name`` from, and what it is (its one fstat), opened without
    waiting (O_NONBLOCK: a FIFO's open waits for a writer, a device's for anything; no effect on a regular file's
    reads). A pipe is waited on as ``cat`` waits, for a writer's data or end (Ctrl-C ends the wait), then read from to
    its end."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot read the {what}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISFIFO(info.st_mode):
            with Wakeup() as wakeup:  # a FIFO no writer opened yet reports nothing: a read now would be its end
                wait_readable(fd, wakeup)
            os.set_blocking(fd, True)
        elif not _readable(info):
            raise InvalidInputError(f"{name}: not a regular file or a pipe")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _readable(info: os.stat_result) -> bool:
    """Whether what ``info`` describes is read as a file: a regular file, a pipe (a socket, as stdin may be) or
    /dev/null, an empty file (a script's ``FILE=/dev/null``); no other device, which may never end (/dev/zero) or wait
    for typing (a terminal)."""
    if stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
        return True
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == os.stat(os.devnull).st_rdev


def _position(raw: bytes, end: int) -> str:
    """``line N, column C`` of the byte at ``end`` of ``raw``, UTF-8 before it, the column in characters as a JSON
    error counts it."""
    start = raw.rfind(b"\n", 0, end) + 1
    line, column = raw.count(b"\n", 0, end) + 1, len(raw[start:end].decode("utf-8")) + 1
    return f"line {line}, column {column}"
