"""Closing what a store holds (its pools): every one closed, even after one failed, then the first failure raised
with the others noted (PEP 678's ``__notes__``, which a traceback prints)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from ._errors import add_notes, first_line

#: What one close closes ("read replica 2's pool"), and the call that closes it.
Closer = tuple[str, Callable[[], object]]
AsyncCloser = tuple[str, Callable[[], Awaitable[object]]]


def close_all(closers: Iterable[Closer]) -> None:
    """Call every closer; then raise the first failure, if any (:func:`raise_first`)."""
    failures: list[tuple[str, BaseException]] = []
    for what, close in closers:
        try:
            close()
        except BaseException as exc:  # the others are closed all the same
            failures.append((what, exc))
    raise_first(failures)


async def aclose_all(closers: Iterable[AsyncCloser]) -> None:
    """:func:`close_all` of closers to await."""
    failures: list[tuple[str, BaseException]] = []
    for what, close in closers:
        try:
            await close()
        except BaseException as exc:  # the others are closed all the same
            failures.append((what, exc))
    raise_first(failures)


def raise_first(failures: list[tuple[str, BaseException]]) -> None:
    """Raise the first of ``failures`` (what failed to close, the error), noting what it closed and each later one."""
    if not failures:
        return
    (what, first), later = failures[0], failures[1:]
    notes = [f"raised closing {what}"]
    notes += [f"closing {other} failed too: {type(exc).__name__}: {first_line(exc)}" for other, exc in later]
    add_notes(first, *notes)
    raise first
