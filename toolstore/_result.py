"""What route() returns: the routed tools with their rank in every signal, packed, and what was left out.

Annotations here are evaluated (see ``_models``).
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._abstain import Abstention
from ._explain import explain_result
from ._formats import Format, http_endpoint, tool_list
from ._formats.names import offered_names, offered_namespace
from ._fusion import SIGNALS
from ._models import Tool
from ._names import resolve_call
from ._observe import logger
from ._tokens import definition_tokens


@dataclass(frozen=True)
class Signals:
    """1-based rank of a tool in each retriever's list (see ``SIGNALS``), None where it did not return it."""

    name: int | None = None
    description: int | None = None
    expansion: int | None = None
    dense: int | None = None
    intent: int | None = None
    recent: int | None = None
    transition: int | None = None
    context: int | None = None


@dataclass(frozen=True)
class RoutedTool:
    """One routed tool: the tool, its fused RRF score and its rank in every signal.

    ``exact`` is True when the request names the tool's id or name verbatim; such tools rank first.
    ``tokens`` is the tool's cost in the prompt (its definition in ``RouteResult.fmt``; a Responses namespace it comes
    inside is counted once, in ``RouteResult.tokens_used``). For a compound request, ``part`` is the
    sub-request (1-based, in ``RouteResult.sub_requests``) where the tool's fused score was highest, ``part_score``
    that score (``split`` times it is added to ``score``); None for a request that was not split.
    ``adjustments["anchor_boost"]``: the boosts of the catalog's anchors whose pattern matched the request
    (``anchors``: their ids); ``adjustments["avoid_penalty"]``: what the request's overlap with the tool's avoid-when
    text took off it (negative); ``score`` is after both.
    """

    tool: Tool
    score: float
    signals: Signals
    always_on: bool = False
    exact: bool = False
    tokens: int = 0
    part: int | None = None
    part_score: float | None = None
    #: Packed in the exploration slot (``route(explore=True)``): drawn from the ranks k+1..2k.
    explored: bool = False
    #: 1-based rank among the routed candidates in the statement's (fused) order, before any reranking.
    fused_rank: int | None = None
    #: 1-based rank after the reranker (None: not reranked), and the reranker's score.
    rerank_rank: int | None = None
    rerank_score: float | None = None
    #: Signed deltas the statement added to the fused RRF sum after fusion (``part_boost``: split x ``part_score``,
    #: ``anchor_boost``, ``avoid_penalty``).
    adjustments: Mapping[str, float] = field(default_factory=dict)
    #: The ids of the catalog's anchors whose pattern matched the request (their boosts: ``anchor_boost`` in
    #: ``adjustments``).
    anchors: tuple[int, ...] = ()


