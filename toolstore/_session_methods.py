"""The session-log methods of ``ToolStore`` and ``AsyncToolStore`` (mixins, side by side so the two stay alike): they
say when to call the connection-level functions of ``_sessions``; the async ones run ToolStore's in its writer thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

import psycopg

from ._housekeeping import set_settings
from ._input import call_id_list, check_session, check_session_calls, session_pairs
from ._models import CatalogInfo, LoggedCall
from ._retention import DEFAULT_MAX_CALLS, RETENTION_KEY, check_retention, prune_before, retention
from ._rows import CREATE_IT
from ._session_reads import has_session, list_sessions, session_log, transitions
from ._sessions import import_sessions, new_call_ids, prune, record_calls, record_new_calls


class SessionMethods:
    """The session-log methods of ``ToolStore`` (a mixin: the store supplies ``catalog``, ``_run``, ``_info`` and
    ``info``)."""

    catalog: str
    _run: Callable[[Callable[[psycopg.Connection[Any]], Any]], Any]
    _info: Callable[..., CatalogInfo]
    info: Callable[..., CatalogInfo]

    def record_calls(self, session: str, calls: Iterable[object]) -> int:
        """Append tool calls (oldest first) to ``session``'s log; ``route(..., session=...)`` looks back on them and
        the catalog's transition counts learn from them. A call is a tool id (or a name a model called it by), a
        :class:`SessionCall` (with success flag, time, call id) or a :class:`ResolvedCall`. A call id the session
        has seen is skipped, and so is every call before it (the session remembers the last 64 call ids it logged, and
        those of the calls its retention keeps, after a prune took its calls). Returns how many were written;
        UnknownToolError (nothing written) when a call to be logged names no tool of the catalog (a tool id is checked
        as it is written, without a lookup; a name is looked up)."""
        session, checked = check_session(session), check_session_calls(calls)  # read once: _run may try again
        return self._run(lambda conn: record_calls(conn, self._info(conn, hint=CREATE_IT), session, checked))

    def new_calls(self, session: str, call_ids: Sequence[str]) -> list[str]:
        """Of a message list's call ids (oldest first), those new to ``session``: after the last call it has seen (in
        its log, among the last 64 call ids it logged, or those of the calls its retention keeps, both of which it
        keeps when a prune takes its calls),
        each once and none it has seen. What :meth:`record_calls` of calls with these ids would log; it writes
        nothing."""
        ids = call_id_list(call_ids)
        return self._run(lambda conn: new_call_ids(conn, self._info(conn, hint=CREATE_IT), session, ids))

    def record_new_calls(self, session: str, call_ids: Sequence[str], calls: Iterable[object]) -> list[str]:
        """:meth:`new_calls` and :meth:`record_calls` in one transaction under the session's lock (what
        ``route_messages`` does at each step): of a message list's call ids (oldest first), those new to ``session``
        are returned and the new ones among ``calls`` (each carrying one of ``call_ids``) logged; a new call id with no
        call given (a call that resolved to no tool) is returned once (remembered as reported) and logged once it
        comes with a call, unless a later call was logged first (the log keeps the list's order). Two writers of one
        list get each new call id once between them."""
        ids = call_id_list(call_ids)
        session, checked = check_session(session), check_session_calls(calls)  # as record_calls'
        return self._run(lambda conn: record_new_calls(conn, self._info(conn, hint=CREATE_IT), session, ids, checked))

    def import_sessions(
        self, sessions: Iterable[tuple[str, Sequence[object]]] | Mapping[str, Sequence[object]]
    ) -> dict[str, int]:
        """Replace the logs of the given sessions ((session id, calls) pairs, or a mapping of session id to calls), all
        in one transaction; the calls each session had seen are forgotten. A session id given twice is refused."""
        pairs = session_pairs(sessions)
        return self._run(lambda conn: import_sessions(conn, self._info(conn, hint=CREATE_IT), pairs))

    def sessions(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """The catalog's logged sessions, most recently written first, with call counts and times (0 calls: a session
        whose calls retention or a prune took, kept for the call ids it has seen)."""
        return self._run(lambda conn: list_sessions(conn, self._info(conn), limit=limit))

    def session_log(self, session: str) -> list[LoggedCall]:
        """Every logged call of ``session``, oldest first."""
        return self._run(lambda conn: session_log(conn, self._info(conn), session))

    def has_session(self, session: str) -> bool:
        """Whether ``session`` is in the catalog's log: it logged calls, or had them all taken by retention or a prune
        and is kept for the call ids it has seen (:meth:`session_log` is then empty, as for a session never logged)."""
        return self._run(lambda conn: has_session(conn, self._info(conn), session))

    def transitions(self, *, prev: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The catalog's learned transition counts (from ``prev`` when given), most frequent first."""
        return self._run(lambda conn: transitions(conn, self._info(conn), prev=prev, limit=limit))

    def prune_sessions(
        self, *, older_than: timedelta | None = None, session: str | None = None, forget_idle: timedelta | None = None
    ) -> dict[str, int]:
        """Delete logged calls older than ``older_than`` (default: the catalog's retention age), or every call of
        ``session``, and those past the retention's ``max_calls`` in their session; the transition counts follow.
        ``session`` alone forgets that session (its calls and the call ids it has seen: the same message list then
        logs its calls again); a prune by age or count trims, and a session left empty stays when it remembers a call
        id (so its calls are not logged again), else it goes. ``forget_idle`` (a positive timedelta, not with
        ``session``) also forgets every session not written to for that long (its row's ``updated_at``: the last
        ``record_calls`` or import of it), row and calls, in the same transaction; alone, with no age given or set
        and no ``max_calls``, it only forgets. Returns how many ``calls`` and ``sessions`` went (forgotten ones
        included)."""
        keep = retention(self._run(self._info).settings)  # the primary's, where it deletes (a replica may lag)
        only_forget = forget_idle is not None and older_than is None and keep.max_age is None and keep.max_calls is None
        before = None if only_forget else prune_before(older_than, session, keep)
        options: dict[str, Any] = dict(
            before=before, session=session, max_calls=keep.max_calls, max_age=keep.max_age, forget_idle=forget_idle
        )
        return self._run(lambda conn: prune(conn, self._info(conn), **options))

    def set_session_retention(
        self, *, max_calls: int | None = DEFAULT_MAX_CALLS, max_age_days: float | None = None
    ) -> None:
        """Keep at most ``max_calls`` calls per session and none older than ``max_age_days`` (None: no limit; at
        least a second, 1/86,400), applied to a session at each write to it and to every session by
        :meth:`prune_sessions`."""
        keep = check_retention(max_calls, max_age_days)
        self._run(lambda conn: set_settings(conn, self.catalog, {RETENTION_KEY: keep.as_dict()}))

    def session_retention(self) -> dict[str, Any]:
        """The catalog's retention of its session log: ``max_calls`` per session and ``max_age_days``."""
        return retention(self.info(counts=False).settings).as_dict()


