"""Agent loops: route the next model call's tools from a message list (the conversation as context), record the
calls the model made in the session log, and map the calls back to tools (annotations evaluated, as in ``_models``).
Shared by the SDK adapters in ``toolstore.integrations``; message reading itself is ``_messages``."""

import hashlib
import json
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from ._drive import adrive, drive
from ._errors import InvalidInputError, UnknownToolError
from ._formats import custom_input
from ._messages import Conversation, ToolCall, read_messages
from ._models import SessionCall, Tool
from ._request import RouteCall
from ._result import RouteResult
from ._route import check_options, check_route

if TYPE_CHECKING:
    from ._async_store import AsyncToolStore
    from ._store import ToolStore


#: A call of a store's method that :func:`_messages_steps` asks for, made on the store: the answer from a ToolStore, an
#: awaitable of it from an AsyncToolStore.
StoreCall = Callable[[Any], Any]


@dataclass(frozen=True)
class ResolvedCall:
    """A tool call of the model, resolved: the tool, the name the model used, its arguments and the call id.

    ``arguments`` is the JSON object the model wrote, as a dict; when its text is no JSON object (malformed, cut off)
    it is that text, a str (a custom tool's: always its text)."""

    tool: Tool
    name: str
    arguments: dict[str, Any] | str
    id: str | None