@dataclass(frozen=True)
class RouteResult:
    """What ``ToolStore.route`` returns: packed tools in order, and what was left out.

    ``session``: the session whose calls were looked back on; ``unresolved``: names of tool calls in the messages
    that matched no tool of the catalog (or more than one), so they were not looked back on; ``sub_requests``: the
    clauses of a compound request, each retrieved on its own (empty when the request was not split).
    ``abstained``: route(abstain=True) found no tool that fits, so ``tools`` holds only the always-on ones;
    ``abstention``: the evidence it decided on (None when not asked).
    """

    query: str
    tools: list[RoutedTool]
    skipped: list[RoutedTool] = field(default_factory=list)
    token_budget: int | None = None
    tokens_used: int = 0
    dense_used: bool = True
    degraded_reason: str | None = None
    session: str | None = None
    unresolved: list[str] = field(default_factory=list)
    #: The fusion the statement ran: ``weights`` (as used: dense, intent and context are 0 when not embedded),
    #: ``k_rrf``, ``split`` (as used: 0 when the request was not split), ``overfetch`` (tools per retriever) and
    #: ``limit`` (fused rows fetched).
    fusion: Mapping[str, Any] = field(default_factory=dict)
    #: The filters applied (only those given), by name.
    filters: Mapping[str, Any] = field(default_factory=dict)
    #: Milliseconds per stage (``embed``, ``statement``, ``rerank``, ``pack``) and ``total``.
    timings: Mapping[str, float] = field(default_factory=dict)
    #: ``route(explore=True)``: the draw's ``seed``, the ``ranks`` drawn from, how many were ``eligible``, the
    #: ``explored`` tool's id (None: none fitted) and its ``explored_rank``; None without exploration.
    exploration: Mapping[str, Any] | None = None
    #: ``route(reranker=...)``: ``depth``, the ``candidates`` sent and whether their new order was ``applied``
    #: (False: the reranker raised, see ``degraded_reason``); None without a reranker.
    rerank: Mapping[str, Any] | None = None
    #: The clauses of a compound request, each retrieved on its own (empty when the request was not split).
    sub_requests: list[str] = field(default_factory=list)
    #: route(abstain=True) found no tool that fits (``tools`` holds only the always-on ones), and the evidence it
    #: decided on (None when not asked).
    abstained: bool = False
    abstention: Abstention | None = None
    #: The format the tools were packed for (``route(fmt=...)``): :meth:`definitions` gives it by default, and
    #: ``tokens_used`` counts its definitions as the model receives them.
    fmt: Format = "openai"

    def __iter__(self) -> Iterator[RoutedTool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def ids(self) -> list[str]:
        return [r.tool.id for r in self.tools]

    @property
    def names(self) -> list[str]:
        """The name each packed tool has in :meth:`definitions` (in :attr:`fmt`), the one a model calls it by: its own,
        or ``provider__name`` when two tools share it. In the Responses format a tool imported from a namespace sits
        inside it, named among that namespace's tools (its own name unless one of them has it too), and a call of it
        carries the pair: its namespace (:attr:`namespaces`) and this name, as the function call's ``namespace`` and
        ``name``. Unique only with :attr:`namespaces`: two namespaces may both hold a ``search``."""
        return offered_names([r.tool for r in self.tools], self.fmt)

    @property
    def namespaces(self) -> list[str | None]:
        """The Responses namespace each packed tool sits in within :meth:`definitions` (in :attr:`fmt`), which a call
        of it names beside :attr:`names`; None for a tool at the top level, as every tool is in the other formats."""
        return [offered_namespace(r.tool, self.fmt) for r in self.tools]

    def definitions(self, fmt: Format | None = None) -> list[dict[str, Any]]:
        """The packed tools as definitions for an SDK call: ``openai``, ``openai-responses``, ``anthropic``, ``mcp``
        (None: :attr:`fmt`, the format they were packed for). In another format they are the same tools (what
        :attr:`names`, :attr:`namespaces` and :meth:`resolve` answer for; :attr:`names` and :attr:`namespaces` are
        those of :attr:`fmt`), not packed again: their definitions there may pass :attr:`token_budget`, which a warning
        on the ``toolstore`` logger then says, with their tokens (route with ``fmt`` set to the format you send).

        Names are unique and valid for every provider (see :attr:`names`); :meth:`resolve` maps a call back. In the
        Responses format the tools imported from a namespace come inside it, as ``export_catalog`` gives them (where
        its first routed tool is, with its description; only its routed tools), each named among the namespace's
        routed tools (``_formats.names.namespaced_names``: its own name unless one of them has it too), for the model
        to call by the pair (namespace, name).
        """
        fmt = self.fmt if fmt is None else fmt
        tools = [r.tool for r in self.tools]
        definitions = tool_list(tools, fmt)
        if fmt != self.fmt and self.token_budget is not None:
            _warn_past_budget(definitions, fmt, self.fmt, self.token_budget)
        return definitions

    def explain(self) -> dict[str, Any]:
        """Why each tool is here, as JSON-ready data: per tool its ranks, each signal's RRF contribution and the
        flags; per request the fusion, filters, stage timings and degradation (see ``_explain``)."""
        return explain_result(self)

    def resolve(self, name: str, *, namespace: str | None = None) -> Tool:
        """The tool a model called by ``name`` (a name from :meth:`definitions`), or by its own name inside the
        Responses ``namespace`` the call names (``_names.call_namespace``); UnknownToolError otherwise."""
        return resolve_call(name, namespace, [r.tool for r in self.tools], offered=True)


def routed_json(r: RoutedTool) -> dict[str, Any]:
    """One routed (or skipped) tool as JSON documents give it: ``toolstore route --json``'s ``tools`` and
    ``skipped``, and the MCP server's ``find_tools``' ``skipped``."""
    return {
        "id": r.tool.id,
        "name": r.tool.name,
        "provider": r.tool.provider,
        "score": round(r.score, 6),
        "always_on": r.always_on,
        "exact": r.exact,
        "tokens": r.tokens,
        "explored": r.explored,
        "signals": {s: getattr(r.signals, s) for s in SIGNALS},
        **({"part": r.part} if r.part is not None else {}),
        **({"http": http} if (http := http_endpoint(r.tool)) else {}),
    }


def _warn_past_budget(definitions: list[dict[str, Any]], fmt: Format, packed_for: Format, budget: int) -> None:
    """Warn when ``definitions`` in ``fmt`` pass the token ``budget`` of a route packed for another format."""
    tokens = sum(definition_tokens(d) for d in definitions)
    if tokens > budget:
        logger.warning(
            "definitions(%r) of a route packed for %r: %d tokens, over its token budget of %d (the budget counted "
            "them in %r; route with fmt=%r to pack them for it)",
            *(fmt, packed_for, tokens, budget, packed_for, fmt),
        )
