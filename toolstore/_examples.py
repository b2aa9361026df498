"""Intent examples from JSONL files in the benchmark ``train.jsonl`` format."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ._errors import InvalidInputError
from ._models import IntentExample


def load_examples(path: str | os.PathLike[str]) -> list[IntentExample]:
    """One example per (query, relevant tool) from lines like ``{"query": "...", "relevant": ["tool_id"]}``.

    Raises :class:`InvalidInputError` naming the file and line of the first malformed line; nothing is
    returned then.
    """
    name = str(path)
    examples: list[IntentExample] = []
    text = Path(path).read_text(encoding="utf-8-sig")
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name} line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{where}: invalid JSON at column {exc.colno}: {exc.msg}") from None
        if not isinstance(row, dict):
            raise InvalidInputError(f"{where}: expected a JSON object, got {type(row).__name__}")
        query = row.get("query")
        relevant = row.get("relevant")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError(f"{where}: 'query' must be a non-empty string")
        if "\x00" in query:
            raise InvalidInputError(f"{where}: 'query' contains a NUL byte")
        if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) and r for r in relevant):
            raise InvalidInputError(f"{where}: 'relevant' must be a non-empty list of tool ids")
        examples.extend(IntentExample(tool_id=tool_id, query=query) for tool_id in relevant)
    if not examples:
        raise InvalidInputError(f"{name}: no intent examples found")
    return examples
