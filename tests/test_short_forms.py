"""Short forms in requests (``dm``, ``PRs``, ``gh``, a request starting with ``new``): the request's lexical text spells
them out, so a tool whose documents use the full words is found by the way people type."""

from __future__ import annotations

import pytest

from toolstore import LocalEmbedder, Tool, ToolStore
from toolstore._text import SHORT_FORMS, query_text, with_short_forms
from toolstore.cli.demo import DEMO_CATALOG, load_demo


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        ("slack dm alice", "direct message"),
        ("list my open PRs", "pull request"),
        ("gh issues assigned to me", "github"),
        ("is the DB up?", "database"),
        ("new jira ticket", "create"),
        ("New folder in drive", "create"),
        ("page the oncall", "on-call"),
        ("read the README", "repository file"),
    ],
)
def test_a_request_gets_the_words_of_its_short_forms(request_: str, words: str) -> None:
    text = query_text(request_)
    assert text.startswith(request_) and text.endswith(" " + words)


@pytest.mark.parametrize(
    "request_",
    ["admin prism drama", "what's new in the release", "renew my docker subscription", "the dmv office", "news"],
)
def test_words_that_only_contain_a_short_form_are_left_as_they_are(request_: str) -> None:
    assert with_short_forms(request_) == request_


def test_each_short_form_is_one_lower_case_word_spelled_out_in_other_words() -> None:
    for short, full in SHORT_FORMS.items():
        assert short.isalnum() and short == short.lower(), short
        assert short not in full.split(), short


def _tool(tool_id: str, description: str) -> Tool:
    return Tool(id=tool_id, name=tool_id.rpartition(".")[2], description=description, provider="vcs")


@pytest.mark.parametrize(
    ("request_", "wanted"),
    [
        ("list my prs", "vcs.list_pull_requests"),
        ("dm bob", "vcs.send_direct_message"),
        ("new note", "vcs.note_create"),
    ],
)
def test_a_short_request_routes_to_the_tool_that_spells_it_out(dsn: str, request_: str, wanted: str) -> None:
    tools = [
        _tool("vcs.list_branches", "List branches in a repository with their latest commit."),
        _tool("vcs.list_pull_requests", "List pull requests in a repository, filtered by state."),
        _tool("vcs.post_message", "Post a message to a channel of the team."),
        _tool("vcs.send_direct_message", "Send a direct message to one user."),
        _tool("vcs.note_archive", "Archive a note."),
        _tool("vcs.note_create", "Create a note."),
    ]
    with ToolStore(dsn, embedder=None, catalog="short") as store:
        store.upsert(tools)
        routed = [r.tool.id for r in store.route(request_, k=3).tools]
    assert routed[:1] == [wanted], routed


def test_the_oncall_is_the_on_call_the_tools_spell(dsn: str) -> None:
    """ "page the oncall" put the demo's notion.get_page first: "oncall" (one lexeme, ``oncal``) matched none of the
    words PagerDuty's create_incident is written with ("on-call", its keyword and description: ``on-cal``, ``call``),
    so its lexical signals saw only "page", which every page tool has in its name, and outvoted the dense and intent
    signals that ranked create_incident first. The request's lexical text spells it "on-call" too: on the demo catalog
    create_incident comes first, as it does for "page the on-call"."""
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog=DEMO_CATALOG) as store:
        load_demo(store)
        for request in ("page the oncall", "page the oncalls", "page the on-call"):
            assert store.route(request, k=3).ids[2] == "pagerduty.create_incident", request  # after the always-on two


def test_the_readme_is_a_repository_file(dsn: str) -> None:
    """ "read the README" put the demo's notion.get_page first and github.get_file_contents sixth (ranked first by
    dense): "readme" (lexeme ``readm``) is in no tool's documents, so the lexical signals saw only "read", which the
    page readers' short titles hold ("Read Notion page"). The request's lexical text says what a README is, a
    repository's file: get_file_contents comes first, as for "read the README file of the repo"."""
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog=DEMO_CATALOG) as store:
        load_demo(store)
        for request in ("read the README", "what does the README say", "readme"):
            assert store.route(request, k=3).ids[2] == "github.get_file_contents", request  # after the always-on two
