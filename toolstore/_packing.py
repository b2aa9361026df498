"""Client-side packing: always-on tools first, then candidates in rank order, greedy first-fit under a budget, each
counted as the model receives it in the format the caller asked for (``route(fmt=...)``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._formats import Format, render
from ._formats.build import namespace_record
from ._formats.names import name_forms
from ._models import Tool
from ._result import RoutedTool
from ._tokens import count_tokens, definition_tokens

__all__ = ["Prompt", "count_tokens", "definition_tokens", "namespace_tokens", "pack", "tool_tokens"]


def tool_tokens(tool: Tool, fmt: Format = "openai") -> int:
    """Token cost of a tool: its definition in ``fmt``, under the longest name it may be offered under
    (``RouteResult.definitions`` namespaces names that collide), so packed definitions fit the budget. In the Responses
    format a tool imported from a namespace comes inside it: one more for its separator in the namespace's ``tools``
    (the namespace itself: :func:`namespace_tokens`, once per namespace)."""
    [definition] = render([tool], fmt, names=[max(name_forms(tool), key=len)])
    inside = fmt == "openai-responses" and namespace_record(tool) is not None
    return definition_tokens(definition) + (1 if inside else 0)


def namespace_tokens(tool: Tool, fmt: Format) -> tuple[str, int] | None:
    """The Responses namespace ``tool`` comes inside in ``fmt`` (``_formats.tool_list``) and the tokens of the namespace
    without its tools (its name, description and keys); None: the tool comes alone."""
    record = namespace_record(tool) if fmt == "openai-responses" else None
    return None if record is None else (record["name"], definition_tokens({**record, "tools": []}))


class Prompt:
    """The tokens of the definitions packed so far in ``fmt``: each tool's own (``RoutedTool.tokens``) and, the first
    time one of its tools is packed, a Responses namespace's (:func:`namespace_tokens`: the first tool's record, the
    one ``_formats.tool_list`` writes)."""

    def __init__(self, fmt: Format, packed: Iterable[RoutedTool] = ()) -> None:
        self.fmt = fmt
        self.used = 0
        self._opened: set[str] = set()
        for candidate in packed:
            self.add(candidate)

    def _opens(self, tool: Tool) -> tuple[str, int] | None:
        """The namespace packing ``tool`` opens, with its tokens; None: none (no namespace, or one already open)."""
        record = namespace_record(tool) if self.fmt == "openai-responses" else None
        return None if record is None or record["name"] in self._opened else namespace_tokens(tool, self.fmt)

    def cost(self, candidate: RoutedTool) -> int:
        """What packing ``candidate`` next adds to :attr:`used`."""
        opens = self._opens(candidate.tool)
        return candidate.tokens + (0 if opens is None else opens[1])

    def add(self, candidate: RoutedTool) -> None:
        opens = self._opens(candidate.tool)
        self.used += candidate.tokens + (0 if opens is None else opens[1])
        if opens is not None:
            self._opened.add(opens[0])

    def fits(self, candidate: RoutedTool, token_budget: int | None) -> bool:
        return token_budget is None or self.used + self.cost(candidate) <= token_budget


def pack(
    candidates: Sequence[RoutedTool], *, k: int, token_budget: int | None, fmt: Format = "openai"
) -> tuple[list[RoutedTool], list[RoutedTool], int]:
    """Choose what goes in the prompt: (packed, skipped, tokens used in ``fmt``).

    Always-on tools come first (they do not count towards ``k``), then the other candidates in the
    order given. A tool that does not fit the remaining budget (with its Responses namespace, the first time one of
    that namespace's tools is packed: :class:`Prompt`) is skipped and packing continues with the next one, until ``k``
    routed tools are packed.
    """
    packed: list[RoutedTool] = []
    skipped: list[RoutedTool] = []
    prompt = Prompt(fmt)
    routed = 0
    ordered = [c for c in candidates if c.always_on] + [c for c in candidates if not c.always_on]
    for candidate in ordered:
        if not candidate.always_on and routed >= k:
            break
        if not prompt.fits(candidate, token_budget):
            skipped.append(candidate)
            continue
        packed.append(candidate)
        prompt.add(candidate)
        routed += 0 if candidate.always_on else 1
    return packed, skipped, prompt.used
