"""What route() computes, without I/O: the validated request and its conversation, the route statement's
parameters, and the :class:`RouteResult` its rows become (packing included).

A driver (``ToolStore.route``) does the talking: it takes the catalog's row from its :class:`CatalogCache` (reading
it on first use), resolves the tool calls the messages name (:func:`with_calls`), embeds the request (and the
earlier turns, for ``context``) when :func:`vector_plan` says so, runs ``sql/route.sql`` with
:func:`statement_params` and hands the rows to :func:`route_result`: one round trip once the row is cached (two when
the messages carry tool calls). The statement checks the cached row's version first; when the catalog changed since,
the cache says to read the row again and retry, at most ``ROUTE_ATTEMPTS`` tries in all (``_catalog_cache``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from difflib import get_close_matches
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ._abstain import AbstainModel, evidence_depth, stored_abstain
from ._connect import VectorArray
from ._embedders.base import Embedder
from ._errors import InvalidInputError, InvalidTypeError, redact
from ._explore import check_explore
from ._filters import filter_params, filter_values
from ._formats import FORMATS, Format
from ._fusion import (
    CONTEXT_DECAY,
    CONTEXT_MIX,
    CONTEXT_TURNS,
    DEFAULT_TURNS,
    EXAMPLES_PER_CANDIDATE,
    NEIGHBOURS_PER_TOOL,
    RECENT_CALLS,
    RECENT_DECAY,
    TRANSITION_CALLS,
    TRANSITION_SMOOTHING,
    Fusion,
    check_fusion,
    override,
    stored_fusion,
)
from ._input import MAX_ID_CHARS, MAX_K, MAX_TOKEN_BUDGET, MAX_TURNS, check_session, check_text, flag, single
from ._messages import Conversation, ToolCall, check_dialect, read_messages
from ._models import CatalogInfo
from ._names import call_label
from ._request import RouteCall, RouteRequest
from ._rerank import Reranker, check_reranker
from ._split import split_request
from ._text import check_query, query_identifiers, query_text

#: A part's lexical field is ranked by ``bm25_top()`` (migration 0017: the same rows, without summing a common term's
#: postings for every tool) when one of its terms has at least HEAVY_POSTINGS postings in the field, and at least
#: HEAVY_SHARE of the part's postings there; elsewhere the statement's own sum is faster (bench/PROFILE.md: forced on
#: every field at 10k tools, the statement took 12.1 against 10.1 ms). At 100k tools 10,000 and 0.3 take about 5% of
#: the statement's CPU off 20,000 and 0.4, the same rows (bench/PROFILE.md, "The 100k statement by backend CPU").
HEAVY_POSTINGS = 10_000
HEAVY_SHARE = 0.3


def read_conversation(messages: object, turns: int | None = None, dialect: str | None = None) -> Conversation | None:
    """``messages`` read in ``dialect`` (None: ``auto``, told apart), their last ``turns`` turns (None:
    :data:`DEFAULT_TURNS`); None without messages. ``turns`` or ``dialect`` given without messages is an
    InvalidInputError: they say how to read messages, and would be ignored."""
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_TURNS):
        raise InvalidInputError(f"turns must be an integer from 1 to {MAX_TURNS}, got {turns!r}")
    if dialect is not None:
        check_dialect(dialect)
    if messages is None:
        given = [f"{name}={value!r}" for name, value in (("turns", turns), ("dialect", dialect)) if value is not None]
        if given:
            raise InvalidInputError(f"{' and '.join(given)} given without messages: they say how messages are read")
        return None
    return read_messages(messages, dialect or "auto", turns=DEFAULT_TURNS if turns is None else turns)


def conversation(
    query: str | None, conv: Conversation | None, session: str | None
) -> tuple[str, tuple[str, ...], tuple[ToolCall, ...]]:
    """The request, the earlier turns' text and the calls to look back on, from route()'s query and the messages read
    (:func:`read_conversation`).

    Without ``query`` the request is the latest user turn of the messages; with one, the messages' turns are all
    earlier ones (a latest turn equal to ``query`` is the request itself). With a session the calls come from its log,
    so the messages' are not looked back on.
    """
    if conv is None:
        if query is None:
            raise InvalidInputError("route() needs a query string or messages")
        return query, (), ()
    texts = [t.request for t in conv.turns]
    if query is None:
        if conv.request is None:
            raise InvalidInputError("no user message with text in messages: nothing to route")
        query, texts = conv.request, texts[:-1]
    elif texts and texts[-1] == query:
        texts = texts[:-1]
    return query, tuple(texts), () if session is not None else tuple(conv.tool_calls)


def route_request(
    query: str,
    fusion: Fusion,
    *,
    k: int = 8,
    token_budget: int | None = None,
    allow: Sequence[str] | None = None,
    block: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    session: str | None = None,
    earlier: Sequence[str] = (),
    call_names: Sequence[str] = (),
    call_namespaces: Sequence[str | None] = (),
    explore: bool = False,
    seed: int | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int | None = None,
    abstain: AbstainModel | None = None,
    providers: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    fmt: Format = "openai",
    sub_requests: bool = True,
) -> RouteRequest:
    """Validate one call's arguments (see ``ToolStore.route``); InvalidInputError names the bad one. Its sub-requests
    unless ``fusion.split`` is 0 (``sub_requests=False``: none, left to :func:`bind_route`)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    if token_budget is not None and (
        isinstance(token_budget, bool) or not isinstance(token_budget, int) or not 0 <= token_budget <= MAX_TOKEN_BUDGET
    ):
        raise InvalidInputError(
            f"token_budget must be None or an integer from 0 to {MAX_TOKEN_BUDGET:,}, got {token_budget!r}"
        )
    if fmt not in FORMATS:
        raise InvalidInputError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r:.80}")
    check_query(query)  # before any embedding work
    for i, text in enumerate(earlier):
        check_query(text, f"earlier turn #{i + 1}")
    fusion = check_fusion(fusion)
    depth = check_reranker(reranker, rerank_depth)
    names, spaces = check_calls(call_names, call_namespaces)
    return RouteRequest(
        query=query,
        fusion=fusion,
        k=k,
        token_budget=token_budget,
        allow=filter_values("allow", allow),
        block=filter_values("block", block),
        categories=filter_values("categories", categories),
        session=None if session is None else check_session(session),
        earlier=tuple(earlier),
        call_names=names,
        call_namespaces=spaces,
        parts=split_request(query) if sub_requests and fusion.split > 0 else (),
        seed=check_explore(explore, seed),
        reranker=reranker,
        rerank_depth=depth,
        abstain=abstain,
        providers=filter_values("providers", providers),
        tags=filter_values("tags", tags),
        fmt=fmt,
    )


