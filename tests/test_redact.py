"""redact() hides what it hides and no more: a dict keyed by a secret flag keeps its closing quote and bracket, prose
about a quoted flag is kept, and adversarial text is read a bounded number of times."""

from __future__ import annotations

import re
from typing import Any

import pytest

from toolstore import _errors
from toolstore._errors import redact


def test_a_secret_value_in_a_dict_or_call_keeps_the_text_that_closes_it() -> None:
    """A quoted value that a closing bracket follows took the bracket for part of the secret and lost its own closing
    quote with it (``{"--api-key": "abc"}`` became ``{"--api-key": "[redacted]``), and a dict keyed by a secret flag
    that no credential pattern knows (``--client-secret``) showed its value."""
    for text, shown in [
        ('{"--api-key": "abc"}', '{"--api-key": "[redacted]"}'),
        ('{"token": "abc"}', '{"token": "[redacted]"}'),
        ("(token='abc');", "(token='[redacted]');"),
        ("[password='a b']", "[password='[redacted]']"),
        ('{"--client-secret": "abc", "user": "x"}', '{"--client-secret": "[redacted]", "user": "x"}'),
        ("{'--db-password': 'abc'}", "{'--db-password': '[redacted]'}"),
    ]:
        assert redact(f"srv {text}") == f"srv {shown}", text


def test_prose_about_a_quoted_secret_flag_is_kept() -> None:
    """A quoted flag followed by prose took its first word for the flag's value (``'--token' is required`` hid "is",
    click's ``Option '--token' requires an argument.`` hid "requires"); a value given after it is still hidden."""
    for text in (
        "'--token' is required",
        "Error: Option '--api-key' requires an argument.",
        'option "--client-secret" expects a value',
    ):
        assert redact(text) == text
    for text, shown in [
        ("'--token' abc123 is wrong", "'--token' [redacted] is wrong"),
        ("'--client-secret': missing value", "'--client-secret': [redacted] value"),  # as "token: X" (_SECRETS)
        ("'--token' hunter -v", "'--token' [redacted] -v"),
        ("'--token' hunter", "'--token' [redacted]"),
        ("'--token' 'is' required", "'--token' '[redacted]' required"),
        ("--token is required", "--token [redacted] required"),  # unquoted, a command line's: any word is the value
    ]:
        assert redact(text) == shown, text


def test_a_secret_that_runs_on_past_a_quoted_part_or_a_line_end_stays_hidden() -> None:
    """A closing bracket or ";" right after a quoted part ended the value even where the word went on (``"a"]b``, one
    word to a shell: its rest shown), and a word that ended a line after a quoted flag was taken for prose when the next
    line began with a letter; both were hidden before either rule."""
    for text, shown in [
        ('srv --token="SEK"x"]RIT" is required', 'srv --token="[redacted]" is required'),
        ('srv {"token":"SEK");RIT"}', 'srv {"token":"[redacted]"}'),
        ("srv password: SEK'a'}RIT more", "srv password: [redacted] more"),
        ("'--api-key' 'SEK'];RIT", "'--api-key' '[redacted]'];RIT"),  # a quoted item alone: as Python prints a list
        ("'--client-secret' SEKRIT\nNext line", "'--client-secret' [redacted]\nNext line"),
        (
            "['--token', 'x']\n'--password' hunter\nstarting",
            "['--token', '[redacted]']\n'--password' [redacted]\nstarting",
        ),
    ]:
        assert redact(text) == shown, text
    for text in ('{"token": "abc"}.', "(token='abc'));", '{"token": "abc"}, "user": "x"}'):
        assert "abc" not in redact(text) and redact(text).endswith(text[text.index("abc") + 4 :]), text


N = 100_000
ADVERSARIAL = [  # (text, redacted)
    ("'--token' " + "a" * N, "'--token' [redacted]"),
    ("'--token' a" + " " * N + "b", None),  # prose: kept
    ("'--token' " + "ab " * (N // 3), None),
    ("'--token': " + "a" * N, "'--token': [redacted]"),
    ("'--client-secret'," + " " * N + "is it", None),
    ("'--token'" + " " * N + ":", "'--token'" + " " * N + "[redacted]"),
    ("--token " + '"a"' * (N // 3) + "}", '--token "[redacted]"}'),
    ("token=" + '"a"}' * (N // 4), 'token="[redacted]"}' + '"a"}' * (N // 4 - 1)),
    ("'--token' is " * (N // 13), "'--token' [redacted] " * (N // 13)),
    ("'--token' \"a\"} is " * (N // 18), "'--token' \"[redacted]\"} is " * (N // 18)),
    ('token="a"' + "]" * N + "b", 'token="[redacted]'),
    ("token=" + ('"a"' + "]" * 50) * (N // 53), 'token="[redacted]"' + "]" * 50 + ('"a"' + "]" * 50) * (N // 53 - 1)),
    ("'--token' a" + "\n" * N + "b", "'--token' [redacted]" + "\n" * N + "b"),
]


@pytest.mark.parametrize(("text", "redacted"), ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redact_reads_adversarial_text_a_bounded_number_of_times(
    text: str, redacted: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text of 100,000 characters made of the shapes above, repeated, is read by each of redact's patterns once over
    (one substitution over the whole text, none restarted after each match); a pattern that backtracked over the rest
    of the text from each position would not end here (quadratic in its length)."""
    read = {"chars": 0}

    class Counted:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def sub(self, repl: Any, string: str) -> str:
            read["chars"] += len(string)
            return self.pattern.sub(repl, string)

        def search(self, string: str) -> re.Match[str] | None:
            read["chars"] += len(string)
            return self.pattern.search(string)

    for name in ("_SECRETS", "_FLAG_WORDS", "_FLAG_ITEMS", "_FLAG_EQUALS", "_URI_RUN", "_DSN_PARSE", "_QUOTED"):
        monkeypatch.setattr(_errors, name, Counted(getattr(_errors, name)))
    hidden = redact(text)
    assert hidden == (text if redacted is None else redacted)
    assert read["chars"] <= 8 * max(len(text), len(hidden)), read  # 7 patterns, each over the text as it then is
