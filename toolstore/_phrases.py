"""The phrases of a tool's expansion (``_expand`` writes them): offline ones drawn from its definition, a chat
model's (the prompt, one call per tool through the ``openai`` SDK, its reply parsed and filtered), and the expansion
text they make with the record of what it came from (``x-toolstore-expansion`` in the tool's ``spec``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ._embedders.openai_client import base_url_in_use, describe
from ._errors import ExpansionError, redact
from ._input import MAX_DOC_CHARS, parse_json
from ._models import Tool
from ._rows import EXPANSION_RECORD, expansion_sha
from ._text import split_identifier

PROMPT_VERSION = 1
DEFAULT_MODEL = "gpt-4o-mini"
MAX_LLM_PHRASES = 24
MAX_INTENT_PHRASES = 20
MAX_PHRASE_CHARS = 300
#: The longest expansion written: phrases past it are left out (a tool's examples and keywords may number 1,000 each).
#: A quarter of the indexed field's cap, which the split identifiers appended to it (at most 3.5x) keep it under.
MAX_EXPANSION_CHARS = MAX_DOC_CHARS // 4
SYSTEM_PROMPT = (
    "You help a search engine find the right software tool from what a user types. "
    "Reply with a JSON array of strings and nothing else."
)
USER_PROMPT = """Tool: {name} (id {id})
Description: {description}
Parameters: {parameters}

Write up to 20 short phrases (3 to 12 words each) a user might type when they need this tool: everyday \
requests, synonyms of its key terms, and related tasks it handles. No numbering, no explanations."""


# -- records --------------------------------------------------------------------------------------------


def source_hash(tool: Tool) -> str:
    """The content hash of everything an expansion is generated from: the tool without expansion and record."""
    spec = {k: v for k, v in (tool.spec or {}).items() if k != EXPANSION_RECORD} or None
    return replace(tool, expansion="", spec=spec).content_hash()


def with_expansion(
    tool: Tool, llm: Sequence[str], offline: Sequence[str], *, source: str | None, model: str | None
) -> Tool:
    """The tool with its expansion (LLM phrases, then offline phrases, as many as :data:`MAX_EXPANSION_CHARS` holds)
    and the record of what it came from."""
    kept: list[str] = []
    size = -1
    for phrase in dedupe([*llm, *offline]):
        size += len(phrase) + 1
        if size > MAX_EXPANSION_CHARS:
            break
        kept.append(phrase)
    text = "\n".join(kept)
    record = {"v": PROMPT_VERSION, "source": source, "model": model, "llm": list(llm), "sha": expansion_sha(text)}
    spec = {**(tool.spec or {}), EXPANSION_RECORD: record}
    return replace(tool, expansion=text, spec=spec)


# -- phrases --------------------------------------------------------------------------------------------


def dedupe(phrases: Iterable[str]) -> list[str]:
    """Whitespace-collapsed, non-empty phrases, first occurrence of each (case-insensitive) kept."""
    seen: set[str] = set()
    out = []
    for phrase in phrases:
        clean = " ".join(phrase.replace("\x00", " ").split())[:MAX_PHRASE_CHARS]
        if clean and clean.lower() not in seen:
            seen.add(clean.lower())
            out.append(clean)
    return out


def _properties(schema: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(name, description) of every property of a JSON schema, nested objects and arrays included."""
    if not isinstance(schema, dict) or depth > 4:
        return
    props = schema.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            desc = sub.get("description") if isinstance(sub, dict) else None
            yield str(name), desc if isinstance(desc, str) else ""
            yield from _properties(sub, depth + 1)
    yield from _properties(schema.get("items"), depth + 1)


def offline_phrases(tool: Tool, intents: Sequence[str] = ()) -> list[str]:
    """Phrases derived without a model; never empty (the split name is always there)."""
    phrases = [split_identifier(tool.name).lower() or tool.name]
    if tool.title:
        phrases.append(tool.title)
    phrases += tool.keywords
    for name, description in _properties(tool.parameters):
        phrases += [split_identifier(name).lower(), description]
    phrases += tool.examples
    phrases += list(intents)[:MAX_INTENT_PHRASES]
    return dedupe(phrases)


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\d+[.)]|\(\d+\))\s*")
_PREAMBLE = re.compile(
    r"^(here are|here is|sure|certainly|of course|as an ai|i cannot|i can't|i'm sorry|sorry)\b", re.I
)


def _acceptable(phrase: str) -> bool:
    words = phrase.split()
    return (
        3 <= len(phrase) <= 150
        and 1 <= len(words) <= 20
        and any(c.isalpha() for c in phrase)
        and not phrase.endswith(":")
        and not _PREAMBLE.match(phrase)
        and "http://" not in phrase
        and "https://" not in phrase
        and not any(ord(c) < 32 for c in phrase)
        and "{" not in phrase
    )


def parse_phrases(reply: str) -> list[str]:
    """Phrases from a model reply: a JSON array (or an object holding one), else one phrase per line.

    Bullets, numbering and quotes are stripped; preambles, over-long lines, URLs and duplicates are rejected.
    """
    text = _FENCE.sub("", (reply or "").strip())
    items: list[Any] | None = None
    for candidate in (text, text[text.find("[") : text.rfind("]") + 1]):
        try:
            data = parse_json(candidate, allow_nan=True)
        except ValueError:  # no JSON, or nested deeper than a list of phrases is: read as lines
            continue
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if isinstance(data, list):
            items = data
            break
    if items is None:
        items = [_BULLET.sub("", line) for line in text.splitlines()]
    phrases = [str(i).strip().strip("\"'`").rstrip(",").strip().strip("\"'") for i in items if isinstance(i, str)]
    return dedupe(p for p in phrases if _acceptable(p))[:MAX_LLM_PHRASES]


def _parameter_summary(tool: Tool) -> str:
    parts = [f"{name} ({desc})" if desc else name for name, desc in _properties(tool.parameters)]
    return ", ".join(parts)[:1500] or "none"


def llm_phrases(client: Any, model: str, tool: Tool) -> list[str]:
    """Ask the model once for the tool's phrases; an unusable reply gives an empty list."""
    prompt = USER_PROMPT.format(
        name=tool.name,
        id=tool.id,
        description=(tool.description or "(none)")[:2000],
        parameters=_parameter_summary(tool),
    )
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    try:
        reply = client.chat.completions.create(model=model, messages=messages, temperature=0.2)
    except Exception as exc:
        raise ExpansionError(redact(f"expansion of {tool.id!r} failed: {describe(exc)}")) from exc
    content = reply.choices[0].message.content if reply.choices else None
    return parse_phrases(content or "")


def make_client(
    *, base_url: str | None = None, api_key: str | None = None, timeout: float = 60.0, max_retries: int = 3
) -> Any:
    """An ``openai.OpenAI`` client; a custom ``base_url`` (a local server) works without a key."""
    import openai  # imported on use: it takes a while and offline runs never need it

    server = base_url_in_use(base_url, "base_url")  # $OPENAI_BASE_URL's too
    key = api_key or os.environ.get("OPENAI_API_KEY") or ("unused" if base_url else None)
    if key is None:
        raise ExpansionError(
            "set OPENAI_API_KEY (or pass --base-url for a local OpenAI-compatible server), or use --offline"
        )
    return openai.OpenAI(api_key=key, base_url=server, timeout=timeout, max_retries=max_retries)
