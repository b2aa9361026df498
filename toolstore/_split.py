"""Sub-requests of a compound request, found without a model: "pull failed payments from Stripe, file a ticket in
Linear, and notify the on-call channel in Slack" asks for three tools, and each clause finds its own best.

:func:`split_request` cuts at sentence ends and at the words that join actions (``then``, ``after that``,
``finally``, ``also``, ``and``, a comma before a new clause), never inside quotes, a hyphenated word or "and/or"
("search for 'salt and pepper' recipes", "rock-and-roll", "Alice and/or Bob"), drops the joining words and the pieces
too short to route on, and returns the pieces in order (none when the request is one action). Not every sentence or
clause is an action of its own: one that only states context ("I'm building an app for dog owners.", "The program has 15
places.") stays with the request it serves, and one that points back ("Suggest an API for this purpose.") or only
asks for the tool to do it ("Which model should I use?") with the piece before it, so "context + question" is one
action. Deterministic, pure, linear in the text: microseconds for a request, milliseconds for the longest.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from ._uncut import inside, shifted, uncut_spans

#: At most this many sub-requests per request (a longer list's tail is merged into its last piece).
MAX_PARTS = 8
#: A piece needs this many content words (three letters or more, not in :data:`STOP_WORDS`) to be routed on its
#: own; a shorter one ("Any suggestions?", "Can you") joins the piece before it.
MIN_WORDS = 3
#: Words that say nothing about which tool a piece needs.
STOP_WORDS = frozenset(
    "a about all also am an and any are as at be been but by can could did do does for from get give had has have "
    "help how i i'd i'm if in into is it its just know let like may me more most much my need needs of on or our "
    "please provide recommend recommendations some such suggest suggestions tell than that the their them then there "
    "these they this those to up us want was we what when where which while who why will with would you your".split()
)
#: A comma alone starts a new piece only before one of these verbs ("..., file a ticket in Linear"), so a list of
#: values ("flow rate of 100 kg/s, inlet temperature of 150 C") stays one piece.
ACTION_VERBS = (
    "add analyse analyze archive assign book buy calculate call cancel check close compare compute convert create "
    "delete download draft email estimate evaluate execute export fetch file find forward generate get import "
    "invite list locate log look message monitor notify open order pay ping plan post predict pull push query read "
    "record register remind remove rename reply report request reserve retrieve review run save schedule search "
    "send set share show start stop submit summarise summarize tell track translate update upload verify write"
).split()
#: A sentence or clause opening with one of these (after its joining words) states something rather than asks: "I
#: am building an app ...", "We have a new release ...", "The program should have 15 places", "A company wants
#: ...". It is a request all the same when it asks (:data:`_ASKS`).
SUBJECTS = frozenset(
    "i i'm i've i'd i'll im we we're we've we'd my our a an the this that these those there it it's its he she "
    "they his her their one".split()
)
#: Of those, the words that point back: a statement opening with one ("The program ...", "This collection ...")
#: tells more about the request before it; any other tells about the request after it.
BACK_REFERENCES = frozenset("the this that these those it it's its he she they his her their".split())

# A sentence ends at . ! ? ; or a line break followed by more text: after a word ("... Linear. Then"), a number
# before a capital ("... 50000.0. Lastly"), or a closing quote; not inside a number like 3.5, "e.g." or after "Dr.".
# A line break with the spaces around it is found from where its run of spaces starts, reading the run once
# (`\s*\n+\s*`, tried again from every space of a run, read a run without a line break in quadratic time).
_SENTENCES = re.compile(
    r"(?<=[!?;])\s+"
    r"|(?<=[^\s.]{2}\.)(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bvs\.)\s+(?=\S)"
    r"|(?<=\d\.)\s+(?=[A-Z])|(?<=[^\s.]\.['\"])\s+(?=[A-Z])|(?<!\s)[^\S\n]*\n\s*"
)
_VERB = r"(?:" + "|".join(ACTION_VERBS) + r")\b"
# Words that join two actions inside a sentence, and a comma before an action verb. Group `and`: a bare "and", which
# does not cut where it ends a list of values ("drums, vocals, and bass": `_ends_list`).
# Linear in the sentence: a join never starts inside a run of spaces (it would have started where the run does, with
# the same words after it), and the spaces and comma around a joining word are read one way only (`\s*(?:,\s*)?`, not
# `\s*,?\s*`, which retries every split of a run of spaces: cubic in its length).
_JOINS = re.compile(
    r"(?!(?<=\s)\s)(?:"
    r"\s*(?:,\s*)?\b(?:and\s+then|and\s+also|and\s+afterwards|after\s+that|afterwards|then|finally|lastly|"
    r"additionally|as\s+well\s+as|also|plus)\b\s*(?:,\s*)?"
    r"|(?P<and>\s*(?:,\s*)?\band\b\s*(?:,\s*)?)"
    r"|\s*,\s*(?=" + _VERB + r"))",
    re.IGNORECASE,
)
_STARTS_WITH_VERB = re.compile(_VERB, re.IGNORECASE)
# A joining word right after a subject or an auxiliary ("I would also like ...", "we also need ...") is inside one verb.
_INSIDE_VERB = re.compile(
    r"\b(?:i|we|you|they|would|will|can|could|should|do|does|i'd|i'm|we'd|we're|am|are)\s*$", re.IGNORECASE
)
# Words that open a new step of a compound request ("Then, ...", "Finally, ...").
_STEP = (
    r"and|then|finally|lastly|also|additionally|next|afterwards|after\s+that|plus|first|firstly|secondly|thirdly|"
    r"moreover|furthermore|besides|in\s+addition"
)
# Greetings and "please" before a sentence's first word.
_GREETING = r"please|kindly|so|now|ok|okay|(?:hi|hello|hey)(?:\s+there)?"
_OPENS_STEP = re.compile(r"^(?:(?:" + _GREETING + r")\b[\s,!]*)*(?:" + _STEP + r")\b", re.IGNORECASE)
# Joining words and greetings left at the start of a piece ("Finally, retrieve ...", "Hi, I'm looking ...").
_LEAD = re.compile(r"^(?:(?:" + _STEP + "|" + _GREETING + r")\b[\s,!]*)+", re.IGNORECASE)
# Words that open an elaboration of the sentence before ("Specifically, I would like ..."): not a new action.
_ELABORATES = re.compile(
    r"^(?:specifically|in\s+particular|particularly|especially|for\s+example|for\s+instance|namely|that\s+is|"
    r"i\.e\.|e\.g\.)\b",
    re.IGNORECASE,
)
# A request about the request before it rather than an action of its own: "Suggest an API for this purpose",
# "Can you help me with this?" (not "retrieve the data for this patient", which names its own action).
_REFERS_BACK = re.compile(
    r"\b(?:this|that|these|such)\s+(?:\w+\s+)?(?:task|tasks|purpose|problem|need|needs|job|goal|requirement|"
    r"requirements|use\s+case)\b|\b(?:with|for|do|about)\s+(?:this|that|it)\s*$",
    re.IGNORECASE,
)
# A request for a tool to do what was said before ("Recommend an API for it.", "Which model should I use?"): the
# router's own question, no action of its own, when it opens no new step.
_SEEKS_TOOL = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+|please\s+)?(?:recommend|suggest|provide|give|tell|show|find|identify|"
    r"indicate|offer|get|guide|point|what|which)\b(?:\s+\S+){0,5}?\s+(?:apis?|models?|tools?|library|libraries|"
    r"plugins?)\b",
    re.IGNORECASE,
)
# What makes a statement ask all the same: "please", "can you", or a first person who wants, needs or looks for
# something ("I need ...", "... and would like ...", "I'm looking for ...").
_ASKS = re.compile(
    r"\bplease\b|\b(?:can|could|would|will)\s+you\b|"
    r"\b(?:i|we|and)(?:'d|\s+would)\s+(?:like|love)\b|"
    r"\b(?:i|we|and)\s+(?:also\s+|really\s+|still\s+|urgently\s+)?(?:need|want|wish|require)\b|"
    r"\b(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:also\s+|currently\s+)?(?:looking|searching|seeking|trying|hoping|"
    r"interested|curious)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]{3,}")


class _Unit(NamedTuple):
    """A clause of the request, and what its form says about the action it is part of."""

    text: str
    step: bool  # it opens a new step: cut at a joining word, or its sentence opened with one ("Then, ...")
    states: bool  # it only states context: opens with a subject, does not ask
    back: bool  # it is about what came before: "Specifically, ...", "The program ...", "for this purpose", "Which API?"


class _Text:
    """Text built of parts joined by a space, and its count of content words (a sum: no word runs over a space), so
    growing a piece or the pending context costs what is added, not the length of what is there."""

    __slots__ = ("parts", "words")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.words = 0

    def add(self, text: str, words: int) -> None:
        self.parts.append(text)
        self.words += words

    def extend(self, other: _Text) -> None:
        self.parts.extend(other.parts)
        self.words += other.words

    def __str__(self) -> str:
        return " ".join(self.parts)


def split_request(text: str, *, max_parts: int = MAX_PARTS) -> tuple[str, ...]:
    """The sub-requests of ``text``, in order: empty when it holds fewer than two actions to route on. Linear in
    ``text`` (no piece is rebuilt or counted again as it grows)."""
    uncut = uncut_spans(text)
    units = [unit for start, end in _sentences(text, uncut) for unit in _units(text, start, end, uncut)]
    built: list[_Text] = []
    context, context_step = _Text(), False  # statements waiting for the request they serve; whether they opened a step
    for i, unit in enumerate(units):
        following = units[i + 1] if i + 1 < len(units) else None
        words = _content_words(unit.text)
        if unit.states:
            if built and not context.parts and _serves_previous(unit, following):
                built[-1].add(unit.text, words)
            else:
                context_step = context_step or (not context.parts and unit.step)
                context.add(unit.text, words)
        elif built and unit.back:  # a request about what came before: "Suggest an API for this purpose"
            built[-1].extend(context)
            built[-1].add(unit.text, words)
            context = _Text()
        else:
            context.add(unit.text, words)
            _extend(built, context)
            context = _Text()
    if context.parts:  # statements after the last request: a new step of their own, else more about that request
        if built and not context_step:
            built[-1].extend(context)
        else:
            _extend(built, context)
    pieces = list(dict.fromkeys(str(piece) for piece in built))
    if len(pieces) < 2:
        return ()
    if len(pieces) > max_parts:
        pieces[max_parts - 1 :] = [" ".join(pieces[max_parts - 1 :])]
    return tuple(pieces)


def _sentences(text: str, uncut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where the sentences of ``text`` start and end: cut at each sentence end that is not inside one of the spans
    ``uncut`` (:func:`uncut_spans` of ``text``)."""
    sentences: list[tuple[int, int]] = []
    start = 0
    for end in _SENTENCES.finditer(text):
        if not inside(uncut, end):
            sentences.append((start, end.start()))
            start = end.end()
    return [*sentences, (start, len(text))]


