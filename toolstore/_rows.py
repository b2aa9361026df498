"""Tool rows in and out of Postgres, and the checks a write makes before touching the database.

Pure functions, shared by every driver: what a tool looks like as a row of ``upsert_tools`` and back, what input is
refused, and the record by which a re-import keeps the expansion ``toolstore expand`` generated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import replace
from typing import Any

from ._errors import InvalidInputError, InvalidToolError, UnknownCatalogError, UnknownToolError
from ._formats.build import NAMESPACE_KEY
from ._formats.checks import check_parameters
from ._input import (
    MAX_DOC_CHARS,
    MAX_ID_CHARS,
    MAX_LIST_ITEMS,
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    check_text,
    json_problem,
)
from ._models import CatalogInfo, IntentExample, Tool
from ._observe import logger
from ._schemas import schema_problem
from ._text import description_doc, expansion_doc, name_doc

#: Where a generated expansion records what it came from, inside the tool's ``spec``.
EXPANSION_RECORD = "x-toolstore-expansion"
#: An intent example request, in characters.
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


def json_batches(rows: Sequence[str], max_bytes: int) -> Iterator[str]:
    """JSON arrays of consecutive ``rows`` (JSON texts), each of at most ``max_bytes`` in UTF-8 unless one row alone
    is longer (it then goes alone): a batch travels as one jsonb value, which Postgres caps at 256 MB. Given the
    limits of ``_input`` (every text field, the indexed fields, a parameter schema and a spec as JSON) a tool's row
    is at most about 25 MB."""
    batch: list[str] = []
    size = 2
    for row in rows:
        n = len(row) if row.isascii() else len(row.encode())
        if batch and size + n + 1 > max_bytes:
            yield "[" + ",".join(batch) + "]"
            batch, size = [], 2
        batch.append(row)
        size += n + 1
    if batch:
        yield "[" + ",".join(batch) + "]"


#: The hint of an UnknownCatalogError raised where creating the catalog is what the caller wants (a route, adding
#: examples or anchors to it).
CREATE_IT = "create it by importing tools into it"
#: The hint where it is not (a read, a removal, a drop): where the names there are.
LIST_THEM = "ToolStore.catalogs() and `toolstore catalogs` list the catalogs there"
#: The hint of an import into a missing catalog by a store made with create=False.
NOT_CREATED = "this store was made with create=False, so imports do not create it"


def unknown_catalog(name: str, hint: str = LIST_THEM) -> UnknownCatalogError:
    """The UnknownCatalogError of ``name``, with the hint that fits the caller (``CREATE_IT``, ``LIST_THEM``)."""
    return UnknownCatalogError(f"no catalog named {name!r}; {hint}")


def info_from_row(row: Mapping[str, Any]) -> CatalogInfo:
    """The CatalogInfo of a ``get_catalog`` / ``get_catalog_light`` / ``lock_catalog`` row."""
    return CatalogInfo(
        id=row["id"],
        name=row["name"],
        embed_model=row["embed_model"],
        embed_dim=row["embed_dim"],
        settings=row["settings"] or {},
        n_tools=row["n_tools"],
        n_examples=row["n_examples"],
        version=row["version"],
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
    """A ``tool_names`` row as a Tool carrying only what names it (id, name, provider), and a ``call_candidates`` or
    ``call_names`` row's ``namespace`` (its Responses namespace's name: ``_names.call_namespace``) in its spec."""
    namespace = row.get("namespace")
    spec = None if namespace is None else {NAMESPACE_KEY: {"name": namespace}}
    return Tool(id=row["id"], name=row["name"], provider=row["provider"], spec=spec)


def check_tools(tools: Sequence[Tool]) -> None:
    """Reject what the database would reject later (or should never hold), naming the tool and the field:
    duplicate ids, NUL bytes and lone surrogates, values over the limits of ``_input``, non-JSON values."""
    seen: set[str] = set()
    python_typed: list[str] = []
    for index, tool in enumerate(tools):
        label = f"tool #{index + 1}"
        if not isinstance(tool, Tool):
            raise InvalidToolError(f"{label}: expected a toolstore.Tool, got {type(tool).__name__}")
        try:
            check_text(tool.id, "id", max_chars=MAX_ID_CHARS)
            label = f"tool #{index + 1} ({tool.id!r})"
            check_text(tool.name, "name", max_chars=MAX_NAME_CHARS)
            if _check_fields(tool):
                python_typed.append(tool.id)
        except InvalidInputError as exc:
            raise InvalidToolError(f"{label}: {exc}") from None
        if tool.id in seen:
            raise InvalidToolError(f"{label}: id {tool.id!r} appears twice")
        seen.add(tool.id)
    if python_typed:
        shown = ", ".join(map(repr, python_typed[:5])) + (" ..." if len(python_typed) > 5 else "")
        logger.warning(
            "%d tool(s) write types in their parameter schemas as Python names ('float', 'dict': BFCL's), stored as "
            "written; OpenAI and Anthropic refuse such a definition: %s",
            len(python_typed),
            shown,
        )


def _check_fields(tool: Tool) -> bool:
    """Each field of ``tool`` checked (InvalidInputError naming it); whether its parameter schema writes types as
    Python names (``_schemas``: let through)."""
    for name in ("description", "expansion", "avoid_when"):
        check_text(getattr(tool, name), name, max_chars=MAX_TEXT_CHARS, empty=True)
    for name in ("title", "provider"):
        if getattr(tool, name) is not None:
            check_text(getattr(tool, name), name, max_chars=MAX_TEXT_CHARS, empty=True)
    for name in ("categories", "tags", "keywords", "examples"):
        values = getattr(tool, name)
        if not isinstance(values, (tuple, list)) or len(values) > MAX_LIST_ITEMS:
            raise InvalidInputError(f"{name} must be a list of at most {MAX_LIST_ITEMS} strings")
        for i, value in enumerate(values):
            check_text(value, f"{name}[{i}]", max_chars=MAX_TEXT_CHARS, empty=True)
    if not isinstance(tool.always_on, bool):
        raise InvalidInputError(f"always_on must be true or false, got {tool.always_on!r:.40}")
    for name in ("parameters", "spec"):
        if getattr(tool, name) is not None and not isinstance(getattr(tool, name), dict):
            raise InvalidInputError(f"{name} must be a JSON object or None, got {type(getattr(tool, name)).__name__}")
    for name in ("parameters", "spec"):
        problem = json_problem(getattr(tool, name))
        if problem:
            raise InvalidInputError(f"{name} {problem}")
    try:  # as an import checks it: a schema no SDK takes would be exported, and refused by a re-import
        check_parameters(tool.parameters, "parameters")
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from None
    problem, python_typed = (None, False) if tool.parameters is None else schema_problem(tool.parameters)
    if problem:
        raise InvalidInputError(f"parameters is not a valid JSON Schema {problem}")
    _check_docs(tool)
    return python_typed


#: No indexed field of a tool is longer than this many times the characters of its own text fields and parameter
#: schema (as JSON): a split identifier is at most twice as long as the identifier, and is appended to the text
#: (at most 3.5x), and the schema's text spells each property name twice (at most 3x of the JSON).
DOC_GROWTH = 12


def own_text_chars(tool: Tool) -> int:
    """The characters of a tool's own text fields, list items and parameter schema (as JSON), one more per item."""
    texts = (tool.id, tool.name, tool.title or "", tool.provider or "", tool.description, tool.expansion)
    lists = (*tool.keywords, *tool.examples, *tool.categories, *tool.tags)
    schema = 0 if tool.parameters is None else len(json.dumps(tool.parameters, ensure_ascii=False))
    return sum(map(len, texts)) + sum(map(len, lists)) + len(texts) + len(lists) + schema


