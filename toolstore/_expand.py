"""Expansions: the user-language phrases stored in a tool's ``expansion`` field, written over a catalog (the
phrases themselves, offline and a model's, and the record of what they came from: ``_phrases``).

A written expansion is two parts, one phrase per line, LLM phrases first, duplicates dropped:

- **LLM phrases** (optional): one chat completion per tool through the ``openai`` SDK (any compatible
  server via ``base_url``) asking what users would say, synonyms and related tasks. They are replaced
  only by another LLM call: when the tool's content changed, or a different model is asked for.
- **Offline phrases** (always, no model): the split name (``get_forecast`` -> ``get forecast``), title,
  keywords, parameter names (split) and descriptions, the tool's own examples and up to
  :data:`._phrases.MAX_INTENT_PHRASES` of its intent examples from the database. The name is never empty, so
  neither is an expansion. This part is recomputed on every run (it is cheap) and written when it changed,
  e.g. after new intent examples were added.

What an expansion was generated from is recorded in the tool's ``spec`` under ``x-toolstore-expansion``:
the source hash (the tool's content hash without expansion and this record) the LLM phrases came from,
the model, the LLM phrases, and a hash of the text written. So a re-run calls the model only for new or
changed tools; a tool whose expansion was written by hand (no record, or a record that does not match
its text) is left alone unless ``force``. Writes go through the catalog's upsert in batches, one
transaction each: BM25 statistics, content hash and the dense vector (which folds in the expansion)
change together, and an interrupted run keeps every finished batch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from tqdm import tqdm

from ._catalog import upsert_tools
from ._errors import InvalidInputError, InvalidToolError
from ._models import CatalogInfo, Tool
from ._observe import logger
from ._phrases import (
    DEFAULT_MODEL,
    PROMPT_VERSION,
    llm_phrases,
    make_client,
    offline_phrases,
    source_hash,
    with_expansion,
)
from ._rows import check_tools, expansion_record, is_generated
from ._sql import query
from ._stored_tools import list_tools

if TYPE_CHECKING:
    from ._store import ToolStore

WRITE_BATCH = 500  # tools per transaction when no model is called


@dataclass
class ExpandReport:
    """What an expansion run did."""

    tools: int = 0
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    generated: int = 0
    rejected: int = 0
    handwritten: int = 0
    remaining: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "tools": self.tools,
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "llm_calls": self.generated,
            "rejected": self.rejected,
            "handwritten": self.handwritten,
            "remaining": self.remaining,
            "skipped": self.skipped,
        }


def intent_queries(conn: psycopg.Connection[Any], info: CatalogInfo) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for tool_id, text in conn.execute(query("intent_queries"), {"catalog": info.id}):
        found.setdefault(tool_id, []).append(text)
    return found


def _write(store: ToolStore, pairs: Sequence[tuple[str, Tool]]) -> list[str]:
    """Upsert new versions of tools in one transaction; ``pairs`` holds each tool's stored content hash when it
    was read, and a tool changed (or removed) by someone else since is skipped."""
    if not pairs:
        return []
    read = {new.id: read_hash for read_hash, new in pairs}
    with store.connection() as conn:
        report = upsert_tools(conn, store.catalog, [new for _, new in pairs], store.embedder, if_unchanged=read)
    return report.inserted + report.updated


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _offline_refresh(tool: Tool, intents: dict[str, list[str]]) -> Tool:
    """The tool with fresh offline phrases and its recorded LLM phrases (if any) kept as they are."""
    record = expansion_record(tool) or {}
    llm = [p for p in record.get("llm", []) if isinstance(p, str)]
    offline = offline_phrases(tool, intents.get(tool.id, ()))
    return with_expansion(tool, llm, offline, source=record.get("source"), model=record.get("model"))


def refused(tool: Tool) -> str | None:
    """What the write path refuses of ``tool`` as it is stored (a row an older release wrote before a check it fails
    now, such as non-object parameters), or None: its upsert would fail, and a batch's with it."""
    try:
        check_tools([tool])
    except InvalidToolError as exc:
        return str(exc).removeprefix(f"tool #1 ({tool.id!r}): ")
    return None


def _warn_skipped(problems: dict[str, str]) -> None:
    if problems:
        shown = "; ".join(f"{tool_id!r}: {problem}" for tool_id, problem in list(problems.items())[:5])
        more = f" (and {len(problems) - 5:,} more)" if len(problems) > 5 else ""
        logger.warning(
            "expand skipped %d stored tool(s) that a write refuses now, %s%s; import them again with a valid "
            "definition (toolstore import FILE) and run expand again",
            len(problems),
            shown,
            more,
        )


