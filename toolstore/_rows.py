"""Tool rows in and out of Postgres, and the checks a write makes before touching the database.

Pure functions, shared by every driver: what a tool looks like as a row of ``upsert_tools`` and back, what input is
refused, and the record by which a re-import keeps the expansion ``toolstore expand`` generated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from ._errors import InvalidInputError, InvalidToolError, UnknownCatalogError
from ._models import CatalogInfo, IntentExample, Tool
from ._text import description_doc, expansion_doc, name_doc

#: Where a generated expansion records what it came from, inside the tool's ``spec``.
EXPANSION_RECORD = "x-toolstore-expansion"
MAX_EXAMPLE_CHARS = 2000


def tool_row(tool: Tool, content_hash: str | None = None) -> dict[str, Any]:
    """The JSON row ``upsert_tools`` reads for one tool (``content_hash`` when already computed)."""
    return {
        "id": tool.id,
        "name": tool.name,
        "title": tool.title,
        "provider": tool.provider,
        "description": tool.description,
        "categories": list(tool.categories),
        "tags": list(tool.tags),
        "keywords": list(tool.keywords),
        "examples": list(tool.examples),
        "expansion": tool.expansion,
        "avoid_when": tool.avoid_when,
        "always_on": tool.always_on,
        # JSON text, not objects: the batch travels as jsonb, which would sort these schemas' keys
        "parameters_json": None if tool.parameters is None else json.dumps(tool.parameters, ensure_ascii=False),
        "spec_json": None if tool.spec is None else json.dumps(tool.spec, ensure_ascii=False),
        "content_hash": content_hash or tool.content_hash(),
        "name_doc": name_doc(tool),
        "description_doc": description_doc(tool),
        "expansion_doc": expansion_doc(tool),
    }


def catalog_info(row: Mapping[str, Any] | None, name: str) -> CatalogInfo:
    """The CatalogInfo of a ``get_catalog`` / ``get_catalog_light`` row; UnknownCatalogError when there is none."""
    if row is None:
        raise UnknownCatalogError(f"no catalog named {name!r}; create it by importing tools into it")
    return CatalogInfo(
        id=row["id"],
        name=row["name"],
        embed_model=row["embed_model"],
        embed_dim=row["embed_dim"],
        settings=row["settings"] or {},
        n_tools=row["n_tools"],
        n_examples=row["n_examples"],
    )


def tool_from_row(row: Mapping[str, Any]) -> Tool:
    """The Tool of a row holding the ``tools`` table's columns by name."""
    return Tool(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        title=row["title"],
        provider=row["provider"],
        parameters=row["parameters"],
        categories=tuple(row["categories"]),
        tags=tuple(row["tags"]),
        keywords=tuple(row["keywords"]),
        examples=tuple(row["examples"]),
        expansion=row["expansion"],
        avoid_when=row["avoid_when"],
        always_on=row["always_on"],
        spec=row["spec"],
    )


def name_row(row: Mapping[str, Any]) -> Tool:
    """A ``tool_names`` row as a Tool carrying only what names it (id, name, provider)."""
    return Tool(id=row["id"], name=row["name"], provider=row["provider"])


def check_tools(tools: Sequence[Tool]) -> None:
    """Reject what the database would reject later, naming the tool: duplicates, NUL bytes, bad types."""
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        label = f"tool #{index + 1} ({tool.id!r})" if isinstance(tool, Tool) else f"tool #{index + 1}"
        if not isinstance(tool, Tool):
            raise InvalidToolError(f"{label}: expected a toolstore.Tool, got {type(tool).__name__}")
        if not tool.id or not tool.id.strip():
            raise InvalidToolError(f"{label}: id is empty")
        if not tool.name or not tool.name.strip():
            raise InvalidToolError(f"{label}: name is empty")
        if tool.id in seen:
            raise InvalidToolError(f"{label}: id {tool.id!r} appears twice")
        seen.add(tool.id)
        if tool.parameters is not None and not isinstance(tool.parameters, dict):
            raise InvalidToolError(f"{label}: parameters must be a JSON object or None")
        try:
            json.dumps(tool.parameters)
            json.dumps(tool.spec)
        except (TypeError, ValueError) as exc:
            raise InvalidToolError(f"{label}: not JSON-serialisable: {exc}") from exc
        if has_nul([getattr(tool, f.name) for f in fields(tool)]):
            raise InvalidToolError(f"{label}: contains a NUL byte")


def check_examples(examples: Sequence[IntentExample]) -> None:
    """Reject empty, over-long or NUL-holding example requests, naming the example."""
    for index, ex in enumerate(examples):
        where = f"intent example #{index + 1} for {ex.tool_id!r}"
        if not isinstance(ex.query, str) or not ex.query.strip():
            raise InvalidInputError(f"{where}: query is empty")
        if "\x00" in ex.query:
            raise InvalidInputError(f"{where}: query contains a NUL byte")
        if len(ex.query) > MAX_EXAMPLE_CHARS:
            raise InvalidInputError(f"{where}: query longer than {MAX_EXAMPLE_CHARS} characters")


def has_nul(value: Any) -> bool:
    """True when a NUL character hides anywhere in a (nested) JSON-like value."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_nul(v) for v in value)
    return False


# -- the expansion record -------------------------------------------------------------------------------


def expansion_sha(text: str) -> str:
    """The short hash of an expansion's text, as its record stores it."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def expansion_record(tool: Tool) -> dict[str, Any] | None:
    """The record ``toolstore expand`` left in the tool's spec, if any."""
    record = (tool.spec or {}).get(EXPANSION_RECORD)
    return record if isinstance(record, dict) else None


def is_generated(tool: Tool) -> bool:
    """True when the tool's expansion is exactly what toolstore last wrote."""
    record = expansion_record(tool)
    return record is not None and bool(tool.expansion) and record.get("sha") == expansion_sha(tool.expansion)


def carry_expansions(tools: Sequence[Tool], stored: Mapping[str, Tool]) -> list[Tool]:
    """Give incoming tools without an expansion the one toolstore generated for the ``stored`` tool of that id.

    A re-sync of an unchanged server then matches the stored content hash and writes nothing; a changed
    tool keeps its (now stale) expansion until the next ``expand`` regenerates it.
    """
    out = []
    for tool in tools:
        old = stored.get(tool.id)
        if not tool.expansion and old is not None and is_generated(old):
            spec = {**(tool.spec or {}), EXPANSION_RECORD: expansion_record(old)}
            tool = replace(tool, expansion=old.expansion, spec=spec)
        out.append(tool)
    return out