def check_calls(
    names: Sequence[str], namespaces: Sequence[str | None] = ()
) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """The names of the tool calls a model made and, one per name, the Responses namespace each was made in (None:
    none; no namespaces: none was), checked; InvalidInputError names the bad one."""
    if single(names):  # a str: one call per character
        raise InvalidTypeError(f"expected a list of call names, got {names!r:.200}")
    names = tuple(check_text(n, "tool call name", max_chars=MAX_ID_CHARS) for n in names)
    if single(namespaces):
        raise InvalidTypeError(f"expected a list of call namespaces (one per call name), got {namespaces!r:.200}")
    spaces = tuple(None if s is None else check_text(s, "call namespace", max_chars=MAX_ID_CHARS) for s in namespaces)
    if spaces and len(spaces) != len(names):
        raise InvalidInputError(f"expected one call namespace (or None) per call name: {len(spaces)} for {len(names)}")
    return names, spaces or (None,) * len(names)


def with_calls(request: RouteRequest, ids: Sequence[str | None]) -> RouteRequest:
    """``request`` with its calls resolved (``ids`` aligned with ``call_names``; None: matched no tool, listed in
    ``unresolved`` by ``_names.call_label``)."""
    found = tuple(i for i in ids if i is not None)
    labels = [call_label(n, s) for n, s in zip(request.call_names, request.call_namespaces)]
    missing = tuple(dict.fromkeys(n for n, i in zip(labels, ids) if i is None))
    return replace(request, calls=found, unresolved=missing)


