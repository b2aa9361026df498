"""Resolving model-facing tool names back to tools (the names themselves, one rule: ``_formats.names``).

:func:`resolve_name` maps a name a model called back to its tool: among the offered tools (``RouteResult.resolve``),
or across a catalog in a later turn (``ToolStore.resolve``), where any of a tool's name forms is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from ._errors import UnknownToolError
from ._formats.build import namespace_record
from ._formats.names import FALLBACK, SEPARATOR, model_names, name_forms, plain_name
from ._models import Tool

#: The name forms a call is matched on across a catalog, besides the id, in the order :func:`resolve_name` tries them
#: (a form that one tool has wins over the next): the model-facing forms, then the plain and the raw name.
_CATALOG_FORMS: tuple[Callable[[Tool], Sequence[str]], ...] = (
    lambda t: name_forms(t)[1:],
    lambda t: (plain_name(t), t.name),
)


def resolve_name(name: str, tools: Sequence[Tool], *, offered: bool) -> Tool:
    """The tool a model's call ``name`` means.

    ``offered``: ``tools`` are exactly the tools the model was given (names from :func:`model_names`), or, a name
    none was given under, their own names (``café``, offered as ``cafe``); otherwise they are a catalog's candidates,
    and any name form, the id or the raw name, matched unambiguously, is accepted. Raises UnknownToolError when no
    tool (or more than one) matches.
    """
    if offered:
        given = [{n} for n in model_names(tools)]
        if isinstance(name, str) and not any(name in n for n in given) and any(t.name == name for t in tools):
            given = [{t.name} for t in tools]  # a name none was given under: their own names
        return resolve_given(name, tools, given)
    if not isinstance(name, str) or not name:
        raise UnknownToolError(f"tool name must be a non-empty string, got {name!r:.80}")
    by_id = [t for t in tools if t.id == name]
    if by_id:
        return by_id[0]
    for form in _CATALOG_FORMS:
        found = {t.id: t for t in tools if name in form(t)}
        if len(found) == 1:
            return next(iter(found.values()))
        if len(found) > 1:
            ids = ", ".join(sorted(found))
            raise UnknownToolError(f"tool name {name!r:.80} is ambiguous ({ids}); pass the ids that were offered")
    raise UnknownToolError(f"no tool named {name!r:.80}")


def call_namespace(tool: Tool) -> str | None:
    """The Responses namespace a model calls ``tool`` in: the one it was imported from, which a Responses export puts
    it in again (``_formats.build.namespace_record``), even when it names its own provider; else its provider."""
    record = namespace_record(tool)
    return tool.provider if record is None else str(record["name"])


def call_label(name: str, namespace: str | None) -> str:
    """How a call is named where one string must say it (``unresolved``): ``namespace__name`` inside a namespace."""
    return name if namespace is None else f"{namespace}{SEPARATOR}{name}"


def in_namespace(tools: Sequence[Tool], namespace: str) -> list[Tool]:
    """The ``tools`` a call made inside the Responses ``namespace`` may mean: those in it (:func:`call_namespace`)."""
    return [t for t in tools if call_namespace(t) == namespace]


def resolve_call(name: str, namespace: str | None, tools: Sequence[Tool], *, offered: bool) -> Tool:
    """:func:`resolve_name` of a call that may have been made inside a Responses ``namespace``: only ``tools`` in that
    namespace (:func:`call_namespace`) answer, to any of their names (the namespace gave each its own name)."""
    if namespace is None:
        return resolve_name(name, tools, offered=offered)
    members = in_namespace(tools, namespace)
    if not members:
        which = "offered tool" if offered else "tool"
        raise UnknownToolError(f"no {which} is in namespace {namespace!r:.80} (called: {name!r:.80})")
    return resolve_name(name, members, offered=False)


def resolve_given(
    name: str,
    tools: Sequence[Tool],
    given: Sequence[Collection[str]],
    *,
    hint: str = "",
    shown: Sequence[str] | None = None,
) -> Tool:
    """The one tool of ``tools`` a model may have been given under ``name`` (``given[i]``: the names ``tools[i]`` may
    have been given under). UnknownToolError when none was, or when more than one may have been: an ambiguous name is
    never guessed (``hint`` is added to that error). The error for a name none was given under lists ``shown``, the
    names the model was shown (default: every name in ``given``)."""
    if not isinstance(name, str) or not name:
        raise UnknownToolError(f"tool name must be a non-empty string, got {name!r:.80}")
    found = [t for t, names in zip(tools, given) if name in names]
    if len(found) > 1:
        ids = ", ".join(t.id for t in found)
        raise UnknownToolError(f"tool name {name!r:.80} may mean any of {ids}{hint}")
    if not found:
        offered = sorted({n for names in given for n in names} if shown is None else set(shown))
        raise UnknownToolError(f"no offered tool is named {name!r:.80} (offered: {', '.join(offered)})")
    return found[0]


def resolve_among(name: str, tools: Sequence[Tool], ids: Sequence[str]) -> Tool:
    """:func:`resolve_name` among the tools a model was offered, given their ids in the order offered."""
    by_id = {t.id: t for t in tools}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise UnknownToolError(f"offered tool(s) no longer in the catalog: {', '.join(map(repr, missing[:5]))}")
    return resolve_name(name, [by_id[i] for i in ids], offered=True)


_HASH_SUFFIX = re.compile(r"_[0-9a-f]{8}$")


def may_be_hashed(name: str) -> bool:
    """Whether ``name`` may be a name form cut to :data:`~._formats.names.MAX_LENGTH` with a hash, which only a tool's
    whole name list can resolve (``call_candidates`` cannot find it)."""
    return _HASH_SUFFIX.search(name) is not None


def call_keys(names: Sequence[str]) -> list[str]:
    """What ``call_candidates`` looks the tools a model called ``names`` up by (``call_key()`` of a tool's name or id,
    migrations 0020 and 0029, folded as ``_formats.names.fold`` folds, against ``call_key()`` of these): each name,
    and each part of it after a ``__`` (the part after a provider), each also without a hash suffix, and each of those
    also without its :data:`FALLBACK` parts (what a name or id part with no valid character is offered as:
    ``call_key()`` keeps nothing of such a part)."""
    keys: set[str] = set()
    for name in names:
        parts = name.split(SEPARATOR)
        for start in range(len(parts)):
            part = SEPARATOR.join(parts[start:])
            if part:
                for key in (part, _HASH_SUFFIX.sub("", part)):
                    keys.update((key, SEPARATOR.join(p for p in key.split(SEPARATOR) if p != FALLBACK)))
    return sorted(keys)


def _tiers(members: Sequence[Tool]) -> list[dict[str, set[str]]]:
    """:func:`resolve_name`'s tiers across a catalog, each a map from a name to the ids of the ``members`` that have
    it: the id, then each of :data:`_CATALOG_FORMS`. Each tool's forms are taken once."""
    tiers: list[dict[str, set[str]]] = [{t.id: {t.id} for t in members}, *({} for _ in _CATALOG_FORMS)]
    for tool in members:
        for tier, form in zip(tiers[1:], _CATALOG_FORMS):
            for name in form(tool):
                tier.setdefault(name, set()).add(tool.id)
    return tiers


