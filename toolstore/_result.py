"""What route() returns: the routed tools with their rank in every signal, packed, and what was left out.

Annotations here are evaluated (see ``_models``).
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ._formats import Format, render
from ._models import Tool
from ._names import model_names, resolve_name


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
    ``tokens`` is the tool's cost in the prompt (its OpenAI definition). For a compound request, ``part`` is the
    sub-request (1-based, in ``RouteResult.sub_requests``) where the tool's fused score was highest, ``part_score``
    that score (``split`` times it is added to ``score``); None for a request that was not split.
    ``anchor_boost``: the boosts of the catalog's anchors whose pattern matched the request, added to the fused
    score (``anchors``: their ids); ``avoid_penalty``: what the request's overlap with the tool's avoid-when text
    took off it (``score`` is after both).
    """

    tool: Tool
    score: float
    signals: Signals
    always_on: bool = False
    exact: bool = False
    tokens: int = 0
    part: int | None = None
    part_score: float | None = None
    anchor_boost: float = 0.0
    anchors: tuple[int, ...] = ()
    avoid_penalty: float = 0.0


@dataclass(frozen=True)
class RouteResult:
    """What ``ToolStore.route`` returns: packed tools in order, and what was left out.

    ``session``: the session whose calls were looked back on; ``unresolved``: names of tool calls in the messages
    that matched no tool of the catalog (or more than one), so they were not looked back on; ``sub_requests``: the
    clauses of a compound request, each retrieved on its own (empty when the request was not split).
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
    sub_requests: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[RoutedTool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def ids(self) -> list[str]:
        return [r.tool.id for r in self.tools]

    @property
    def names(self) -> list[str]:
        """The model-facing name of each packed tool: its own, or ``provider__name`` when two tools share it."""
        return model_names([r.tool for r in self.tools])

    def definitions(self, fmt: Format = "openai") -> list[dict[str, Any]]:
        """The packed tools as definitions for an SDK call: ``openai``, ``openai-responses``, ``anthropic``, ``mcp``.

        Names are unique and valid for every provider (see :attr:`names`); :meth:`resolve` maps a call back.
        """
        tools = [r.tool for r in self.tools]
        return render(tools, fmt, names=model_names(tools))

    def resolve(self, name: str) -> Tool:
        """The tool a model called by ``name`` (a name from :meth:`definitions`); UnknownToolError otherwise."""
        return resolve_name(name, [r.tool for r in self.tools], offered=True)
