"""The data toolstore stores and returns: tools, intent examples, route results."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Any

SIGNALS = ("name", "description", "expansion", "dense", "intent")


@dataclass(frozen=True)
class Tool:
    """One callable tool, normalised from whatever format it was imported from.

    ``id`` is unique within a catalog; importers namespace it (``provider.name``) so that
    two servers offering a tool of the same ``name`` do not collide.
    """

    id: str
    name: str
    description: str = ""
    title: str | None = None
    provider: str | None = None
    parameters: dict[str, Any] | None = None
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    expansion: str = ""
    avoid_when: str = ""
    always_on: bool = False
    spec: dict[str, Any] | None = None

    def content_hash(self) -> str:
        """sha256 over every field, so an unchanged tool is recognised on re-import."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict() would deep-copy
        payload = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class IntentExample:
    """A labelled user request: ``query`` should route to ``tool_id``."""

    tool_id: str
    query: str


@dataclass(frozen=True)
class Signals:
    """1-based rank of a tool in each retriever's list, None where the retriever did not return it."""

    name: int | None = None
    description: int | None = None
    expansion: int | None = None
    dense: int | None = None
    intent: int | None = None


@dataclass(frozen=True)
class RoutedTool:
    """One routed tool: the tool, its fused RRF score and its rank in every signal.

    ``exact`` is True when the request names the tool's id or name verbatim; such tools rank first.
    """

    tool: Tool
    score: float
    signals: Signals
    always_on: bool = False
    exact: bool = False
    tokens: int = 0


@dataclass(frozen=True)
class RouteResult:
    """What ``ToolStore.route`` returns: packed tools in order, and what was left out."""

    query: str
    tools: list[RoutedTool]
    skipped: list[RoutedTool] = field(default_factory=list)
    token_budget: int | None = None
    tokens_used: int = 0
    dense_used: bool = True
    degraded_reason: str | None = None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def ids(self) -> list[str]:
        return [r.tool.id for r in self.tools]

    def definitions(self, fmt: str = "openai") -> list[dict[str, Any]]:
        """The packed tools as definitions for an SDK call: ``openai``, ``openai-responses``, ``anthropic``, ``mcp``."""
        from ._formats import render

        return render([r.tool for r in self.tools], fmt)  # type: ignore[arg-type]
