"""Where a request is never cut into sub-requests (``_split``): its quoted spans ("search for 'salt and pepper'
recipes", "send “build and deploy done” to Slack"), its hyphenated words ("rock-and-roll") and "and/or"; found once per
request, linear in it, and looked up with binary searches."""

from __future__ import annotations

import bisect
import re

# Per kind of quote (straight or curly, single or double): where one opens, what ends the text it quotes, and whether
# that end closes it. An apostrophe is no quote: a single quote opens after no letter and before a letter ("don't",
# "'90s", "users' files" open none), and an apostrophe before a letter ("don't", "Bob’s") ends no quoted text.
_QUOTES = tuple(
    (mark, re.compile(opens), re.compile(ends), re.compile(closes))
    for mark, opens, ends, closes in (
        ('"', r'(?<!\w)"(?=\S)', r'"', r'(?<=\S)"'),
        ("\u201c", "\u201c", "[\u201c\u201d]", "\u201d"),
        ("'", r"(?<!\w)'(?=[^\W\d_])", r"'(?!\w)", r"(?<=\S)'"),
        ("\u2018", "\u2018", "\u2018|\u2019(?!\\w)", "\u2019"),
    )
)
_HYPHENS = "-\u2010\u2011"
#: At most this many characters between two quotes make a quoted span.
QUOTED_CHARS = 300
_HYPHENATED = re.compile(r"(?<!\w)\w+(?:[" + _HYPHENS + r"]\w+)+")
# "and/or" (or "or/and", "and / or") is one word, not an "and" that joins two actions ("send it to Alice and/or Bob").
_AND_OR = re.compile(r"\b(?:and[ \t]*/[ \t]*or|or[ \t]*/[ \t]*and)\b", re.IGNORECASE)


def uncut_spans(text: str) -> list[tuple[int, int]]:
    """Where in ``text`` no cut goes, in order and disjoint: its quoted spans (at most :data:`QUOTED_CHARS` characters
    inside, on one line; a quote opening inside an earlier span opens none), hyphenated words and "and/or". Linear in
    ``text`` but for a binary search per quote."""
    quoted: list[tuple[int, int]] = []
    for mark, opens, ends, closes in _QUOTES:
        if mark not in text:
            continue
        stops = [m.start() for m in ends.finditer(text)]
        for start in (m.start() for m in opens.finditer(text)):
            k = bisect.bisect_right(stops, start)
            end = stops[k] if k < len(stops) else -1
            if 0 < end - start <= QUOTED_CHARS + 1 and closes.match(text, end) and "\n" not in text[start:end]:
                quoted.append((start, end + 1))
    spans: list[tuple[int, int]] = []
    for start, end in sorted(quoted):
        if not spans or start >= spans[-1][1]:
            spans.append((start, end))
    uncut: list[tuple[int, int]] = []
    words = [m.span() for m in _HYPHENATED.finditer(text)] if any(h in text for h in _HYPHENS) else []
    words += [m.span() for m in _AND_OR.finditer(text)] if "/" in text else []
    for start, end in sorted(spans + words):
        if uncut and start < uncut[-1][1]:  # a hyphenated word or "and/or" in quotes, or both in one
            uncut[-1] = (uncut[-1][0], max(end, uncut[-1][1]))
        else:
            uncut.append((start, end))
    return uncut


def inside(uncut: list[tuple[int, int]], cut: re.Match[str]) -> bool:
    """Whether ``cut`` (a sentence end or a joining word) overlaps one of the spans ``uncut`` (sorted, disjoint)."""
    k = bisect.bisect_left(uncut, (cut.end(),)) - 1
    return k >= 0 and uncut[k][1] > cut.start()


def shifted(uncut: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The spans of ``uncut`` (sorted, disjoint) that overlap ``text[start:end]``, counted from ``start``. A binary
    search and the spans themselves: no span crosses a sentence end, so each is read for one sentence."""
    first, stop = max(bisect.bisect_left(uncut, (start,)) - 1, 0), bisect.bisect_left(uncut, (end,))
    return [(a - start, b - start) for a, b in uncut[first:stop] if b > start]