def check_route(
    query: str | None = None,
    *,
    messages: object = None,
    session: str | None = None,
    turns: int | None = None,
    dialect: str | None = None,
    k: int = 8,
    token_budget: int | None = None,
    weights: Mapping[str, float] | None = None,
    k_rrf: float | None = None,
    overfetch: int | None = None,
    split: float | None = None,
    avoid: float | None = None,
    allow: Sequence[str] | None = None,
    block: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    explore: bool = False,
    seed: int | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int | None = None,
    abstain: bool = False,
    providers: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    fmt: Format = "openai",
) -> RouteCall:
    """Every check of route()'s arguments, without the database (InvalidInputError names the bad one): the messages
    read once, the request with its conversation, validated with the fusion overrides on the default fusion."""
    flag(abstain, "abstain")
    given: dict[str, Any] = dict(weights=weights, k_rrf=k_rrf, overfetch=overfetch, split=split, avoid=avoid)
    overrides = {name: value for name, value in given.items() if value is not None}  # RouteCall: only those given
    conv = read_conversation(messages, turns, dialect)
    text, earlier, calls = conversation(query, conv, session)
    request = route_request(
        text,
        override(stored_fusion({}), **overrides),
        k=k,
        token_budget=token_budget,
        allow=allow,
        block=block,
        categories=categories,
        session=session,
        earlier=earlier,
        call_names=[c.name for c in calls],
        call_namespaces=[c.namespace for c in calls],
        explore=explore,
        seed=seed,
        reranker=reranker,
        rerank_depth=rerank_depth,
        providers=providers,
        tags=tags,
        fmt=fmt,
        sub_requests=False,  # the catalog's fusion says whether to split: bind_route
    )
    return RouteCall(request, overrides, abstain, conv)


#: The options route() takes besides its query: what a caller passing route()'s options on (``route_messages``, the
#: langgraph retrievers) may be given.
ROUTE_OPTIONS = tuple(name for name in inspect.signature(check_route).parameters if name != "query")


P = ParamSpec("P")
R = TypeVar("R")


def route_method(check: Callable[P, RouteCall]) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """A store's ``route(self, query=None, **options)`` given the parameters of ``check`` (:func:`check_route`), the
    one place they are written: type checkers and IDEs read them through ``P``; ``help()`` and ``inspect.signature``
    from ``__signature__`` and ``__annotations__`` (``check``'s after ``self``; the method's docstring and return
    annotation its own)."""
    params = list(inspect.signature(check).parameters.values())

    def decorate(method: Callable[..., R]) -> Callable[Concatenate[Any, P], R]:
        own = inspect.signature(method)
        method.__signature__ = own.replace(parameters=[own.parameters["self"], *params])  # type: ignore[attr-defined]
        method.__annotations__ = {**{p.name: p.annotation for p in params}, "return": own.return_annotation}
        return method

    return decorate


def check_options(caller: str, options: Mapping[str, object]) -> None:
    """A TypeError, as Python's own for ``caller``, when ``options`` hold a name route() does not take (a misspelt
    ``token_buget``), so that the error names the function the user called, not :func:`check_route`."""
    for name in options:
        if name not in ROUTE_OPTIONS:
            close = get_close_matches(name, ROUTE_OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (route() options: {', '.join(ROUTE_OPTIONS)})"
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}{hint}")


def bind_route(call: RouteCall, info: CatalogInfo, embedder: Embedder | None) -> tuple[RouteRequest, str | None]:
    """What each try does before talking to the database: the checked call with the catalog's fusion under its
    overrides and the sub-requests when it splits (``_split.split_request``), with ``abstain`` the catalog's
    abstention model (calibrated by ``tune``, else the shipped default), and :func:`vector_plan`'s answer (None: embed
    the query)."""
    fusion = check_fusion(override(stored_fusion(info.settings), **call.overrides))
    model = stored_abstain(info.settings, info.embed_model if embedder else None) if call.abstain else None
    parts = split_request(call.request.query) if fusion.split > 0 else ()
    request = replace(call.request, fusion=fusion, parts=parts, abstain=model)
    return request, vector_plan(request, info, embedder)


def vector_plan(request: RouteRequest, info: CatalogInfo, embedder: Embedder | None) -> str | None:
    """None when the query must be embedded; else why dense and intent retrieval are off for this call
    (an empty string when no weight asks for them). Raises ModelMismatchError for the wrong model."""
    weights = request.fusion.weights
    if weights["dense"] == 0 and weights["intent"] == 0 and not context_texts(request):
        return ""
    if embedder is None:
        return "no embedder configured: lexical retrieval only"
    if info.embed_model is None:
        return f"catalog {info.name!r} has no embeddings yet: lexical retrieval only"
    info.require_model(embedder.model)
    return None


