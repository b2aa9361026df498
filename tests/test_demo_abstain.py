"""The demo catalog with abstention (`toolstore route --abstain` on what `toolstore demo` loads): a new user's first,
short and generic requests are routed, and requests no demo tool serves are still abstained on."""

from __future__ import annotations

import json

from toolstore import LocalEmbedder, ToolStore
from toolstore.cli.demo import DEMO_CATALOG, DEMO_DIR, load_demo

#: Short requests a new user types first, with the tools any of which serves each. None is an intent example of the
#: demo (checked below), so routing them tests what the examples generalise to, not a lookup.
SHORT_REQUESTS = {
    "create an issue": {"github.create_issue", "jira.create_issue", "linear.create_issue"},
    "send a message": {"slack.send_message", "slack.send_direct_message"},
    "list my files": {"google_drive.list_files", "dropbox.list_folder"},
    "send an email": {"gmail.send_email"},
    "schedule a meeting": {"google_calendar.create_event"},
    "find a document": {"google_drive.search_files", "dropbox.search", "notion.search", "confluence.search_content"},
    "comment on the issue": {"github.comment_on_issue", "jira.add_comment", "linear.add_comment"},
    "close the ticket": {"jira.transition_issue", "linear.update_issue"},
    "run the workflow": {"github.trigger_workflow"},
    "search code": {"github.search_code"},
}
UNRELATED = ("write me a poem about cheese", "tell me a joke", "what is the capital of France", "how do I bake bread")


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def test_the_short_requests_are_not_intent_examples_of_the_demo() -> None:
    lines = (DEMO_DIR / "examples.jsonl").read_text(encoding="utf-8").splitlines()
    examples = {_norm(json.loads(line)["query"]) for line in lines}
    assert not {_norm(q) for q in SHORT_REQUESTS} & examples


def test_the_demo_routes_short_generic_requests_and_abstains_on_unrelated_ones(dsn: str) -> None:
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog=DEMO_CATALOG) as store:
        load_demo(store)
        for request, tools in SHORT_REQUESTS.items():
            result = store.route(request, k=3, abstain=True)
            assert result.abstention is not None and result.abstention.model == "default-examples"
            assert not result.abstained, (request, result.abstention.as_dict())
            assert result.abstention.top in tools, (request, result.abstention.top)
        for request in UNRELATED:
            result = store.route(request, k=3, abstain=True)
            assert result.abstained, (request, result.abstention and result.abstention.as_dict())