class AsyncSessionMethods:
    """The session-log methods of ``AsyncToolStore`` (a mixin: the store supplies ``_write``, which runs a ToolStore
    method in its writer's thread, and ``info``); each as :class:`SessionMethods`' (its listings also run in the
    writer's thread)."""

    _write: Callable[..., Awaitable[Any]]
    info: Callable[..., Awaitable[CatalogInfo]]

    async def record_calls(self, session: str, calls: Iterable[object]) -> int:
        return cast("int", await self._write("record_calls", session, calls))  # checked there, as ToolStore's

    async def new_calls(self, session: str, call_ids: Sequence[str]) -> list[str]:
        ids = call_id_list(call_ids)
        return cast("list[str]", await self._write("new_calls", session, ids))

    async def record_new_calls(self, session: str, call_ids: Sequence[str], calls: Iterable[object]) -> list[str]:
        ids = call_id_list(call_ids)
        return cast("list[str]", await self._write("record_new_calls", session, ids, calls))

    async def import_sessions(
        self, sessions: Iterable[tuple[str, Sequence[object]]] | Mapping[str, Sequence[object]]
    ) -> dict[str, int]:
        return cast("dict[str, int]", await self._write("import_sessions", session_pairs(sessions)))

    async def sessions(self, *, limit: int = 100) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", await self._write("sessions", limit=limit))

    async def session_log(self, session: str) -> list[LoggedCall]:
        return cast("list[LoggedCall]", await self._write("session_log", session))

    async def has_session(self, session: str) -> bool:
        return cast("bool", await self._write("has_session", session))

    async def prune_sessions(
        self, *, older_than: timedelta | None = None, session: str | None = None, forget_idle: timedelta | None = None
    ) -> dict[str, int]:
        options = dict(older_than=older_than, session=session, forget_idle=forget_idle)
        return cast("dict[str, int]", await self._write("prune_sessions", **options))

    async def transitions(self, *, prev: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", await self._write("transitions", prev=prev, limit=limit))

    async def set_session_retention(
        self, *, max_calls: int | None = DEFAULT_MAX_CALLS, max_age_days: float | None = None
    ) -> None:
        await self._write("set_session_retention", max_calls=max_calls, max_age_days=max_age_days)

    async def session_retention(self) -> dict[str, Any]:
        """See :meth:`ToolStore.session_retention` (read on the async pool)."""
        return retention((await self.info(counts=False)).settings).as_dict()