@dataclass(frozen=True)
class UnknownCall:
    """A tool call of the model that no offered tool answers to (a name it made up, or one that more than one offered
    tool may have been given), which ``calls(..., unknown="report")`` returns in its place among the resolved ones: the
    name the model used, its arguments as read (a dict, else the text), the call id, ``error``, the UnknownToolError's
    text naming the call and the names offered (answer the call with it, as an error, so the model can call again),
    and the Responses ``namespace`` it was made in (None: none)."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None
    error: str
    namespace: str | None = None


#: What ``calls(..., unknown=)`` takes: ``"raise"`` an UnknownToolError for a call of a name not offered, before any
#: call is returned (the default), or ``"report"`` it as an :class:`UnknownCall` among the resolved calls.
Unknown = Literal["raise", "report"]
UNKNOWN: tuple[str, ...] = get_args(Unknown)  # the one list of the values


def route_messages(
    store: "ToolStore",
    messages: object,
    *,
    query: str | None = None,
    session: str | None = None,
    offered: RouteResult | None = None,
    dialect: str | None = None,
    turns: int | None = None,
    **options: Any,
) -> RouteResult:
    """The tools for the next model call of a conversation: ``store.route`` of the latest user request of
    ``messages``, with the conversation so far as context (``options``: k, token_budget, ...). ``dialect``: the
    messages' format (``auto``: told apart), for the route and the calls recorded alike. ``query``: the request to
    route instead, the messages then all earlier context, as ``store.route(query, messages=...)`` reads them (a
    Responses loop on ``previous_response_id`` sends only the new items, which hold no user request).

    With a ``session``, first records in its log the tool calls of ``messages`` (of its last ``turns`` turns, all it
    reads) after the last one it has seen (by call id: passing the whole list at every step records each call once,
    even after retention or a prune took the session's calls; a call without an id is not recorded; a tool result
    marked as an error records a failed call), then routes with the session's calls. ``offered``: the
    RouteResult the model was given when it made those calls, which resolves the names of the calls being recorded
    exactly (without a session, route() resolves the names across the catalog); other names are resolved across the
    catalog, and those that match no tool (or several) and are new to the session are listed in
    ``result.unresolved``: the same write (``store.record_new_calls``, under the session's lock) says which calls are
    new (after the last call it has seen; not one seen at an earlier step, under an earlier offer or unresolved then,
    nor one before such a call, even once retention or a prune took it) and remembers them, so a call is reported
    once, by one of two concurrent steps.

    ``store``: a ToolStore. It routes with ``store.route_checked`` (the arguments checked once, before any call is
    recorded), not ``store.route``: a wrapper object has to provide that (and, with a session, ``resolve_calls`` and
    ``record_new_calls``), by delegating to a store; a subclass overriding ``route_checked`` sees every route.
    """
    # route()'s checks, once, first: a bad option is refused before any call is recorded (but for a filter value that
    # matches no tool: only the route statement tells, after the calls are recorded)
    check_options("route_messages", options)
    call = check_route(query, messages=messages, session=session, turns=turns, dialect=dialect, **options)
    return drive(_messages_steps(call, session, offered), lambda ask: ask(store))


async def aroute_messages(
    store: "AsyncToolStore",
    messages: object,
    *,
    query: str | None = None,
    session: str | None = None,
    offered: RouteResult | None = None,
    dialect: str | None = None,
    turns: int | None = None,
    **options: Any,
) -> RouteResult:
    """:func:`route_messages` for an :class:`AsyncToolStore`."""
    check_options("aroute_messages", options)
    call = check_route(query, messages=messages, session=session, turns=turns, dialect=dialect, **options)
    return await adrive(_messages_steps(call, session, offered), lambda ask: ask(store))


def _messages_steps(
    call: RouteCall, session: str | None, offered: RouteResult | None
) -> Generator[StoreCall, Any, RouteResult]:
    """:func:`route_messages` written once for both stores: it yields what it asks of the store, in order, each a
    :data:`StoreCall` the driver makes and sends back the answer of (awaited on an AsyncToolStore): with a session, the
    catalog's answer for the calls not among the offered tools (``resolve_calls``), the calls new to the session logged
    (``record_new_calls``), then the route (``route_checked``)."""
    unresolved: list[str] = []
    if session is not None and (conv := call.conversation) is not None:
        made = logged_calls(conv)
        ids, pending = _offered_ids(made, offered)
        if pending:
            names, spaces = [c.name for _, c in pending], [c.namespace for _, c in pending]
            _fill(ids, pending, (yield lambda store: store.resolve_calls(names, namespaces=spaces)))
        call_ids = [c.id for c in made if c.id]
        if call_ids:  # only those new to the session: it has seen the others (maybe under another offer)
            calls = _session_calls(made, conv.failed, ids)
            new = yield lambda store: store.record_new_calls(session, call_ids, calls)
            unresolved = _unresolved(made, ids, new)
    result = yield lambda store: store.route_checked(call)
    return replace(result, unresolved=unresolved) if unresolved else result


def logged_calls(conv: Conversation) -> list[ToolCall]:
    """The calls of ``conv`` as a session logs them: each under its call id, and one without (Chat Completions' legacy
    ``function_call``) under an id made from its turn, the same at every step that passes the turn again, whole or
    cut to its last turns: the turn's request, the call's name and arguments, and its place among the turn's calls of
    that name and arguments (so a call made twice in a turn is two calls)."""
    turn_of = {id(c): t.request for t in conv.turns for c in t.tool_calls}
    like: dict[str, int] = {}
    made: list[ToolCall] = []
    for call in conv.tool_calls:
        if call.id:
            made.append(call)
            continue
        what = [turn_of.get(id(call)), call.name, call.namespace, call.arguments]
        key = json.dumps(what, sort_keys=True, ensure_ascii=False, default=repr)
        like[key] = place = like.get(key, 0) + 1
        digest = hashlib.sha256(f"{place}\n{key}".encode("utf-8", "surrogatepass")).hexdigest()
        made.append(replace(call, id=f"{LEGACY_CALL_ID}{digest[:32]}"))
    return made


#: How the id a session logs a call without a call id under (see :func:`logged_calls`) begins.
LEGACY_CALL_ID = "function_call:"


def _offered(offered: RouteResult | None, call: ToolCall) -> str | None:
    if offered is None:
        return None
    try:
        return offered.resolve(call.name, namespace=call.namespace).id
    except UnknownToolError:
        return None


def _offered_ids(
    made: Sequence[ToolCall], offered: RouteResult | None
) -> tuple[list[str | None], list[tuple[int, ToolCall]]]:
    """The tool id of each call ``made`` among the offered tools (None: not there, or no call id), and the calls with
    a call id left to resolve across the catalog, with their positions (filled in by :func:`_fill`)."""
    ids = [_offered(offered, c) if c.id else None for c in made]
    return ids, [(i, c) for i, c in enumerate(made) if c.id and ids[i] is None]


def _fill(ids: list[str | None], pending: Sequence[tuple[int, ToolCall]], found: Sequence[str | None]) -> None:
    """Put the catalog's answers for the ``pending`` calls (``found``, in their order) in their places in ``ids``."""
    for (i, _), tool_id in zip(pending, found, strict=True):
        ids[i] = tool_id


def _unresolved(made: Sequence[ToolCall], ids: Sequence[str | None], new: Collection[str]) -> list[str]:
    """The names of the calls new to the session (their call ids: ``new``) that resolved to no tool."""
    fresh = set(new)
    return list(dict.fromkeys(c.qualified_name for c, i in zip(made, ids) if i is None and c.id in fresh))


def _session_calls(made: Sequence[ToolCall], failed: Collection[str], ids: Sequence[str | None]) -> list[SessionCall]:
    return [SessionCall(i, ok=c.id not in failed, call_id=c.id) for c, i in zip(made, ids) if i is not None]


def check_unknown(unknown: object) -> bool:
    """Whether ``calls(..., unknown=)`` reports a call of a name not offered (``"report"``) rather than raising
    (``"raise"``); InvalidInputError for another value."""
    if unknown not in UNKNOWN:
        raise InvalidInputError(f"unknown= takes 'raise' or 'report', got {unknown!r:.80}")
    return unknown == "report"


def resolve_calls(
    result: RouteResult,
    items: Sequence[object],
    *,
    dialect: str = "auto",
    resolve: Callable[[str], Tool] | None = None,
    report: bool = False,
) -> list[ResolvedCall | UnknownCall]:
    """Every tool call in ``items`` (the model's reply as messages or output items), in order, resolved against the
    tools ``result`` offered (``resolve``: name -> tool, default ``result.resolve``; a call inside a Responses namespace
    among the offered tools of that provider). A name that was not offered is an UnknownToolError, raised before any
    call is returned, or with ``report`` an :class:`UnknownCall` in its place holding the error's text. A custom
    tool's arguments are its text in every format (``_formats.custom_input``)."""
    calls = read_messages(list(items), dialect).tool_calls
    return [_resolved(result, c, resolve, report) for c in calls]


def _resolved(
    result: RouteResult, call: ToolCall, resolve: Callable[[str], Tool] | None, report: bool
) -> ResolvedCall | UnknownCall:
    """One call resolved; a custom tool's text input (Anthropic: its one property) as the text, whatever the format."""
    try:
        if resolve is None or call.namespace is not None:
            tool = result.resolve(call.name, namespace=call.namespace)
        else:
            tool = resolve(call.name)
    except UnknownToolError as e:
        if not report:
            raise
        return UnknownCall(call.name, call.arguments, call.id, str(e), call.namespace)
    return ResolvedCall(tool, call.name, custom_input(tool, call.arguments), call.id)