def embedder_failed(exc: Exception) -> str:
    """The degraded reason when the embedder raised at route time (provider down, timeout, bad response), credentials
    redacted (a client's error may quote its key or a URL with a token)."""
    return redact(f"embedder failed ({type(exc).__name__}: {exc}): lexical retrieval only")


def context_texts(request: RouteRequest) -> tuple[str, ...]:
    """The earlier turns mixed into the ``context`` vector (none when context is weighted 0)."""
    if request.fusion.weights["context"] == 0:
        return ()
    return request.earlier[-CONTEXT_TURNS:]


def context_vector(qvec: np.ndarray, earlier: Sequence[np.ndarray]) -> np.ndarray | None:
    """The ``context`` signal's query vector: normalize(q + CONTEXT_MIX * sum_j CONTEXT_DECAY ** j * e_j), over the
    earlier turns' vectors oldest first (j = 0 is the last one), each made unit length; None without any."""
    if not len(earlier):
        return None
    unit = lambda v: np.asarray(v, dtype=np.float64) / max(float(np.linalg.norm(v)), 1e-12)  # noqa: E731
    mixed = unit(qvec)
    for j, vector in enumerate(reversed(earlier)):
        mixed = mixed + CONTEXT_MIX * CONTEXT_DECAY**j * unit(vector)
    return unit(mixed).astype(np.float32)


def statement_params(
    info: CatalogInfo,
    request: RouteRequest,
    qvec: np.ndarray | None,
    cvec: np.ndarray | None = None,
    part_vecs: Sequence[np.ndarray] = (),
) -> dict[str, Any]:
    """The bound parameters of the ``route`` statement (their meaning is listed at the top of sql/route.sql);
    ``part_vecs``: the sub-requests' vectors, aligned with ``request.parts`` (none: BM25 alone for them)."""
    fusion = request.fusion
    n = fusion.depth(request.k)
    w = fusion.weights
    filters = filter_params(request)
    return {
        "catalog": info.id,
        "version": info.version,
        "dim": info.embed_dim,
        "part_texts": [query_text(text) for text in (request.query, *request.parts)],
        "part_vecs": VectorArray([qvec, *part_vecs]) if qvec is not None else None,
        "w_split": fusion.split if request.parts else 0.0,
        "identifiers": query_identifiers(request.query),
        "n": n,
        "n_examples": n * EXAMPLES_PER_CANDIDATE,
        "per_tool": NEIGHBOURS_PER_TOOL,
        "heavy_postings": HEAVY_POSTINGS,
        "heavy_share": HEAVY_SHARE,
        "k_rrf": fusion.k_rrf,
        "w_name": w["name"],
        "w_description": w["description"],
        "w_expansion": w["expansion"],
        "w_dense": w["dense"] if qvec is not None else 0.0,
        "w_intent": w["intent"] if qvec is not None else 0.0,
        "session": request.session,
        "calls": list(request.calls),
        "history": max(RECENT_CALLS, TRANSITION_CALLS),
        "recent_calls": RECENT_CALLS,
        "recent_decay": RECENT_DECAY,
        "transition_calls": TRANSITION_CALLS,
        "smoothing": TRANSITION_SMOOTHING,
        "cvec": cvec,
        "w_recent": w["recent"],
        "w_transition": w["transition"],
        "w_context": w["context"] if cvec is not None else 0.0,
        **filters,
        "request": request.query,
        "w_avoid": fusion.avoid,
        "abstain": request.abstain is not None,
        "evidence_depth": evidence_depth(fusion.overfetch),
        # Without a budget only the top k can be packed; with one, skipped tools leave room for later ones (the
        # retrievers' depth n, or k when an over-fetch under k makes that smaller). Exploration draws from ranks
        # k+1..2k; a reranker reorders the top k * rerank_depth. (Abstention's evidence comes in its own column.)
        "limit": max(
            request.k,
            n if request.token_budget is not None else 0,
            2 * request.k if request.seed is not None else 0,
            request.k * request.rerank_depth if request.reranker is not None else 0,
        ),
    }