def _hits(names: Sequence[str], candidates: Sequence[Tool], namespaces: Sequence[str | None]) -> list[set[str] | None]:
    """Per call (in the namespace ``namespaces[i]`` when given and not None), the ids of the ``candidates`` in the first
    tier that has its name (:func:`resolve_call` across a catalog: one id resolves it, more make it ambiguous), None
    when no tier has it. One index of tiers per namespace: linear in the candidates, not in calls x candidates."""
    index: dict[str | None, list[dict[str, set[str]]]] = {}
    out: list[set[str] | None] = []
    for name, namespace in zip(names, namespaces or [None] * len(names), strict=True):
        if namespace not in index:
            index[namespace] = _tiers(candidates if namespace is None else in_namespace(candidates, namespace))
        valid = isinstance(name, str) and name != ""
        out.append(next((tier[name] for tier in index[namespace] if name in tier), None) if valid else None)
    return out


def unanswered(names: Sequence[str], candidates: Sequence[Tool], namespaces: Sequence[str | None] = ()) -> list[str]:
    """The calls (:func:`call_label`) that no tool of ``candidates`` answers to, in any form :func:`resolve_call`
    accepts across a catalog (in the namespace ``namespaces[i]`` when given and not None): a name that several answer
    to is ambiguous, not unanswered (more tools cannot make it resolve)."""
    spaces = namespaces or [None] * len(names)
    return [call_label(n, s) for n, s, hit in zip(names, spaces, _hits(names, candidates, spaces)) if hit is None]


def resolve_calls(
    names: Sequence[str], candidates: Sequence[Tool], namespaces: Sequence[str | None] = ()
) -> list[str | None]:
    """The tool id each called name means among a catalog's ``candidates`` (:func:`resolve_call` across a catalog, in
    the Responses namespace ``namespaces[i]`` when given and not None), or None for a name that no tool, or more than
    one, answers to."""
    hits = _hits(names, candidates, namespaces)
    return [next(iter(hit)) if hit is not None and len(hit) == 1 else None for hit in hits]