def _units(text: str, start: int, end: int, uncut: list[tuple[int, int]]) -> list[_Unit]:
    """The clauses of the sentence ``text[start:end]``, each with what its form says; ``uncut`` is
    :func:`uncut_spans` of ``text``."""
    raw = text[start:end]
    sentence = raw.strip()
    opens_step, question = bool(_OPENS_STEP.match(sentence)), sentence.endswith("?")
    lead = _LEAD.match(sentence)
    body = sentence[lead.end() :] if lead else sentence  # the sentence without its joining words and greetings
    # A leading word glued to what follows ("Then'salt and pepper'", "hi-also"): the spans are those of the sentence
    # without it (a quote opens there, "-also" is no hyphenated word), not of the text.
    glued = lead is not None and sentence[lead.end() - 1].isalnum()
    offset = start + len(raw) - len(raw.lstrip()) + len(sentence) - len(body)  # where the body starts in the text
    clauses = _clauses(body, uncut_spans(body) if glued else shifted(uncut, offset, end))
    units = []
    for i, clause in enumerate(clauses):
        asks = bool(_ASKS.search(clause)) or (question and i == len(clauses) - 1)
        states = _first_word(clause) in SUBJECTS and not asks
        back = (i == 0 and bool(_ELABORATES.match(clause) or (not opens_step and _SEEKS_TOOL.match(clause)))) or (
            (_first_word(clause) in BACK_REFERENCES) if states else bool(_REFERS_BACK.search(clause))
        )
        units.append(_Unit(clause, opens_step or i > 0, states, back))
    return units


