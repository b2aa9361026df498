"""The text toolstore indexes: identifier splitting and the three lexical fields of a tool."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._input import MAX_QUERY_CHARS, check_text
from ._models import Tool

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_\.\-/:]+")
_IDENTIFIER = re.compile(r"\b\w*(?:[a-z][A-Z]|[_\.\-/:]\w)[\w\.\-/:]*")


def split_identifier(name: str) -> str:
    """``createPullRequest`` -> ``create Pull Request``; ``github.create_issue`` -> ``github create issue``."""
    spaced = _SEPARATORS.sub(" ", name)
    return " ".join(_CAMEL.sub(" ", spaced).split())


def with_split_identifiers(text: str) -> str:
    """``text`` followed by the split form of every identifier-looking word in it.

    Both forms are indexed, so an exact identifier (``createpullrequest``) and its words
    (``create``, ``pull``, ``request``) both match.
    """
    extra = [split_identifier(m.group(0)) for m in _IDENTIFIER.finditer(text)]
    return text if not extra else text + " " + " ".join(extra)


def _schema_text(schema: Any, depth: int = 0) -> Iterator[str]:
    """Parameter names (split), descriptions and enum values of a JSON schema, recursively."""
    if not isinstance(schema, dict) or depth > 6:
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            yield f"{name} {split_identifier(str(name))}"
            if isinstance(sub, dict):
                for key in ("title", "description"):
                    if isinstance(sub.get(key), str):
                        yield sub[key]
                enum = sub.get("enum")
                if isinstance(enum, list):
                    yield " ".join(str(v) for v in enum if isinstance(v, (str, int, float)))
                yield from _schema_text(sub, depth + 1)
    for key in ("items", "additionalProperties"):
        yield from _schema_text(schema.get(key), depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                yield from _schema_text(option, depth + 1)


def name_doc(tool: Tool) -> str:
    """Name field: id and name with their split forms, title, provider, keywords."""
    parts = [tool.name, split_identifier(tool.name)]
    if tool.id != tool.name:
        parts += [tool.id, split_identifier(tool.id)]
    if tool.title:
        parts.append(tool.title)
    if tool.provider:
        parts += [tool.provider, split_identifier(tool.provider)]
    parts += list(tool.keywords)
    return "\n".join(p for p in parts if p)


def description_doc(tool: Tool) -> str:
    """Description field: description, parameter names and descriptions, examples, categories and tags."""
    parts = [tool.description, *_schema_text(tool.parameters), *tool.examples, *tool.categories, *tool.tags]
    return with_split_identifiers("\n".join(p for p in parts if p))


def expansion_doc(tool: Tool) -> str:
    """Expansion field: user-language phrases."""
    return with_split_identifiers(tool.expansion)


def _parameters_line(schema: Any) -> str:
    """``Parameters: city (the city to look up); units`` from a JSON schema's top-level properties."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return ""
    items = []
    for name, sub in properties.items():
        description = sub.get("description") if isinstance(sub, dict) else None
        described = description.strip() if isinstance(description, str) else ""
        items.append(split_identifier(str(name)) + (f" ({described})" if described else ""))
    return "Parameters: " + "; ".join(items)


def dense_text(tool: Tool) -> str:
    """The text embedded for a tool's dense vector: what it does first, then where it belongs and what it takes.

    ``title or split name: description``, then ``Category: ...``, ``Parameters: name (description); ...`` and the
    expansion, one per line. Categories and parameters raised zero-shot dense nDCG@10 through route() on seal_tools
    (.626 -> .656) and gorilla_torch (.242 -> .274) and left metatool (no parameters) unchanged (docs/QUALITY.md).
    """
    head = tool.title or split_identifier(tool.name)
    categories = f"Category: {', '.join(tool.categories)}" if tool.categories else ""
    parts = [f"{head}: {tool.description}".strip(), categories, _parameters_line(tool.parameters), tool.expansion]
    return "\n".join(p for p in parts if p)


def query_identifiers(query: str) -> list[str]:
    """Lower-cased identifier-looking tokens of a query (``send_email``, ``github.create_issue``, ``getUser``).

    Plain words are left out so that a request mentioning "search" does not pin a tool named ``search``.
    """
    found = {m.group(0).strip(".-/:").lower() for m in _IDENTIFIER.finditer(query)}
    return sorted(t for t in found if t)[:64]


#: Short forms people type in requests and their words, which tool documents spell out: a request's lexical text
#: gets the words too (never the tool documents, so every catalog, imported before or after, gains the same). Each is
#: a word of its own in a request; a plural is the form with an ``s``. A word typed closed that tools hyphenate is one
#: too (``oncall``: PostgreSQL reads "on-call" as ``on-cal`` and ``call``, never ``oncal``), and so is a file people
#: name that no tool does (``readme``, stemmed ``readm``, which "read" is not: a repository's file).
SHORT_FORMS: dict[str, str] = {
    "dm": "direct message",
    "pr": "pull request",
    "gh": "github",
    "repo": "repository",
    "msg": "message",
    "db": "database",
    "mtg": "meeting",
    "appt": "appointment",
    "cal": "calendar",
    "ack": "acknowledge",
    "fwd": "forward",
    "info": "information",
    "config": "configuration",
    "env": "environment",
    "img": "image",
    "pic": "picture",
    "acct": "account",
    "addr": "address",
    "txn": "transaction",
    "qty": "quantity",
    "k8s": "kubernetes",
    "doc": "document",
    "oncall": "on-call",
    "readme": "repository file",
}
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
#: A request that starts with one of these names the thing to make ("new jira ticket"): its lexical text gets
#: ``create``, the verb tools that make things are named and described with.
_MAKE_WORDS = {"new"}


def with_short_forms(text: str) -> str:
    """``text`` followed by the words of its short forms (:data:`SHORT_FORMS`, plurals too) and ``create`` when it
    starts with ``new``: ``slack dm alice`` -> ``slack dm alice direct message``."""
    words = _WORD.findall(text.lower())
    extra = []
    for word in dict.fromkeys(words):
        full = SHORT_FORMS.get(word) or (SHORT_FORMS.get(word[:-1]) if word.endswith("s") else None)
        if full:
            extra.append(full)
    if words and words[0] in _MAKE_WORDS:
        extra.append("create")
    return text if not extra else text + " " + " ".join(extra)


def check_query(query: object, what: str = "query") -> str:
    """``query`` when it is a routing query route() takes (``what`` names it in errors): where it is only checked, not
    routed yet, since :func:`query_text`'s preparing costs more than the check (about 35 against 0.2 us a request)."""
    return check_text(query, what, max_chars=MAX_QUERY_CHARS)


def query_text(query: str, what: str = "query") -> str:
    """Validate a routing query (``what`` names it in errors) and prepare it for lexical matching: identifiers split,
    short forms spelled out (:func:`with_short_forms`)."""
    return with_short_forms(with_split_identifiers(check_query(query, what)))
