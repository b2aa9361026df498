"""Model-facing tool names, the one rule: unique, valid for every provider, deterministic, namespaced only when needed.

Every provider accepts ``^[a-zA-Z0-9_-]{1,64}$`` as a function name (Anthropic rejects duplicates, OpenAI rejects
dots). A tool is offered under its own name when that name is valid and no other offered tool has it; colliding
tools get ``provider__name`` (``linear__create_issue``); a name that still collides, or is too long, gets a short
hash of the tool id. Latin letters lose their diacritics first (:func:`fold`: ``café`` is offered as ``cafe``,
``Straße`` as ``Strasse``); what is left of other characters becomes ``_``, and a name or part with nothing left is
:data:`FALLBACK`. The same set of tools always gets the same names: a request's tools (``tool_list``, which both
``RouteResult.definitions`` and ``export_catalog`` give) are named by :func:`offered_names`, and ``toolstore._names``
maps a name a model called back to its tool.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from .._models import Tool
from .build import namespace_record

MAX_LENGTH = 64
VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SEPARATOR = "__"
_INVALID = re.compile(r"[^a-zA-Z0-9_-]+")


#: The name a text with no valid character at all is offered under.
FALLBACK = "tool"

#: Latin letters that Unicode's NFKD does not decompose, each as the ASCII letters it is written as without its stroke
#: or ligature. ``call_key()`` (migration 0029) folds the same ones: keep the two equal.
FOLDED = {
    "ß": "ss",
    "ẞ": "SS",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "đ": "d",
    "Đ": "D",
    "ð": "d",
    "Ð": "D",
    "ł": "l",
    "Ł": "L",
    "þ": "th",
    "Þ": "TH",
    "ı": "i",
    "ħ": "h",
    "Ħ": "H",
}
_FOLD = str.maketrans(FOLDED)


def fold(text: str) -> str:
    """``text`` with its Latin letters as ASCII ones: Unicode NFKD (``é`` as ``e`` and a combining accent, ``ﬁ`` as
    ``fi``, a full-width ``Ａ`` as ``A``), then :data:`FOLDED`, then without combining marks. ASCII text is unchanged;
    letters of other scripts stay as they are (no valid character: :func:`_clean` makes them ``_``)."""
    if text.isascii():
        return text
    folded = unicodedata.normalize("NFKD", text).translate(_FOLD)
    return "".join(c for c in folded if not unicodedata.category(c).startswith("M"))


def _clean(text: str) -> str:
    return _INVALID.sub("_", fold(text)).strip("_") or FALLBACK


def _fit(text: str, tool_id: str) -> str:
    """``text`` when it fits 64 characters, else its head and a hash of the tool id (still unique per tool)."""
    if len(text) <= MAX_LENGTH:
        return text
    return f"{text[: MAX_LENGTH - 9]}_{_digest(tool_id)}"


def _digest(tool_id: str) -> str:
    return hashlib.sha256(tool_id.encode()).hexdigest()[:8]


def plain_name(tool: Tool) -> str:
    """The tool's own name, made valid (:func:`fold`, other invalid characters as ``_``, at most 64 characters)."""
    return _fit(_clean(tool.name), tool.id)


def qualified_name(tool: Tool) -> str:
    """``provider__name`` (the id's dots as ``__`` without a provider), made valid (:data:`FALLBACK` for an id of no
    valid character)."""
    base = f"{tool.provider}{SEPARATOR}{tool.name}" if tool.provider else tool.id.replace(".", SEPARATOR)
    return _fit(SEPARATOR.join(_clean(part) for part in base.split(SEPARATOR) if part) or FALLBACK, tool.id)


def hashed_name(tool: Tool) -> str:
    """The qualified name with a hash of the tool id: unique even for two tools of one provider and name."""
    suffix = f"_{_digest(tool.id)}"
    return _clean(qualified_name(tool))[: MAX_LENGTH - len(suffix)] + suffix


def name_forms(tool: Tool) -> tuple[str, str, str]:
    """Every name the tool may be offered under, from the plainest."""
    return plain_name(tool), qualified_name(tool), hashed_name(tool)


def model_names(tools: Sequence[Tool]) -> list[str]:
    """One valid, unique name per tool, in order; a tool keeps its plain name unless another tool shares it."""
    plain = [plain_name(t) for t in tools]
    counts = Counter(plain)
    names = [p if counts[p] == 1 else qualified_name(t) for p, t in zip(plain, tools)]
    counts = Counter(names)
    names = [n if counts[n] == 1 else hashed_name(t) for n, t in zip(names, tools)]
    taken = Counter(names)
    if len(taken) != len(names):  # a plain name equal to another tool's qualified one: hash both
        names = [n if taken[n] == 1 else hashed_name(t) for n, t in zip(names, tools)]
    return names


def namespaced_names(tools: Sequence[Tool]) -> list[str]:
    """:func:`model_names` for the Responses format, where a tool imported from a namespace is offered inside it
    again (``_formats.tool_list``) and called by the pair (namespace, name): such a tool is named among the tools of
    its namespace only, so keeps its own name unless one of them has it too; the others are named as there."""
    names = model_names(tools)
    groups: dict[str, list[int]] = {}
    for i, tool in enumerate(tools):
        record = namespace_record(tool)
        if record is not None:
            groups.setdefault(record["name"], []).append(i)
    for members in groups.values():
        for i, name in zip(members, model_names([tools[i] for i in members])):
            names[i] = name
    return names


def offered_names(tools: Sequence[Tool], fmt: str) -> list[str]:
    """The name each of ``tools`` has in a request's tools in ``fmt`` (``_formats.tool_list``, as
    ``RouteResult.definitions`` gives them): :func:`namespaced_names` in the Responses format, else
    :func:`model_names`."""
    return namespaced_names(tools) if fmt == "openai-responses" else model_names(tools)


def offered_namespace(tool: Tool, fmt: str) -> str | None:
    """The Responses namespace ``tool``'s definition sits in, in a request's tools in ``fmt``: the one it was imported
    from, in the Responses format; None: at the top level (always, in the other formats)."""
    record = namespace_record(tool) if fmt == "openai-responses" else None
    return None if record is None else str(record["name"])