def _serves_previous(unit: _Unit, following: _Unit | None) -> bool:
    """Whether a statement tells about the request before it rather than the one after it: it points back ("The
    program has 15 places", "Specifically, ..."), or, opening no step itself, no request or a new step follows it
    ("I am 25. Then, analyze ...")."""
    return unit.back or (not unit.step and (following is None or following.step))


def _first_word(text: str) -> str:
    words = text.split(maxsplit=1)
    return words[0].lower().strip(",;:") if words else ""


def _clauses(sentence: str, uncut: list[tuple[int, int]]) -> list[str]:
    """The clauses of one sentence: cut at its joining words, except inside quotes, a hyphenated word or "and/or", and
    a bare "and" that ends a list of values (``uncut``: :func:`uncut_spans`' spans, counted from the sentence's
    start); a fragment ("Can you", "63 employees") joins the next clause, else the one before. Linear in the sentence:
    each check of a join looks at a bounded part of it (`_inside_verb`, `_Marks`)."""
    clauses: list[str] = []
    pending, start, marks = _Text(), 0, None
    for join in [*_JOINS.finditer(sentence), None]:
        end = len(sentence) if join is None else join.start()
        if join is not None:
            if inside(uncut, join) or _inside_verb(sentence, start, end):
                continue
            if join.group("and") is not None:
                marks = marks or _Marks(sentence)
                if marks.ends_list(start, end, join.end()):
                    continue
        text = _trim(sentence[start:end])
        start = end if join is None else join.end()
        if not text.strip():  # nothing to add: the pending fragment, if any, waits on
            continue
        pending.add(text.rstrip() if pending.parts else text.strip(), _content_words(text))
        if pending.words >= MIN_WORDS:
            clauses.append(str(pending))
            pending = _Text()
    if pending.parts and clauses:
        clauses[-1] = f"{clauses[-1]} {pending}"
    elif pending.parts:
        clauses.append(str(pending))
    return clauses


