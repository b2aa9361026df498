"""The splitter as it was written before it was made linear (``_split.split_request`` up to commit 11c8cd7): pieces
rebuilt and counted again as they grow, each join's checks reading the sentence back to the last cut, and the
sentence-end and joining-word patterns that retried every split of a run of spaces. Quadratic (cubic in a run of
spaces), so only for short requests; ``tests/test_split.py`` holds the splitter to it. It shares with the splitter
what the linear rewrite left as it was: the word lists, the other patterns and where no cut goes
(``_uncut.uncut_spans``, which since the rewrite also keeps "and/or" whole: the one rule added after it)."""

from __future__ import annotations

import re

from toolstore._split import (
    _ASKS,
    _ELABORATES,
    _INSIDE_VERB,
    _LEAD,
    _OPENS_STEP,
    _REFERS_BACK,
    _SEEKS_TOOL,
    _STARTS_WITH_VERB,
    _VERB,
    BACK_REFERENCES,
    MAX_PARTS,
    MIN_WORDS,
    SUBJECTS,
    _content_words,
    _first_word,
    _serves_previous,
    _trim,
    _Unit,
)
from toolstore._uncut import inside, uncut_spans

SENTENCES = re.compile(
    r"(?<=[!?;])\s+"
    r"|(?<=[^\s.]{2}\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bvs\.)\s+(?=\S)"
    r"|(?<=\d\.)\s+(?=[A-Z])|(?<=[^\s.]\.['\"])\s+(?=[A-Z])|\s*\n+\s*"
)
JOINS = re.compile(
    r"\s*,?\s*\b(?:and\s+then|and\s+also|and\s+afterwards|after\s+that|afterwards|then|finally|lastly|"
    r"additionally|as\s+well\s+as|also|plus)\b\s*,?\s*"
    r"|(?P<and>\s*,?\s*\band\b\s*,?\s*)"
    r"|\s*,\s*(?=" + _VERB + r")",
    re.IGNORECASE,
)


def split_request(text: str, *, max_parts: int = MAX_PARTS) -> tuple[str, ...]:
    units = [unit for sentence in sentences(text) for unit in units_of(sentence)]
    pieces: list[str] = []
    context, context_step = "", False
    for i, unit in enumerate(units):
        following = units[i + 1] if i + 1 < len(units) else None
        if unit.states:
            if pieces and not context and _serves_previous(unit, following):
                pieces[-1] = f"{pieces[-1]} {unit.text}"
            else:
                context, context_step = f"{context} {unit.text}".strip(), context_step or (not context and unit.step)
        elif pieces and unit.back:
            pieces[-1] = " ".join(filter(None, (pieces[-1], context, unit.text)))
            context = ""
        else:
            extend(pieces, f"{context} {unit.text}".strip())
            context = ""
    if context:
        if pieces and not context_step:
            pieces[-1] = f"{pieces[-1]} {context}"
        else:
            extend(pieces, context)
    pieces = list(dict.fromkeys(pieces))
    if len(pieces) < 2:
        return ()
    if len(pieces) > max_parts:
        pieces[max_parts - 1 :] = [" ".join(pieces[max_parts - 1 :])]
    return tuple(pieces)


def sentences(text: str) -> list[str]:
    uncut, found, start = uncut_spans(text), [], 0
    for end in SENTENCES.finditer(text):
        if not inside(uncut, end):
            found.append(text[start : end.start()])
            start = end.end()
    return [*found, text[start:]]


def units_of(sentence: str) -> list[_Unit]:
    sentence = sentence.strip()
    opens_step, question = bool(_OPENS_STEP.match(sentence)), sentence.endswith("?")
    found = clauses(_LEAD.sub("", sentence))
    units = []
    for i, clause in enumerate(found):
        asks = bool(_ASKS.search(clause)) or (question and i == len(found) - 1)
        states = _first_word(clause) in SUBJECTS and not asks
        back = (i == 0 and bool(_ELABORATES.match(clause) or (not opens_step and _SEEKS_TOOL.match(clause)))) or (
            (_first_word(clause) in BACK_REFERENCES) if states else bool(_REFERS_BACK.search(clause))
        )
        units.append(_Unit(clause, opens_step or i > 0, states, back))
    return units


def clauses(sentence: str) -> list[str]:
    found: list[str] = []
    pending, start, uncut = "", 0, uncut_spans(sentence)
    for join in [*JOINS.finditer(sentence), None]:
        end = len(sentence) if join is None else join.start()
        after = "" if join is None else sentence[join.end() :]
        if join is not None and (
            inside(uncut, join)
            or _INSIDE_VERB.search(sentence[start:end])
            or (join.group("and") is not None and ends_list(sentence[start:end], after))
        ):
            continue
        clause = f"{pending} {_trim(sentence[start:end])}".strip()
        start = end if join is None else join.end()
        if not clause:
            continue
        if _content_words(clause) >= MIN_WORDS:
            found.append(clause)
            pending = ""
        else:
            pending = clause
    if pending and found:
        found[-1] = f"{found[-1]} {pending}"
    elif pending:
        found.append(pending)
    return found


def ends_list(before: str, after: str) -> bool:
    head, comma, item = before.rpartition(",")
    return bool(comma) and bool(head.strip()) and len(item.split()) <= 4 and not _STARTS_WITH_VERB.match(after)


def extend(pieces: list[str], piece: str) -> None:
    if pieces and (_content_words(piece) < MIN_WORDS or _content_words(pieces[-1]) < MIN_WORDS):
        pieces[-1] = f"{pieces[-1]} {piece}"
    else:
        pieces.append(piece)
