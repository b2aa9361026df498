"""Long-lived sessions to upstream MCP servers, for the gateway: one per upstream, opened on first use.

The SDK's clients run task groups that must be entered and left by one task, so each session is held by its own task in
the gateway's task group (:meth:`UpstreamSessions.__aenter__`); requests use the session from their own tasks. A session
whose connection ended (the server exited, the connection dropped) is closed, and a call that could not be sent on it,
or that an HTTP server refused for not knowing the session (it restarted), is made on a fresh one. An error the server
answers to one call (a JSON-RPC error: bad arguments, an unknown tool) leaves the session, and the other calls in flight
on it, alone. Each session lists its upstream's tools when it opens and again when the upstream sends
``notifications/tools/list_changed`` (:class:`_Listing`: one listing at a time, the newest kept, each abandoned after
:data:`LISTING_TIMEOUT` seconds; a call made while one runs waits for it, :data:`LISTING_WAIT` seconds at most): a call
of a tool its latest listing does not name lists them once more (the listing held may be older than the upstream's
tools: one abandoned, or a notification not yet read when the call came), and if that listing does not name it either
(the upstream dropped it, or restarted with other tools without saying so: the catalog is out of date), is an
McpSyncError naming it, never sent; after a listing that failed, every call is sent. A provider's calls made on a
session to another upstream than before (a sync recorded new values for it: a rotated token) retire the session to the
old one, closed once its calls in flight end; such a call reads the provider's record again first, so one that read it
just before the rotation, after another call served the new values, goes to them instead of reopening the old session
(and the session it opened meanwhile to values a second rotation replaced is closed as it goes on).
Closing the pool stops every upstream (stdio processes exit).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ._errors import McpSyncError
from ._mcp_client import list_session_tools, note_ended, open_session, sdk_private
from ._mcp_stderr import Ending
from ._mcp_upstream import Upstream
from ._observe import logger

#: JSON-RPC error codes that speak of the connection, not of the call: the transport closed (-32000, the SDK's
#: CONNECTION_CLOSED), or the server no longer knows the session (-32600: streamable HTTP's "Session not found").
_SESSION_ERRORS = frozenset({-32000, -32600})
#: How a streamable-HTTP server refuses a request for a session it does not know (it restarted, or expired the
#: session) with HTTP 404, before running anything: the Python SDK's body (-32600 "Session not found"), the TypeScript
#: SDK's (-32001), or the client SDK's stand-in for a 404 without a JSON-RPC body ("Session terminated", -32600).
_REFUSED_SESSION = (frozenset({-32600, -32001}), frozenset({"session not found", "session terminated"}))
#: Seconds a call made while its upstream's tools are listed again (after notifications/tools/list_changed) waits for
#: that listing before it is checked against the listing held.
LISTING_WAIT = 5.0
#: Seconds a listing of an upstream's tools may take: one that takes longer is abandoned (a warning) and counts as
#: answered with the listing held, so a hung listing does not hold up every later call for LISTING_WAIT.
LISTING_TIMEOUT = 5.0
#: How many times one call reads its provider's upstream again (``recorded``) while other calls keep moving the
#: provider's calls to other upstreams: past that, it goes to the upstream it read last.
REREADS = 3
#: How many turns the gateway gives the sessions' readers (``anyio.sleep(0)``: no time, no request) before it answers a
#: tool the catalog lacks, so that a notification an upstream has already sent (its tools changed) is read and numbers a
#: listing: from the transport's reader to the session's message handler a message takes a few turns.
PENDING_TURNS = 20
#: Seconds a call that failed on a stdio upstream's session, now closed, waits for it to have closed to say how its
#: server ended (the SDK's wait for an ended process, then the server's last stderr lines: FINISH_WAIT).
ENDING_WAIT = 5.0

#: Reads a provider's upstream as recorded now (``mcp_upstreams``): the gateway's, for :meth:`UpstreamSessions.call`.
Recorded = Callable[[], Awaitable[Upstream]]


def _refused_session(upstream: Upstream, exc: Exception) -> bool:
    """Whether ``exc`` is an HTTP upstream's refusal of the session (:data:`_REFUSED_SESSION`): the call never ran,
    so it is safe to make it again on a new session."""
    error = getattr(exc, "error", None)
    code, message = getattr(error, "code", None), str(getattr(error, "message", "")).strip().lower()
    codes, messages = _REFUSED_SESSION
    return upstream.transport == "http" and code in codes and message in messages


def _answered(exc: Exception) -> bool:
    """Whether ``exc`` is an error the server answered to this call (the SDK's ``MCPError``/``McpError``, with a
    JSON-RPC code), on a connection that is still fine."""
    code = getattr(getattr(exc, "error", None), "code", None)
    return isinstance(code, int) and code not in _SESSION_ERRORS


async def _list_tools(session: Any, upstream: Upstream) -> frozenset[str] | None:
    """List every page of the upstream's tools once per session, and again when it says they changed: the SDK's client
    checks a call's result against the tool's ``outputSchema`` from the listing (mcp 2.x: it lists the first page
    again, with a warning, before every call of a tool it has not seen listed; from protocol 2026-07-28 it also takes
    a tool's header arguments from it). The names listed; None for a server that fails to list (it is still called)."""
    try:
        return frozenset(str(t.get("name")) for t in await list_session_tools(session))
    except Exception as exc:
        logger.debug("upstream %s: tools/list failed: %s", upstream.describe(), type(exc).__name__)
        return None


def _tools_changed(message: Any) -> bool:
    """Whether a server's message (a notification, or an exception the transport hands on) is
    ``notifications/tools/list_changed``."""
    return getattr(message, "method", None) == "notifications/tools/list_changed"


class _Listing:
    """The tools a session's upstream listed last: ``names``, None before a listing succeeded or after one failed (then
    no call is refused). Listings run one at a time (``lock``) and each is numbered by the requests it answers:
    :meth:`ask` numbers a request (the first listing, then one per ``notifications/tools/list_changed``) and
    :meth:`answer` lists unless a listing begun after that request already answered it, so a listing that ends late
    never replaces a newer one and close notifications cost one listing. :meth:`settle` waits for the requests
    numbered so far: a call made while the upstream's tools are listed again is checked against the new listing. A
    listing is bounded by ``timeout``: past it, it is abandoned and its requests are answered with the listing held
    (``abandoned`` until a listing ends in time)."""

    def __init__(self, session: Any, timeout: float = LISTING_TIMEOUT) -> None:
        self.session = session
        self.timeout = timeout
        self.names: frozenset[str] | None = None
        self.asked = 0  # the requests numbered so far
        self.listed = 0  # the newest request that ``names`` answers
        self.abandoned = False  # the last listing was: ``names`` may be older than the upstream's tools
        self.lock = anyio.Lock()
        self._answered = anyio.Event()  # set, and replaced, by every listing that ends

    def ask(self) -> int:
        self.asked += 1
        return self.asked

    async def answer(self, request: int, upstream: Upstream) -> None:
        async with self.lock:
            if self.listed >= request:
                return
            begun = self.asked  # a listing begun now answers every request numbered so far
            names = self.names
            with anyio.move_on_after(self.timeout) as bounded:
                names = await _list_tools(self.session, upstream)
            if bounded.cancelled_caught:
                held = "the tools listed before" if self.names is not None else "no listing: every call is sent"
                logger.warning(
                    "upstream %s: tools/list did not answer within %g s; going on with %s",
                    upstream.describe(),
                    self.timeout,
                    held,
                )
            self.names = names
            self.listed = begun
            self.abandoned = bounded.cancelled_caught
            self._answered.set()
            self._answered = anyio.Event()

    async def settle(self, bound: float) -> bool:
        """Wait, ``bound`` seconds at most, until every request numbered so far is answered; whether they are."""
        wanted = self.asked
        with anyio.move_on_after(bound):
            while self.listed < wanted:
                await self._answered.wait()
        return self.listed >= wanted

    def refuses(self, name: str) -> bool:
        return self.names is not None and name not in self.names


def _ended(session: Any) -> bool:
    """Whether the session's connection has already ended (mcp 2.x: its dispatcher read the end of the stream), read
    from the SDK's private state (:func:`~._mcp_client.sdk_private`: a release without it a McpSyncError naming it)."""
    why = "tell a session whose connection ended"
    return sdk_private(sdk_private(session, "_dispatcher", why), "_closed", why) is True


class UpstreamSessions:
    """``async with UpstreamSessions() as sessions: await sessions.call(upstream, name, arguments)``. A call made while
    the upstream's tools are listed again waits for that listing, ``listing_wait`` seconds at most, then goes on with
    the listing held; a listing that takes over ``listing_timeout`` seconds is abandoned, the listing held kept."""

    def __init__(self, listing_wait: float = LISTING_WAIT, listing_timeout: float = LISTING_TIMEOUT) -> None:
        self.listing_wait = listing_wait
        self.listing_timeout = listing_timeout
        self._held: dict[str, tuple[Any, anyio.Event]] = {}
        self._listings: dict[str, _Listing] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._providers: dict[str, str] = {}  # the upstream key each provider's calls were last made on
        self._calls: dict[int, int] = {}  # the calls in flight on each session, by id()
        self._retired: dict[int, anyio.Event] = {}  # sessions to stop once their calls in flight end, by id()
        self._endings: dict[int, Ending] = {}  # how each open session's stdio server ends, by id()
        self._group: TaskGroup | None = None

    async def __aenter__(self) -> UpstreamSessions:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._group is not None
        for stop in [*(stop for _, stop in self._held.values()), *self._retired.values()]:
            stop.set()
        self._group.cancel_scope.cancel()
        result = await self._group.__aexit__(*exc)
        self._group = None
        return result

    async def call(
        self,
        upstream: Upstream,
        name: str,
        arguments: dict[str, Any],
        *,
        provider: str = "",
        recorded: Recorded | None = None,
    ) -> Any:
        """``tools/call`` on the upstream's session (opened if needed); a refusal names it by ``provider``, never by how
        it is reached (the gateway's client, the model, reads it). A failure closes the session (the next call
        reconnects), except an error the server answered (:func:`_answered`); a session whose connection has already
        ended is replaced before the request is sent (:func:`_ended`), and a request that an HTTP server refused because
        it no longer knows the session (it restarted: :func:`_refused_session`) is retried once on a fresh session,
        never one that may have run on the server. Once a session to another upstream of ``provider`` serves (its values
        were rotated), the old one is closed when its calls in flight end; a call whose ``upstream`` is not the one the
        provider's calls went to last reads it again first (``recorded``: :meth:`_serving`), so a call that read the
        record just before a rotation another call has served goes to the new upstream, never back to the old. The
        caller bounds the time."""
        for attempt in (1, 2):
            upstream, session = await self._serving(upstream, provider, recorded)
            key = upstream.key()
            self._calls[id(session)] = self._calls.get(id(session), 0) + 1  # no await since the session was handed out
            try:
                listing = self._listings.get(key)
                if listing is not None and listing.session is session:
                    settled = await listing.settle(self.listing_wait)
                    if listing.refuses(name) and settled:  # the listing held may be stale: list once more
                        await listing.answer(listing.ask(), upstream)
                    if listing.refuses(name):
                        pending = "" if settled else f"; listing them again took over {self.listing_wait:g} s"
                        who = f"upstream {provider!r}" if provider else "the upstream"
                        raise McpSyncError(
                            f"{who} no longer offers tool {name!r}: its tools/list does not name "
                            f"it (its tools changed since the catalog was synced{pending}). Sync it again to update "
                            "the catalog (toolstore sync mcp --prune)"
                        )
                return await session.call_tool(name, arguments)
            except McpSyncError:
                raise
            except Exception as exc:
                refused = _refused_session(upstream, exc)
                if not refused and not _answered(exc):
                    await self._dropped(key, session, exc)
                elif refused:
                    self._drop(key, session)
                if not refused or attempt == 2:
                    raise
                logger.debug("upstream %s no longer knows the session; reconnecting", upstream.describe())
            finally:
                self._ended_call(session)
        raise AssertionError("unreachable")

    async def _serving(self, upstream: Upstream, provider: str, recorded: Recorded | None) -> tuple[Upstream, Any]:
        """The session for a call of ``provider``'s on ``upstream`` (opened if needed, again if it has ended), noted as
        the one the provider's calls go to now (:meth:`_serves`), and the upstream it reaches. When the provider's calls
        went to another upstream last, either a sync recorded new values since this call read them, or this call read
        the record just before one that another call has served: the record is read again (``recorded``) before a
        session is opened, and again when another upstream served the provider while it opened, :data:`REREADS` times
        at most; a session it got and went on from is retired then (:meth:`_retire`), unless a provider's calls go
        there. The checks and the note are made with no await between them."""
        rereads, left = 0, set[str]()  # left: the upstreams this call got a session to and went on from, by key
        while True:
            before, key = self._providers.get(provider) if provider else None, upstream.key()
            if before not in (None, key) and recorded is not None and rereads < REREADS:
                upstream, rereads = await recorded(), rereads + 1
                before, key = self._providers.get(provider), upstream.key()
            session = await self._session(key, upstream)
            if _ended(session):  # mcp 2.x: a request sent now fails with "Connection closed", never reaching a server
                logger.debug("upstream session %s has ended; reconnecting", upstream.describe())
                self._drop(key, session)
                session = await self._session(key, upstream)
            now = self._providers.get(provider) if provider else None
            if now in (before, key) or recorded is None or rereads >= REREADS:
                self._serves(provider, key)
                for abandoned in left - {key}:  # opened for this call, perhaps, while another served a newer record
                    if self._retire(abandoned):
                        logger.debug("provider %r: closing a session to values it no longer has", provider)
                return upstream, session
            left.add(key)

    def _serves(self, provider: str, key: str) -> None:
        """Note that ``provider``'s calls go to the upstream ``key`` now: the session to the one they went to before
        (its values were rotated since) is retired (:meth:`_retire`)."""
        if not provider:
            return
        before, self._providers[provider] = self._providers.get(provider), key
        if before is not None and before != key and self._retire(before):
            logger.debug("provider %r: its upstream's values changed; closing the session to the old ones", provider)

    def _retire(self, key: str) -> bool:
        """Close the session to the upstream ``key`` once its calls in flight end, unless a provider's calls go there
        (another provider's, or this one's again); whether it is retired."""
        held = self._held.get(key)
        if held is None or key in self._providers.values():
            return False
        del self._held[key]
        self._listings.pop(key, None)
        session, stop = held
        if self._calls.get(id(session), 0):
            self._retired[id(session)] = stop  # stopped when its last call in flight ends
        else:
            stop.set()
        return True

    def _ended_call(self, session: Any) -> None:
        """One call on ``session`` ended: a retired session with none left in flight is stopped."""
        left = self._calls.get(id(session), 0) - 1
        if left > 0:
            self._calls[id(session)] = left
            return
        self._calls.pop(id(session), None)
        stop = self._retired.pop(id(session), None)
        if stop is not None:
            stop.set()

    async def listed(self, upstream: Upstream) -> frozenset[str] | None:
        """The tools the open session to ``upstream`` listed last, once the messages it has already received are read
        (:data:`PENDING_TURNS`: a notifications/tools/list_changed numbers a listing) and a listing under way ends (as
        for a call), listed once more when the last listing was abandoned; None without an open session (none is
        opened) or after a listing that failed."""
        listing = self._listings.get(upstream.key())
        if listing is None:
            return None
        for _ in range(PENDING_TURNS):  # cheap: no request, and only for a tool the catalog lacks
            await anyio.sleep(0)
        if await listing.settle(self.listing_wait) and listing.abandoned:  # a tool added since may be missing
            await listing.answer(listing.ask(), upstream)
        return listing.names

    async def _session(self, key: str, upstream: Upstream) -> Any:
        if self._group is None:
            raise RuntimeError("UpstreamSessions is not open: use `async with`")
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._held:
                self._held[key] = await self._group.start(self._hold, key, upstream)
            return self._held[key][0]

    async def _dropped(self, key: str, session: Any, exc: Exception) -> None:
        """Drop the session a call failed on; when its connection ended (its stdio server exited, most likely), note
        on ``exc`` how its server ended (:func:`~._mcp_client.note_ended`), told once the session has closed
        (:data:`ENDING_WAIT` at most): the SDK says only "Connection closed"."""
        ending = self._endings.get(id(session))
        self._drop(key, session)
        if ending is not None and (_ended(session) or isinstance(exc, anyio.ClosedResourceError)):
            note_ended(exc, await ending.told(ENDING_WAIT))

    def _drop(self, key: str, session: Any) -> None:
        held = self._held.get(key)
        if held is not None and held[0] is session:
            del self._held[key]
            self._listings.pop(key, None)
            held[1].set()

    async def _relist(self, listing: _Listing, request: int, upstream: Upstream) -> None:
        """After the upstream said its tools changed: list them again (the SDK's client learns the new ones' schemas,
        and a call of one it no longer lists gets a clear error instead of going out)."""
        logger.debug("upstream %s: its tools changed; listing them again", upstream.describe())
        await listing.answer(request, upstream)

    async def _hold(self, key: str, upstream: Upstream, *, task_status: TaskStatus[Any]) -> None:
        """Open the session, hand it out and keep it until stopped; a failure after that ends this session only."""
        session = None
        listing: _Listing | None = None
        ending = Ending() if upstream.transport == "stdio" else None  # an HTTP upstream's end says nothing more

        async def on_message(message: Any) -> None:  # on the session's reader: the listing runs in a task of its own
            if _tools_changed(message) and listing is not None and self._group is not None:
                self._group.start_soon(self._relist, listing, listing.ask(), upstream)

        try:
            async with open_session(upstream, on_message, ending) as (session, _):
                if ending is not None:
                    self._endings[id(session)] = ending
                listing = self._listings[key] = _Listing(session, self.listing_timeout)
                await listing.answer(listing.ask(), upstream)
                stop = anyio.Event()
                task_status.started((session, stop))
                await stop.wait()
        except Exception as exc:
            if session is None:
                raise  # before started(): the caller of start() gets it
            logger.debug("upstream session %s ended: %s", upstream.describe(), type(exc).__name__)
        finally:
            self._drop(key, session)
            self._endings.pop(id(session), None)
