"""Intent examples from labelled data: JSONL files in the benchmark ``train.jsonl`` format, or labelled sessions."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._errors import InvalidInputError
from ._metrics import LabelledSession, load_judgements
from ._models import IntentExample


def load_examples(path: str | os.PathLike[str]) -> list[IntentExample]:
    """One example per (query, relevant tool) from lines like ``{"qid", "query", "relevant": [tool ids]}``.

    Raises :class:`~toolstore.InvalidInputError` naming the file and line of the first malformed line;
    nothing is returned then.
    """
    examples = [
        IntentExample(tool_id=tool_id, query=query) for query, j in load_judgements(path) for tool_id in j.relevant
    ]
    if not examples:
        raise InvalidInputError(f"{os.fspath(path)}: no intent examples found")
    return examples


def session_examples(sessions: Sequence[LabelledSession]) -> list[IntentExample]:
    """One intent example per (turn, relevant tool) of labelled sessions, without repeats."""
    found = (IntentExample(tool_id, turn.query) for s in sessions for turn in s.turns for tool_id in turn.relevant)
    return list(dict.fromkeys(found))
