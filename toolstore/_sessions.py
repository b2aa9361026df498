"""The session log: tool calls appended per session, read back and pruned (``sql/sessions.sql``, migration 0006).

Connection-level functions; :class:`toolstore.ToolStore` says when to call them. A write locks only its session's row
(``open_session``), never the catalog's: writers of one session append in turn with gapless positions, writers of
different sessions do not wait for each other. The transition counts follow by trigger in the same transaction, in
key order. Every write is all or nothing (one transaction, retried when Postgres picks it as a deadlock victim).
Only tool ids, outcomes, times and provider call ids are stored, never user text.

A session's row also keeps the last :data:`SEEN_CALLS` call ids it has logged (``seen_calls``, hashed: migration 0024),
and ``session_seen_calls`` those of the calls its retention keeps (hashed, with their positions and times: migration
0025; trimmed by the retention with the log, at each write and by a prune, but not by a prune's own age), so the calls
it has seen are known after its log is trimmed, and those of the last message list's calls that resolved to
no tool and are still new (``reported_calls``: ``record_new_calls``), so such a call is reported once, and logged once
it resolves unless a later call was logged first. Trimming (retention at each write, a prune by age or by ``max_calls``,
of all sessions or of one) takes calls and keeps that row, even with no call left, when it holds a call id; forgetting a
session (a prune of every call of it, ``prune_sessions(session=...)`` without an age, a prune with ``forget_idle`` of
every session whose row was last written, its ``updated_at``, longer ago than that, or dropping the catalog) takes the
row and what it has seen, and an import replaces it (the imported calls are all it has seen). A row's ``updated_at`` is
its last write: each ``record_calls`` of at least one call (even one whose calls were all logged already) and each
import set it; a prune and a route reading the log do not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from datetime import datetime, timedelta
from typing import Any

import psycopg

from ._connect import retry_conflicts
from ._drive import drive
from ._errors import InvalidInputError, UnknownToolError
from ._input import (
    MAX_CALLS_PER_WRITE,
    MAX_ID_CHARS,
    check_call_times,
    check_session,
    check_session_calls,
    check_text,
    not_a_list,
)
from ._models import CatalogInfo, SessionCall
from ._retention import Retention, check_idle, retention
from ._sql import query
from ._steps import fetch_rows, resolve_steps

#: How many of the call ids a session has seen its row keeps (the newest, 8 bytes each): a message list that still
#: holds one of them, or a call of the log, is told from new calls however its log was trimmed.
SEEN_CALLS = 64


def resolve_tools(conn: psycopg.Connection[Any], info: CatalogInfo, names: Sequence[str]) -> list[str | None]:
    """The tool id each name means in the catalog (``_steps.resolve_steps``), or None."""
    return drive(resolve_steps(info, names), lambda step: fetch_rows(conn, step))  # type: ignore[arg-type]


def _resolved(conn: psycopg.Connection[Any], info: CatalogInfo, calls: list[SessionCall]) -> list[SessionCall]:
    ids = resolve_tools(conn, info, [c.tool for c in calls])
    unknown = list(dict.fromkeys(c.tool for c, i in zip(calls, ids) if i is None))
    if unknown:
        raise _unknown(info, unknown)
    return [SessionCall(i, c.ok, c.at, c.call_id) for c, i in zip(calls, ids) if i is not None]


def _unknown(info: CatalogInfo, unknown: Sequence[str], where: Mapping[str, str] | None = None) -> UnknownToolError:
    """The error naming the first few ``unknown`` tools, each with the session it was called in when ``where`` says."""
    shown = ", ".join(repr(u) + (f" (session {where[u]!r})" if where else "") for u in unknown[:5])
    return UnknownToolError(
        f"{len(unknown)} called tool(s) match no tool (or more than one) of catalog {info.name!r}: {shown}"
    )


def _append_calls(
    conn: psycopg.Connection[Any], info: CatalogInfo, params: Mapping[str, Any], calls: list[SessionCall]
) -> list[SessionCall]:
    """Append ``calls`` after ``params["last_seq"]``, each call's tool taken for a tool id, which the statement checks
    against the catalog as it writes (``append_calls``: a caller's resolution is not trusted). When one is no tool's
    id, nothing was appended: the calls are resolved then (a name, or an id, which stays itself) and appended so.
    Returns the calls appended; UnknownToolError when a call names no tool, or several."""
    if _append_rows(conn, params, calls):
        calls = _resolved(conn, info, calls)
        if missing := _append_rows(conn, params, calls):
            raise _unknown(info, missing)  # a tool removed since it was resolved
    return calls


def _check_times(conn: psycopg.Connection[Any], calls: Sequence[SessionCall | str], where: str = "calls") -> None:
    """:func:`~._input.check_call_times` against the database's time (the transaction's, as the calls' rows have it),
    asked only when a call gives its time."""
    if any(isinstance(c, SessionCall) and c.at is not None for c in calls):
        check_call_times(calls, conn.execute(query("database_now")).fetchone()[0], where)  # type: ignore[index]


def _append_rows(conn: psycopg.Connection[Any], params: Mapping[str, Any], calls: list[SessionCall]) -> list[str]:
    """``append_calls``: the calls appended, or none and the tool ids among them that name no tool of the catalog."""
    columns = {"tools": [c.tool for c in calls], "oks": [c.ok for c in calls], "times": [c.at for c in calls]}
    columns["call_ids"] = [c.call_id for c in calls]
    return [r[0] for r in conn.execute(query("append_calls"), {**params, **columns})]


def new_positions(call_ids: Sequence[str | None], seen: Set[str]) -> list[int]:
    """The positions of the calls (oldest first, given by call id; None: a call without one) that are new to a session
    that has seen the call ids ``seen`` (``seen_call_ids``): those after the last call it has seen (the ones before it
    were seen with it, or at an earlier write whose calls a trim has taken since), each call id once, and never one it
    has seen. What an append logs, and which of a message list's calls ``route_messages`` reports
    (``record_new_calls``)."""
    last = max((i for i, c in enumerate(call_ids) if c is not None and c in seen), default=-1)
    taken, out = set(seen), []
    for i in range(last + 1, len(call_ids)):
        call_id = call_ids[i]
        if call_id is None or call_id not in taken:
            out.append(i)
            if call_id is not None:
                taken.add(call_id)
    return out


def _seen(conn: psycopg.Connection[Any], params: Mapping[str, Any], call_ids: Sequence[str | None]) -> set[str]:
    """Of ``call_ids``, those the session has seen: in its log, or among the last it logged (``seen_calls``)."""
    given = [c for c in call_ids if c is not None]
    return {r[0] for r in conn.execute(query("seen_call_ids"), {**params, "call_ids": given})} if given else set()


def _call_ids(call_ids: Sequence[str]) -> list[str]:
    """A message list's call ids checked; InvalidInputError names a bad one."""
    if isinstance(call_ids, (str, bytes)) or not isinstance(call_ids, Sequence):  # a Mapping is none
        raise InvalidInputError(f"call_ids must be a list of call ids, {not_a_list(call_ids, typed=True)}")
    if len(call_ids) > MAX_CALLS_PER_WRITE:  # as many as one record_calls takes
        raise InvalidInputError(f"more than {MAX_CALLS_PER_WRITE:,} call ids at once")
    return [check_text(c, f"call_ids[{i}]", max_chars=MAX_ID_CHARS) for i, c in enumerate(call_ids)]


def new_call_ids(conn: psycopg.Connection[Any], info: CatalogInfo, session: str, call_ids: Sequence[str]) -> list[str]:
    """Of a message list's call ids (oldest first), those new to the session (:func:`new_positions`): what an append
    of calls with these ids would log. A read: it locks nothing."""
    session = check_session(session)
    given = _call_ids(call_ids)
    seen = _seen(conn, {"catalog": info.id, "session": session}, given)
    return [given[i] for i in new_positions(given, seen)]


def _append(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    session: str,
    calls: Sequence[SessionCall | str],
    keep: Retention,
) -> list[int]:
    """Inside a transaction: lock the session, append the calls new to it (:func:`new_positions`: a call id in its
    log or among the last it logged, which its row keeps when retention or a prune takes the call, was seen, and so
    was every call before the last such one; their tools checked as they are written, :func:`_append_calls`), remember
    their call ids, apply retention. A str is the call id of a call
    that resolved to no tool: not logged, and new until it resolves or a later call is logged (the log keeps the
    conversation's order), but reported once: ``reported_calls`` holds those of the list still new, however many.
    Returns the positions of the calls logged and of those to report."""
    params: dict[str, Any] = {"catalog": info.id, "session": session}
    last_seq = conn.execute(query("open_session"), params).fetchone()[0]  # type: ignore[index]
    call_ids = [c if isinstance(c, str) else c.call_id for c in calls]
    positions = new_positions(call_ids, _seen(conn, params, call_ids))
    logged = [i for i in positions if isinstance(calls[i], SessionCall)]
    pending = [i for i in positions if isinstance(calls[i], str)]  # unresolved, and still new
    reported: set[str] = set()
    if pending:
        asked = {**params, "call_ids": [call_ids[i] for i in pending]}
        reported = {r[0] for r in conn.execute(query("reported_call_ids"), asked)}
    unresolved = [i for i in pending if call_ids[i] not in reported]
    new = [c for c in (calls[i] for i in logged) if isinstance(c, SessionCall)]
    if new:
        new = _append_calls(conn, info, {**params, "last_seq": last_seq}, new)
        last_seq += len(new)
    if new or unresolved:
        seen = [c.call_id for c in new if c.call_id is not None]
        advance = {**params, "last_seq": last_seq, "seen": seen, "seen_limit": SEEN_CALLS}
        # the list's unresolved calls still new (the others never are again); a write of no such call keeps the record
        reported_now = [call_ids[i] for i in pending] if pending else None
        conn.execute(query("advance_session"), {**advance, "reported": reported_now})
    trim = {**params, "last_seq": last_seq, "max_calls": keep.max_calls, "max_age": keep.max_age}
    conn.execute(query("trim_session"), trim)
    return sorted(logged + unresolved)


def record_calls(conn: psycopg.Connection[Any], info: CatalogInfo, session: str, checked: Sequence[SessionCall]) -> int:
    """Append ``checked`` (oldest first; the session id and calls as ``_input.check_session`` and
    ``check_session_calls`` return them, which the store's method ran once, before its tries) to the session's log;
    returns how many were written (a call whose call id the session has seen is skipped, and so is every call before
    it, even after retention or a prune trimmed them all from the log). A call's tool is taken for a tool id, checked
    as the calls are appended, and looked up as a name only when it is none. UnknownToolError when a call to be logged
    names no tool (or several): then nothing is written."""
    if not checked:
        return 0
    keep = retention(info.settings)

    def write() -> int:
        with conn.transaction():
            _check_times(conn, checked)
            return len(_append(conn, info, session, checked, keep))

    return retry_conflicts(write)


def record_new_calls(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    session: str,
    call_ids: Sequence[str],
    calls: Sequence[SessionCall],
) -> list[str]:
    """Of a message list's call ids (oldest first), those new to the session (:func:`new_positions`), told and
    written in one transaction under the session's lock: the new ones among ``calls`` (each with one of those call
    ids) are logged and remembered, and a new call id no call is given for (it resolved to no tool) is remembered as
    reported, so it is new once for reporting, and logged once it comes with a call unless a later call was logged
    first (the log keeps the list's order). Returns the call ids logged and
    those to report. InvalidInputError for a call without one of ``call_ids``; UnknownToolError when a call to be
    logged names no tool (a tool id given, as ``route_messages`` resolved it, is checked in the write, not looked up
    again: :func:`record_calls`): then nothing is written. ``session`` and ``calls``: checked, as for
    :func:`record_calls`."""
    given = _call_ids(call_ids)
    by_id: dict[str, SessionCall] = {}
    listed = set(given)
    for index, call in enumerate(calls):
        if call.call_id is None or call.call_id not in listed:
            raise InvalidInputError(f"calls[{index}].call_id: {call.call_id!r} is not one of call_ids")
        by_id.setdefault(call.call_id, call)
    entries = [by_id.get(c, c) for c in given]
    keep = retention(info.settings)

    def write() -> list[int]:
        with conn.transaction():
            _check_times(conn, calls)
            return _append(conn, info, session, entries, keep)

    return [given[i] for i in retry_conflicts(write)] if given else []


def import_sessions(
    conn: psycopg.Connection[Any], info: CatalogInfo, sessions: Sequence[tuple[object, object]]
) -> dict[str, int]:
    """Replace the log of each given session with its calls (oldest first), all in one transaction: a re-import
    writes the same log, and the calls seen before are forgotten. Sessions are locked in id order; an unknown tool
    or a session id given twice (one log would silently replace the other) anywhere writes nothing."""
    prepared: dict[str, list[SessionCall]] = {}
    positions: dict[str, int] = {}
    for index, (session, calls) in enumerate(sessions):
        try:
            sid = check_session(session)
            if sid in positions:
                raise InvalidInputError(f"session id {sid!r} is given twice (session #{positions[sid]} too)")
            prepared[sid], positions[sid] = check_session_calls(calls), index + 1
        except InvalidInputError as exc:
            raise InvalidInputError(f"session #{index + 1}: {exc}") from None
    flat = [(sid, c) for sid, calls in prepared.items() for c in calls]
    ids = resolve_tools(conn, info, [c.tool for _, c in flat])
    where: dict[str, str] = {}  # each unknown tool's first session
    for (sid, call), tool_id in zip(flat, ids):
        if tool_id is None:
            where.setdefault(call.tool, sid)
    if where:
        raise _unknown(info, list(where), where)
    resolved = iter(SessionCall(i, c.ok, c.at, c.call_id) for (_, c), i in zip(flat, ids) if i is not None)
    prepared = {sid: [next(resolved) for _ in calls] for sid, calls in prepared.items()}
    keep = retention(info.settings)

    def write() -> int:
        written = 0
        with conn.transaction():
            for sid in prepared:
                _check_times(conn, prepared[sid], f"session #{positions[sid]}: calls")
            for sid in sorted(prepared):
                conn.execute(query("open_session"), {"catalog": info.id, "session": sid})
                conn.execute(query("clear_session"), {"catalog": info.id, "session": sid})
                conn.execute(query("reset_session"), {"catalog": info.id, "session": sid})
                written += len(_append(conn, info, sid, prepared[sid], keep))
        return written

    return {"sessions": len(prepared), "calls": retry_conflicts(write)}


def prune(
    conn: psycopg.Connection[Any],
    info: CatalogInfo,
    *,
    before: datetime | None = None,
    session: str | None = None,
    max_calls: int | None = None,
    max_age: timedelta | None = None,
    forget_idle: timedelta | None = None,
) -> dict[str, int]:
    """Delete the calls made before ``before`` and those more than ``max_calls`` back in their session, of one session
    or of all (a trim: a session left empty stays when it has seen a call id, see the module's docstring, else it
    goes); the transition counts follow. Without ``before``, every call of the sessions goes and the sessions are
    forgotten, unless ``max_calls`` is the only limit (a prune of all sessions by the retention's count). The call ids
    the sessions remember (``session_seen_calls``) go past the retention, ``max_calls`` and ``max_age``, not past
    ``before``: a prune by age takes calls, and what was seen stays for as long as the retention would keep it. With
    ``forget_idle``, every session of the catalog whose row was last written (``updated_at``) longer ago than that is
    forgotten too, in the same transaction (only that when neither ``before`` nor ``max_calls`` is given). Returns how
    many calls and sessions went."""
    if before is not None and (not isinstance(before, datetime) or before.utcoffset() is None):
        raise InvalidInputError(f"before must be a datetime with a time zone, got {before!r}")
    if session is not None:
        session = check_session(session)
    forget_idle = check_idle(forget_idle, session)
    trim = forget_idle is None or before is not None or max_calls is not None  # else it only forgets
    every = before is None and (session is not None or max_calls is None)
    params: dict[str, Any] = {"catalog": info.id, "session": session, "before": before, "every": every}
    params.update(max_calls=max_calls, max_age=max_age, idle=forget_idle)

    def write() -> dict[str, int]:
        with conn.transaction():
            trimmed = [session] if session is not None else []
            if trim and session is None:
                trimmed = [r[0] for r in conn.execute(query("sessions_to_prune"), params)]
            idle = [r[0] for r in conn.execute(query("idle_sessions"), params)] if forget_idle is not None else []
            locked = {**params, "sessions": sorted({*trimmed, *idle})}
            # then the deletes see every call committed before; rows the lock created are no session that went
            created = {r[0] for r in conn.execute(query("lock_sessions"), locked) if r[1]}
            calls = conn.execute(query("prune_calls"), {**params, "sessions": trimmed}).rowcount if trimmed else 0
            forgotten = []
            if idle:  # those still idle under the lock: their calls (the counts follow), then their rows
                calls += conn.execute(query("forget_idle_calls"), {**params, "sessions": idle}).rowcount
                forgotten = [r[0] for r in conn.execute(query("forget_idle_sessions"), {**params, "sessions": idle})]
            empty = {**params, "sessions": sorted({*trimmed, *created})}
            dropped = [r[0] for r in conn.execute(query("drop_empty_sessions"), empty) if r[0] not in created]
        return {"calls": calls, "sessions": len(dropped) + len(forgotten)}

    return retry_conflicts(write)