def _check_docs(tool: Tool) -> None:
    """The length cap of the three indexed fields. The fields are built (three quarters of the time checking 10k
    tools took) only for a tool whose own text is long enough to come near the cap."""
    if DOC_GROWTH * own_text_chars(tool) <= MAX_DOC_CHARS:
        return
    for name, doc in (("name", name_doc), ("description", description_doc), ("expansion", expansion_doc)):
        if len(doc(tool)) > MAX_DOC_CHARS:
            raise InvalidInputError(
                f"the text indexed for its {name} field is over {MAX_DOC_CHARS:,} characters (description, "
                "parameter schema, examples and the like together)"
            )


def check_ids(ids: object) -> list[str]:
    """Tool ids asked for (``tools(ids)``, ``get``, ``resolve(among=...)``: any sequence or set but a str) as a list of
    storable strings; InvalidInputError naming the id's place otherwise."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, Set)):
        raise InvalidInputError(f"tool ids must be a list of strings, got {type(ids).__name__}")
    return [check_text(i, f"tool id #{n}", max_chars=MAX_ID_CHARS) for n, i in enumerate(ids, 1)]


def all_found(tools: Sequence[Tool], ids: Sequence[str], catalog: str) -> list[Tool]:
    """``tools`` (those found of ``ids``), or UnknownToolError naming the ids none of them has."""
    have = {t.id for t in tools}
    missing = sorted({i for i in ids if i not in have})
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UnknownToolError(f"no tool {shown} in catalog {catalog!r}")
    return list(tools)


def check_examples(examples: Sequence[IntentExample]) -> None:
    """Reject empty, over-long or unstorable example requests, naming the example."""
    for index, ex in enumerate(examples):
        if not isinstance(ex, IntentExample):
            raise InvalidInputError(f"intent example #{index + 1}: expected an IntentExample, got {type(ex).__name__}")
        where = f"intent example #{index + 1} for {ex.tool_id!r:.80}"
        check_text(ex.tool_id, f"{where}: tool id", max_chars=MAX_ID_CHARS)
        check_text(ex.query, f"{where}: query", max_chars=MAX_EXAMPLE_CHARS)


# -- the expansion record -------------------------------------------------------------------------------


def expansion_sha(text: str) -> str:
    """The short hash of an expansion's text, as its record stores it."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def expansion_record(tool: Tool) -> dict[str, Any] | None:
    """The record ``toolstore expand`` left in the tool's spec, if any (none in a spec that is not an object, which a
    database written before such specs were refused may hold)."""
    record = tool.spec.get(EXPANSION_RECORD) if isinstance(tool.spec, dict) else None
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
