"""The splitter (``_split.split_request``): a compound request gives one sub-request per action; a single action,
however it is phrased (context then question, a list of values, a request that points back at the one before),
gives none. Pure: no database."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolstore import _split, _uncut
from toolstore._input import MAX_QUERY_CHARS
from toolstore._split import MAX_PARTS, split_request

import split_oracle
from benchdata import BENCH

DEMO_REQUEST = (
    "pull failed payments from Stripe, file a support ticket in Linear, and notify the on-call channel in Slack"
)


def test_split_finds_the_clauses_of_a_compound_request() -> None:
    assert split_request(DEMO_REQUEST) == (
        "pull failed payments from Stripe",
        "file a support ticket in Linear",
        "notify the on-call channel in Slack",
    )
    assert split_request("Check the altitude of aircraft ABC1234. Then, retrieve the data of robot RBT5678.") == (
        "Check the altitude of aircraft ABC1234",
        "retrieve the data of robot RBT5678",
    )
    assert split_request("get the stock price of Apple and any recent news related to the company") == (
        "get the stock price of Apple",
        "any recent news related to the company",
    )


def test_one_action_is_not_split() -> None:
    for text in [
        "create an issue for the login bug",
        "will I need an umbrella in Berlin tomorrow?",
        "refund charge ch_3NxQ9 amount=2500 reason=duplicate",
        "salt and pepper",
        "",
    ]:
        assert split_request(text) == (), text


@pytest.mark.parametrize(
    "text",
    [
        # context, then the question it leads to
        "I am building an app for classifying pet images into dog breeds using neural networks. "
        "Can you recommend a suitable API to use?",
        "I'm planning a trip to Lisbon next week. What is the weather forecast for the Lisbon coast?",
        "A smartphone company wants to implement image classification for their mobile camera app. "
        "Which pretrained model can classify the photos taken by phone cameras?",
        "We have a new music release titled 'Shape of You' by Rembrandt. Please publish this music on the platform.",
        # a clause of context inside the sentence, and a question about "this"
        "I have images of various objects and I need to classify them into different categories. "
        "Can you suggest an API that can help me with this?",
        "Help me segment the objects in a street image. Suggest an API that I can use for this purpose.",
        # a request for the tool that does what was said before
        "I want to create an app that can classify images taken by phone cameras. Recommend me an API that is "
        "optimized for mobile devices.",
        "I need to extract the vocals from a recording of a live concert. Which model should I use for the separation?",
        # a statement telling more about the request before it
        "Create a leadership program in Tokyo starting in January 2024. The program should have a limit of 15 "
        "participants.",
        "Find me the fastest subway route from Dongdaemun to Itaewon. Specifically, I want the route with the "
        "fewest transfers.",
        # a list of values ends with "and"
        "extract the lead vocals, the bass guitar track, and the drum patterns from a pop song",
    ],
)
def test_context_and_question_is_one_action(text: str) -> None:
    assert split_request(text) == ()


def test_context_stays_with_the_request_it_serves_in_a_compound_request() -> None:
    # context before a question joins it; the next step is its own piece
    assert split_request(
        "I'm planning a trip next week. Can you give me the weather forecast for my destination? Additionally, "
        "check if there are any discounted hotel rates available."
    ) == (
        "I'm planning a trip next week Can you give me the weather forecast for my destination",
        "check if there are any discounted hotel rates available",
    )
    # context followed by a new step ("Then, ...") tells about the request before it
    assert split_request(
        "Please help me calculate my VO2 max. I am a 25-year-old moderately active male. Then, analyze the range "
        "of motion of my knee joint."
    ) == (
        "help me calculate my VO2 max I am a 25-year-old moderately active male",
        "analyze the range of motion of my knee joint",
    )
    assert split_request(
        "We have a new music release titled 'Shape of You' by Rembrandt. Please publish this music on the "
        "platform. Then, send a marketing email about it to our subscribers."
    ) == (
        "We have a new music release titled 'Shape of You' by Rembrandt publish this music on the platform",
        "send a marketing email about it to our subscribers",
    )


def test_a_request_naming_an_earlier_thing_is_still_its_own_action() -> None:
    # "this patient" is what the new action is about, not the action before it
    assert split_request(
        "Retrieve the blood pressure readings of patient 42. Then, retrieve the lab results for this patient."
    ) == ("Retrieve the blood pressure readings of patient 42", "retrieve the lab results for this patient")
    # a last step that is a statement ("Lastly, I am curious about ...") asks all the same
    assert split_request(
        "Get the opening hours of the main library. Lastly, I am curious about the inventory status of the "
        "library's rare book collection."
    ) == (
        "Get the opening hours of the main library",
        "I am curious about the inventory status of the library's rare book collection",
    )


def test_a_new_step_asking_for_a_tool_is_its_own_action() -> None:
    assert split_request(
        "Find the weather forecast for Paris this weekend. Additionally, can you suggest a tool for booking "
        "train tickets to Lyon?"
    ) == (
        "Find the weather forecast for Paris this weekend",
        "can you suggest a tool for booking train tickets to Lyon",
    )


def test_a_joining_word_inside_a_verb_does_not_cut() -> None:
    assert split_request(
        "Search for the book 'The Cairo Trilogy' by Naguib Mahfouz. Once you find the book, I would also like to "
        "know about the archives in Cairo that house manuscripts."
    ) == (
        "Search for the book 'The Cairo Trilogy' by Naguib Mahfouz",
        "Once you find the book, I would also like to know about the archives in Cairo that house manuscripts",
    )


def test_sentences_end_after_numbers_and_quotes() -> None:
    # each statement goes with the request after it, so where the sentence before it ends matters
    assert split_request(
        "Set the salary of employee 66 to 50000.0. We have a new hire named Emma Stone. Please create her record."
    ) == ("Set the salary of employee 66 to 50000.0", "We have a new hire named Emma Stone create her record")
    assert split_request(
        "Localize the text 'Click here for more.' We have a new page about pricing. Translate it into German."
    ) == ("Localize the text 'Click here for more.'", "We have a new page about pricing Translate it into German")
    # but not after a title
    assert split_request(
        "Calculate the research impact of the researcher Dr. Emily Anderson for 2021. Then, retrieve the "
        "reliability rating of cancer studies."
    ) == (
        "Calculate the research impact of the researcher Dr. Emily Anderson for 2021",
        "retrieve the reliability rating of cancer studies",
    )


def test_fragments_join_a_piece_and_value_lists_stay_whole() -> None:
    # "Any recommendations" says nothing on its own: it joins the clause before it
    assert split_request("Book a table at an Italian restaurant near the office. Any recommendations?") == ()
    # a comma splits only before an action verb: the list of values stays in its clause
    text = "calculate the heat exchanger effectiveness with hot flow 100 kg/s, cold flow 80 kg/s, inlet 150 C"
    assert split_request(text) == ()
    pieces = split_request(f"{text}, then estimate the shrinkage of the porcelain ceramic material")
    assert pieces == (text, "estimate the shrinkage of the porcelain ceramic material")


def test_split_is_bounded() -> None:
    text = ". ".join(f"Create a new project board number {i} for the team" for i in range(20))
    pieces = split_request(text)
    assert len(pieces) == MAX_PARTS
    assert pieces[-1].count("Create a new project board") == 20 - (MAX_PARTS - 1)
    assert split_request(text, max_parts=3)[:2] == pieces[:2]


def test_no_cut_inside_quotes_or_a_hyphenated_word() -> None:
    """A joining word, a comma before an action verb or a sentence end inside quotes (straight or curly, single or
    double) or inside a hyphenated word is part of what is quoted or named, not a cut; the words stay as written."""
    for quoted in (
        "'salt and pepper'",
        "\u201csalt and pepper\u201d",
        "\u2018salt and pepper\u2019",
        '"salt and pepper"',
    ):
        assert split_request(f"search for {quoted} shrimp recipes and then email the list to Bob") == (
            f"search for {quoted} shrimp recipes",
            "email the list to Bob",
        )
    assert (
        split_request(
            'post "backup of the billing database and cleanup of old invoices finished" to the ops channel in Slack'
        )
        == ()
    )
    assert split_request("find rock-and-roll concerts in Berlin and book two tickets for friday") == (
        "find rock-and-roll concerts in Berlin",
        "book two tickets for friday",
    )
    assert split_request("create a Jira ticket titled 'drag-and-drop upload fails and then crashes' in WEB") == ()
    assert split_request(
        'post "Deploy done. Tests green." to the release channel in Slack and then close the Jira ticket'
    ) == ('post "Deploy done. Tests green." to the release channel in Slack', "close the Jira ticket")
    assert split_request('set my Slack status to "offline, call me after lunch" and then book a meeting room') == (
        'set my Slack status to "offline, call me after lunch"',
        "book a meeting room",
    )
    # an apostrophe opens or closes no quote: "users' files" and "'90s" do not hide the "and then" between them
    assert split_request("play '90s hits on Spotify and then back up the users' files to Dropbox") == (
        "play '90s hits on Spotify",
        "back up the users' files to Dropbox",
    )
    assert split_request("archive the users' files and then send 'done and dusted' to the team channel") == (
        "archive the users' files",
        "send 'done and dusted' to the team channel",
    )
    assert split_request(
        "rename the channel to \u2018Bob\u2019s team and friends\u2019 and then invite Alice to the channel"
    ) == (
        "rename the channel to \u2018Bob\u2019s team and friends\u2019",
        "invite Alice to the channel",
    )
    text = "I don't need the drafts anymore, delete the users' files and then notify the admins in Slack"
    assert split_request(text) == (
        "I don't need the drafts anymore delete the users' files",
        "notify the admins in Slack",
    )


def test_and_or_is_no_joining_word() -> None:
    """ "and/or" (or "or/and", with or without spaces around the slash) is one word, not an "and" that joins two
    actions: it stays as written in its piece."""
    assert split_request("send the report to Alice and/or Bob") == ()
    assert split_request("send the report to Alice and/or Bob and then book a meeting room") == (
        "send the report to Alice and/or Bob",
        "book a meeting room",
    )
    for joined in ("and/or", "And / Or", "or/and"):
        text = f"email the report to the whole team {joined} post the summary in the Slack channel"
        assert split_request(text) == (), text


@pytest.mark.parametrize("unit", [" 'a", " 'a'b", ' "a', " \u2018a\u2019b", " \u201ca", "a-", "a"])
def test_quotes_keep_the_split_linear(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest request of openings with no close, apostrophes, hyphens or one long word has its quotes and
    hyphenated words found reading each character a bounded number of times (a search for the closing quote from
    every opening, or for a hyphenated word from every letter, read the rest of the text each time: 10 s)."""
    text = (unit * (MAX_QUERY_CHARS // len(unit) + 1))[:MAX_QUERY_CHARS]
    expected = split_oracle.split_request(text)
    read = {"chars": 0}

    class Counted:
        """A compiled pattern that counts the characters each call may read: from ``pos`` to the end."""

        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def _count(self, string: str, pos: int, bounded: bool) -> None:
            read["chars"] += len(self.pattern.pattern) if bounded else len(string) - pos

        def finditer(self, string: str, pos: int = 0) -> Iterator[re.Match[str]]:
            self._count(string, pos, bounded=False)
            return self.pattern.finditer(string, pos)

        def search(self, string: str, pos: int = 0) -> re.Match[str] | None:
            self._count(string, pos, bounded=False)
            return self.pattern.search(string, pos)

        def match(self, string: str, pos: int = 0) -> re.Match[str] | None:  # anchored: the pattern's length
            self._count(string, pos, bounded=True)
            return self.pattern.match(string, pos)

    quotes = tuple((mark, *(Counted(p) for p in patterns)) for mark, *patterns in _uncut._QUOTES)
    monkeypatch.setattr(_uncut, "_QUOTES", quotes)
    monkeypatch.setattr(_uncut, "_HYPHENATED", Counted(_uncut._HYPHENATED))
    assert split_request(text) == expected
    assert read["chars"] <= 20 * len(text), read


# --- the linear splitter splits as the one it replaced (tests/split_oracle.py) ---------------------------------------

# Words, marks and spaces the splitter reads: joining words, verbs, subjects, quotes, hyphens, commas, sentence ends,
# titles, numbers, line breaks and other spaces.
TOKENS = (
    "and then also finally lastly after that afterwards plus additionally as well as Then Finally Also And "
    ", . ! ? ; : / and/or or/and send email report to Alice Bob the I we you would can could do am are i'd "
    "i'm we're please hi there ok so now Specifically this that for purpose task API model tools Which recommend "
    "suggest Dr. Mr. 3.5 50000.0. e.g. find search file create delete update list get check book rock-and-roll "
    "drag-and-drop ' \" \u201c \u201d \u2018 \u2019 - \u2010 users' don't '90s The It My A x y drums vocals bass kg/s "
    "100 it's"
).split(" ") + [
    " ",
    "  ",
    "\n",
    "\t",
    "\u00a0",
    "\u2028",
    "\x0b",
    "\r\n",
    ", and",
    "and,",
    " , ",
    "'salt and pepper'",
    '"Done. Tests green."',
    "x-and-y",
]
SEPARATORS = (" ", " ", " ", "", "  ", ", ", "\n", " \t ")


def generated_request(rng: random.Random) -> str:
    return "".join(rng.choice(TOKENS) + rng.choice(SEPARATORS) for _ in range(rng.randint(1, 40)))


def bench_requests() -> list[str]:
    requests = []
    for path in sorted(BENCH.glob("*/*.jsonl")):
        if path.name != "tools.jsonl":
            for row in map(json.loads, filter(str.strip, path.read_text(encoding="utf-8").splitlines())):
                requests += [row["query"]] if "query" in row else [turn["query"] for turn in row.get("turns", ())]
    return requests


@pytest.mark.skipif(not BENCH.exists(), reason="shared benchmarks not present")
def test_the_bench_requests_split_as_before() -> None:
    requests = bench_requests()
    assert len(requests) > 5000
    assert sum(bool(split_request(r)) for r in requests) > 500  # many are compound
    for request in requests:
        assert split_request(request) == split_oracle.split_request(request), request


def test_generated_requests_split_as_before() -> None:
    rng = random.Random(20240611)
    for _ in range(3000):
        request = generated_request(rng)
        for max_parts in (MAX_PARTS, 2):
            expected = split_oracle.split_request(request, max_parts=max_parts)
            assert split_request(request, max_parts=max_parts) == expected, request


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(TOKENS), st.text(alphabet=",.;!?'\"- \n\t\u00a0aIdn", max_size=6)), max_size=30),
    st.lists(st.sampled_from(SEPARATORS), min_size=30, max_size=30),
)
def test_any_request_splits_as_before(tokens: list[str], separators: list[str]) -> None:
    request = "".join(token + separator for token, separator in zip(tokens, separators))
    assert split_request(request) == split_oracle.split_request(request)


@pytest.mark.parametrize("unit", ["I then ", "it then ", "do it and then ", "x and y, ", "a, b and ", "we then "])
def test_a_long_request_is_read_a_bounded_number_of_times(unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest request of thousands of joining words has its words counted and its joins checked for a verb
    around them reading each character a bounded number of times; the pieces were rebuilt and counted again as they
    grew, and each join read the sentence back to the last cut (0.5 to 3 s)."""
    text = (unit * (MAX_QUERY_CHARS // len(unit) + 1))[:MAX_QUERY_CHARS]
    expected = split_oracle.split_request(text)
    read = {"words": 0, "verb": 0}
    count_words, inside_verb = _split._content_words, _split._INSIDE_VERB

    class CountedVerb:
        def search(self, string: str) -> re.Match[str] | None:
            read["verb"] += len(string)
            return inside_verb.search(string)

    def counted_words(string: str) -> int:
        read["words"] += len(string)
        return count_words(string)

    monkeypatch.setattr(_split, "_content_words", counted_words)
    monkeypatch.setattr(_split, "_INSIDE_VERB", CountedVerb())
    assert split_request(text) == expected
    assert read["words"] <= 3 * len(text) and read["verb"] <= 3 * len(text), read
