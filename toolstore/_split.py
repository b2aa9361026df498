"""Sub-requests of a compound request, found without a model: "pull failed payments from Stripe, file a ticket in
Linear, and notify the on-call channel in Slack" asks for three tools, and each clause finds its own best.

:func:`split_request` cuts at sentence ends and at the words that join actions (``then``, ``after that``,
``finally``, ``also``, ``and``, a comma before a new clause), drops the joining words and the pieces too short to
route on, and returns the pieces in order (none when the request is one action). Deterministic, pure, microseconds.
"""

from __future__ import annotations

import re

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

# A sentence ends at . ! ? ; or a line break followed by more text (not inside a number like 3.5 or "e.g.").
_SENTENCES = re.compile(r"(?<=[!?;])\s+|(?<=[^\s.]{2}\.)\s+(?=\S)|\s*\n+\s*")
#: A comma alone starts a new piece only before one of these verbs ("..., file a ticket in Linear"), so a list of
#: values ("flow rate of 100 kg/s, inlet temperature of 150 C") stays one piece.
ACTION_VERBS = (
    "add analyse analyze archive assign book buy calculate call cancel check close compare compute convert create "
    "delete download draft email estimate evaluate execute export fetch file find forward generate get import "
    "invite list locate log look message monitor notify open order pay ping plan post predict pull push query read "
    "record register remind remove rename reply report request reserve retrieve review run save schedule search "
    "send set share show start stop submit summarise summarize tell track translate update upload verify write"
).split()
# Words that join two actions inside a sentence, and a comma before an action verb.
_JOINS = re.compile(
    r"\s*,?\s*\b(?:and\s+then|and\s+also|and\s+afterwards|after\s+that|afterwards|then|finally|lastly|"
    r"additionally|as\s+well\s+as|also|plus|and)\b\s*,?\s*"
    r"|\s*,\s*(?=(?:" + "|".join(ACTION_VERBS) + r")\b)",
    re.IGNORECASE,
)
# Joining words left at the start of a piece ("Finally, retrieve ...").
_LEAD = re.compile(
    r"^(?:(?:and|then|finally|lastly|also|additionally|next|afterwards|after\s+that|plus|please|"
    r"moreover|furthermore|besides|in\s+addition)\b[\s,]*)+",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]{3,}")


def split_request(text: str, *, max_parts: int = MAX_PARTS) -> tuple[str, ...]:
    """The sub-requests of ``text``, in order: empty when it holds fewer than two actions to route on."""
    pieces: list[str] = []
    for sentence in _SENTENCES.split(text):
        pending = ""  # a fragment ("Can you", "63 employees") joins the next piece of its sentence, else the last one
        for clause in _JOINS.split(sentence):
            clause = _LEAD.sub("", clause.strip(" \t,.;:!?")).strip(" \t,.;:!?")
            if not clause:
                continue
            clause = f"{pending} {clause}".strip()
            if _content_words(clause) >= MIN_WORDS:
                pieces.append(clause)
                pending = ""
            else:
                pending = clause
        if pending and pieces:
            pieces[-1] = f"{pieces[-1]} {pending}"
    pieces = list(dict.fromkeys(pieces))
    if len(pieces) < 2:
        return ()
    if len(pieces) > max_parts:
        pieces[max_parts - 1 :] = [" ".join(pieces[max_parts - 1 :])]
    return tuple(pieces)


def _content_words(text: str) -> int:
    return sum(w.lower() not in STOP_WORDS for w in _WORD.findall(text))
