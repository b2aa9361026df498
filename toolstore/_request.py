"""route()'s arguments, checked (``_route.check_route`` makes them): :class:`RouteRequest`, the validated request, and
:class:`RouteCall`, which a store's ``route_checked`` takes (exported: the hook of a subclass that wraps routing).

Annotations here are evaluated (see ``_models``).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._abstain import AbstainModel
from ._formats import Format
from ._fusion import Fusion
from ._messages import Conversation
from ._rerank import DEFAULT_RERANK_DEPTH, Reranker


@dataclass(frozen=True)
class RouteRequest:
    """One validated route() call. Its conversation: ``session`` (whose logged calls the statement reads), the
    earlier turns' text (oldest first), the names of the tool calls in the messages (oldest first; looked back on
    only without a session) and the Responses namespace each was made in (None: none), and, once resolved
    (``_route.with_calls``), their tool ids and the names that matched none.
    ``parts``: the request's sub-requests (``_split``; none when it is one action or ``fusion.split`` is 0).
    ``abstain``: the model that decides whether any tool fits (None: route without asking). ``fmt``: the format the
    tools are packed for (``RouteResult.definitions``), their tokens counted as the model receives them in it.
    """

    query: str
    fusion: Fusion
    k: int = 8
    token_budget: int | None = None
    allow: list[str] | None = None
    block: list[str] | None = None
    categories: list[str] | None = None
    session: str | None = None
    earlier: tuple[str, ...] = ()
    call_names: tuple[str, ...] = ()
    call_namespaces: tuple[str | None, ...] = ()
    calls: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    #: The exploration slot's seed (``check_explore``: drawn when not given); None: no exploration.
    seed: int | None = None
    reranker: Reranker | None = None
    rerank_depth: int = DEFAULT_RERANK_DEPTH
    abstain: AbstainModel | None = None
    providers: list[str] | None = None
    tags: list[str] | None = None
    fmt: Format = "openai"


@dataclass(frozen=True)
class RouteCall:
    """route()'s arguments, checked once before the database is asked: what every route of a store goes through,
    ``ToolStore.route_checked`` and ``AsyncToolStore.route_checked``, route()'s and ``route_messages``' alike. A
    subclass that wraps routing (tracing, metrics, default options) overrides ``route_checked``, reads the call and
    passes it on (``super().route_checked(call)``); route() makes it, not the caller.

    ``request``: the validated request (``request.query``, the text routed; ``k``, ``token_budget``, ``session``, the
    filters ``allow``, ``block``, ``categories``, ``providers`` and ``tags``, ``fmt``, and ``earlier``, the earlier
    turns' text, and ``call_names``, the tool calls in the messages, oldest first); its type is private and may gain
    fields. ``overrides``: the fusion options route() was given (``weights``, ``k_rrf``, ``overfetch``, ``split``,
    ``avoid``; only those given), put on the catalog's stored fusion at each try. ``abstain``: whether route() was asked
    to abstain when no tool fits. ``conversation``: the messages as read (a :class:`Conversation`, their last ``turns``
    turns), None when none were given.
    """

    request: RouteRequest
    overrides: Mapping[str, Any]
    abstain: bool = False
    conversation: Conversation | None = None