def expand(
    store: ToolStore,
    *,
    client: Any = None,
    model: str = DEFAULT_MODEL,
    offline: bool = False,
    max_tools: int | None = None,
    force: bool = False,
    batch_size: int = 8,
    concurrency: int = 4,
    progress: bool | None = None,
) -> ExpandReport:
    """Write every tool's expansion; with a model (``client``, an ``openai.OpenAI``) unless ``offline``.

    The model is called once per tool whose content changed since its LLM phrases were generated (or that
    has none, or whose phrases came from another model); at most ``max_tools`` calls per run, the rest
    count as ``remaining`` and still get fresh offline phrases. ``force`` regenerates everything, hand-written
    expansions included. Model calls run ``concurrency`` at a time; every ``batch_size`` tools are committed.
    """
    if max_tools is not None:
        _check_count(max_tools, "max_tools", 0, none=True)
    _check_count(batch_size, "batch_size", 1)
    _check_count(concurrency, "concurrency", 1)
    if not offline and client is None and (max_tools is None or max_tools > 0):  # max_tools 0: no call, no key
        client = make_client()
    info = store.info()
    with store.connection() as conn, conn.transaction():  # one snapshot of tools, hashes and examples
        conn.execute(query("repeatable_read"))
        tools = list_tools(conn, info)
        hashes: dict[str, str] = dict(conn.execute(query("tool_hashes"), {"catalog": info.id}).fetchall())
        intents = intent_queries(conn, info)
    report = ExpandReport(tools=len(tools))
    refresh: list[tuple[Tool, Tool]] = []
    need: list[Tool] = []
    problems = {tool.id: problem for tool in tools if (problem := refused(tool)) is not None}
    report.skipped = len(problems)
    _warn_skipped(problems)
    for tool in (t for t in tools if t.id not in problems):  # never written: one would fail its whole batch
        record = expansion_record(tool) or {}
        if tool.expansion and not is_generated(tool) and not force:
            report.handwritten += 1
            continue
        stale = record.get("source") != source_hash(tool) or record.get("model") != model
        if not offline and (force or stale or record.get("v") != PROMPT_VERSION):
            need.append(tool)
        else:
            refresh.append((tool, _offline_refresh(tool, intents)))
    if max_tools is not None and len(need) > max_tools:
        # over the cap: offline refresh only, the LLM record stays as it was (so the next run still asks)
        refresh += [(tool, _offline_refresh(tool, intents)) for tool in need[max_tools:]]
        report.remaining = len(need) - max_tools
        need = need[:max_tools]
    changed = [(hashes[old.id], new) for old, new in refresh if new.content_hash() != old.content_hash()]
    report.unchanged = len(refresh) - len(changed)
    for batch in _chunks(changed, WRITE_BATCH):
        report.updated += _write(store, batch)
    if need:
        _expand_with_model(store, client, model, need, hashes, intents, report, batch_size, concurrency, progress)
    return report


def _check_count(value: object, name: str, least: int, *, none: bool = False) -> None:
    """InvalidInputError naming ``name`` unless ``value`` is an integer from ``least`` up (``none``: None is taken)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidInputError(
            f"{name} must be {'None or ' if none else ''}an integer from {least} up, got {value!r:.80}"
        )


def _expand_with_model(
    store: ToolStore,
    client: Any,
    model: str,
    need: Sequence[Tool],
    hashes: dict[str, str],
    intents: dict[str, list[str]],
    report: ExpandReport,
    batch_size: int,
    concurrency: int,
    progress: bool | None,
) -> None:

    show = sys.stderr.isatty() if progress is None else progress
    with (
        tqdm(total=len(need), desc="expand", unit="tool", disable=not show) as bar,
        ThreadPoolExecutor(max_workers=concurrency) as pool,
    ):
        for batch in _chunks(need, batch_size):
            results = list(pool.map(lambda t: llm_phrases(client, model, t), batch))
            pairs = []
            for tool, llm in zip(batch, results):
                report.generated += 1
                report.rejected += not llm
                new = with_expansion(
                    tool, llm, offline_phrases(tool, intents.get(tool.id, ())), source=source_hash(tool), model=model
                )
                pairs.append((hashes[tool.id], new))
            report.updated += _write(store, pairs)
            bar.update(len(batch))