def _inside_verb(sentence: str, start: int, end: int) -> bool:
    """Whether the text between two cuts, ``sentence[start:end]``, ends inside a verb (:data:`_INSIDE_VERB`). Only its
    last word can: at most 6 letters after the character before it and before the spaces that end the text."""
    last = end
    while last > start and sentence[last - 1].isspace():
        last -= 1
    return bool(_INSIDE_VERB.search(sentence[max(start, last - 7) : end]))


class _Marks:
    """A sentence's commas and where its words (runs of non-space) start, found once, so whether an "and" ends a
    list of values is answered with binary searches rather than by reading the sentence back to its last cut."""

    def __init__(self, sentence: str) -> None:
        self.sentence = sentence
        self.commas = [m.start() for m in re.finditer(",", sentence)]
        self.words = [m.start() for m in re.finditer(r"\S+", sentence)]

    def ends_list(self, start: int, end: int, after: int) -> bool:
        """Whether an "and" between ``sentence[start:end]`` and ``sentence[after:]`` ends a list of values ("drums,
        vocals, and bass"): the text before it has a comma and a short last item, and no action verb follows it."""
        k = bisect.bisect_left(self.commas, end) - 1
        comma = self.commas[k] if k >= 0 else -1
        if comma < start:
            return False
        return (
            self._has_words(start, comma)
            and self._count_words(comma + 1, end) <= 4
            and not _STARTS_WITH_VERB.match(self.sentence, after)
        )

    def _has_words(self, start: int, end: int) -> bool:
        """Whether ``sentence[start:end]`` is more than spaces."""
        return start < end and (
            not self.sentence[start].isspace()
            or bisect.bisect_left(self.words, end) > bisect.bisect_right(self.words, start)
        )

    def _count_words(self, start: int, end: int) -> int:
        """``len(sentence[start:end].split())``."""
        if start >= end:
            return 0
        inner = bisect.bisect_left(self.words, end) - bisect.bisect_right(self.words, start)
        return inner + (not self.sentence[start].isspace())


def _extend(pieces: list[_Text], piece: _Text) -> None:
    """Append ``piece``, or add it to the last piece when either is too short to route on alone."""
    if pieces and (piece.words < MIN_WORDS or pieces[-1].words < MIN_WORDS):
        pieces[-1].extend(piece)
    else:
        pieces.append(piece)


def _trim(text: str) -> str:
    return _LEAD.sub("", text.strip(" \t,.;:!?")).strip(" \t,.;:!?")


def _content_words(text: str) -> int:
    return sum(w.lower() not in STOP_WORDS for w in _WORD.findall(text))
