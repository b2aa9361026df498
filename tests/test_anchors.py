"""Anchors: storage (add, list, remove, import: all or nothing, refused at write time) and the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_cli import run

from toolstore import Anchor, InvalidInputError, Tool, ToolStore
from toolstore._anchors import TRIAL_MS, adversarial_requests
from toolstore._input import MAX_PATTERN_CHARS, MAX_QUERY_CHARS

TOOLS = [
    Tool(id="slack.send_message", name="send_message", provider="slack", description="Post a message to a channel"),
    Tool(id="gmail.send_email", name="send_email", provider="gmail", description="Send an email to someone"),
    Tool(id="linear.create_issue", name="create_issue", provider="linear", description="File an issue in Linear"),
]


@pytest.fixture
def catalog(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    return store


def test_add_list_remove(catalog: ToolStore) -> None:
    written = catalog.add_anchors(
        [Anchor(r"\bticket\b", "linear.create_issue", 0.5), Anchor("e-?mail", "gmail.send_email")]
    )
    assert [(a.pattern, a.tool, a.boost) for a in written] == [
        (r"\bticket\b", "linear.create_issue", 0.5),
        ("e-?mail", "gmail.send_email", 1.0),
    ]
    assert all(a.id is not None for a in written)
    assert catalog.anchors() == written
    # the same pattern and tool again: its boost changes, no second rule
    again = catalog.add_anchors([Anchor(r"\bticket\b", "linear.create_issue", 2.0)])
    assert again[0].id == written[0].id and again[0].boost == 2.0
    assert len(catalog.anchors()) == 2
    # twice in one call (or file): one rule, the later boost
    twice = [Anchor(r"\bticket\b", "linear.create_issue", 3.0), Anchor(r"\bticket\b", "linear.create_issue", -1.0)]
    assert [(a.id, a.boost) for a in catalog.add_anchors(twice)] == [(written[0].id, -1.0)]
    assert len(catalog.anchors()) == 2
    assert catalog.remove_anchors([written[1].id]) == 1  # type: ignore[list-item]
    assert [a.tool for a in catalog.anchors()] == ["linear.create_issue"]
    with pytest.raises(InvalidInputError, match="no anchor with id 999999"):
        catalog.remove_anchors([written[0].id, 999999])  # type: ignore[list-item]
    assert len(catalog.anchors()) == 1  # all or nothing
    catalog.add_anchors([Anchor("slack", "slack.send_message")], replace=True)
    assert [a.pattern for a in catalog.anchors()] == ["slack"]


@pytest.mark.parametrize(
    ("anchor", "message"),
    [
        (Anchor("x", "nope.tool"), "not in catalog 'test': 'nope.tool'"),
        (Anchor("x", "gmail.send_email", 0), "boost must be a non-zero number"),
        (Anchor("x", "gmail.send_email", float("nan")), "boost must be"),
        (Anchor("x", "gmail.send_email", 11), "boost must be"),
        (Anchor("x", "gmail.send_email", True), "boost must be"),  # type: ignore[arg-type]
        (Anchor("x", "gmail.send_email", 10**400), "boost must be"),  # past a float's range
        (Anchor("x" * (MAX_PATTERN_CHARS + 1), "gmail.send_email"), "the limit is 500"),
        (Anchor("", "gmail.send_email"), "pattern is empty"),
        (Anchor("(unclosed", "gmail.send_email"), "not a regular expression Postgres accepts: parentheses"),
        (Anchor("a{1,200}{1,200}", "gmail.send_email"), "not a regular expression Postgres accepts"),
        (Anchor("(a{1,200}){1,200}b", "gmail.send_email"), "not a regular expression Postgres accepts|pathological"),
        (Anchor("x*", "gmail.send_email"), "matches the empty string"),
        (Anchor(r"(.*)*\1$", "gmail.send_email"), "back-reference"),
        (Anchor("ok", 5), "tool must be a string"),  # type: ignore[arg-type]
    ],
)
def test_bad_anchors_are_refused_and_nothing_is_written(catalog: ToolStore, anchor: Anchor, message: str) -> None:
    good = Anchor("slack", "slack.send_message")
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace("{", r"\{")):
        catalog.add_anchors([good, anchor])
    assert catalog.anchors() == []


def test_a_catastrophic_backtracking_pattern_is_refused_within_the_trial_budget(catalog: ToolStore) -> None:
    """``(.*)*\\1$`` runs for seconds on a long request in Postgres; the back-reference alone refuses it. Without
    the back-reference check, the trial match must catch such a pattern within its budget."""
    with catalog.connection() as conn:
        conn.execute("set statement_timeout = '2s'")
        with pytest.raises(Exception, match="statement timeout"):
            conn.execute(r"select %s ~* '(.*)*\1$'", (adversarial_requests(r"(.*)*\1$")[0],))
        conn.execute("reset statement_timeout")
    from toolstore import _anchors

    started = time.perf_counter()
    with catalog.connection() as conn, pytest.raises(InvalidInputError, match="pathological"), conn.transaction():
        _anchors._check_pattern(conn, Anchor(r"(.*)*\1$", "gmail.send_email"), "anchor")
    assert time.perf_counter() - started < 30 * TRIAL_MS / 1000  # refused by the timeout, not after the full match
    with catalog.connection() as conn:
        assert conn.execute("show statement_timeout").fetchone() == ("0",)  # the trial's timeout does not linger


def test_nested_quantifiers_postgres_runs_fast_are_accepted(catalog: ToolStore) -> None:
    """Postgres' engine runs ``(a+)+$`` in linear time (no backtracking): refusing it would be wrong."""
    assert catalog.add_anchors([Anchor("(a+)+$", "slack.send_message")])[0].pattern == "(a+)+$"
    assert all(len(r) == MAX_QUERY_CHARS for r in adversarial_requests("(a+)+$"))


def test_an_anchor_goes_with_its_tool(catalog: ToolStore) -> None:
    catalog.add_anchors([Anchor("mail", "gmail.send_email"), Anchor("slack", "slack.send_message")])
    catalog.remove("gmail.send_email")
    assert [a.tool for a in catalog.anchors()] == ["slack.send_message"]
    catalog.upsert(TOOLS[:2], prune=True)  # linear pruned; slack updated in place keeps its anchor
    assert [a.tool for a in catalog.anchors()] == ["slack.send_message"]


def test_import_from_json_is_all_or_nothing(catalog: ToolStore, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            [
                {"pattern": "mail", "tool": "gmail.send_email", "boost": 0.3},
                {"pattern": "x", "tool": "slack.send_message"},
            ]
        )
    )
    assert [a.boost for a in catalog.add_anchors(good)] == [0.3, 1.0]
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "anchors": [
                    {"pattern": "ticket", "tool": "linear.create_issue"},
                    {"pattern": "(", "tool": "gmail.send_email"},
                ]
            }
        )
    )
    with pytest.raises(InvalidInputError, match="anchor #2 pattern"):
        catalog.add_anchors(bad, replace=True)
    assert [a.pattern for a in catalog.anchors()] == ["mail", "x"]
    for text, message in [
        ("{", "line 1, column 2: invalid JSON"),
        ('{"rules": []}', 'expected a list of anchors or an object with "anchors"'),
        ('[{"pattern": "x"}]', 'anchor #1: needs "pattern" and "tool"'),
        ('[{"pattern": "x", "tool": "t", "weight": 2}]', "unknown field"),
        ('[{"pattern": "x", "tool": "t", "boost": "high"}]', "anchor #1 boost must be"),
        ('[{"pattern": "x", "tool": "t", "boost": 1' + "0" * 400 + "}]", "anchor #1 boost must be"),
        ("[3]", "anchor #1 must be an object"),
    ]:
        bad.write_text(text)
        with pytest.raises(InvalidInputError, match=message):
            catalog.add_anchors(bad)
    assert [a.pattern for a in catalog.anchors()] == ["mail", "x"]


def test_cli_anchors(catalog: ToolStore, dsn: str, tmp_path: Path) -> None:
    out = run(
        dsn,
        "-c",
        "test",
        "anchors",
        "add",
        "--pattern",
        "ticket|bug",
        "--tool",
        "linear.create_issue",
        "--boost",
        "0.7",
    )
    added = json.loads(out.stdout)["anchors"]
    assert [(a["pattern"], a["tool"], a["boost"]) for a in added] == [("ticket|bug", "linear.create_issue", 0.7)]
    listed = json.loads(run(dsn, "-c", "test", "anchors", "list").stdout)
    assert listed["version"] == 1 and listed["anchors"] == added
    path = tmp_path / "anchors.json"
    path.write_text(json.dumps(listed))  # what list prints imports back
    json.loads(run(dsn, "-c", "test", "anchors", "import", str(path), "--replace").stdout)
    assert [a.pattern for a in catalog.anchors()] == ["ticket|bug"]
    bad = run(dsn, "-c", "test", "anchors", "add", "--pattern", "(x", "--tool", "linear.create_issue", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("error: anchor #1 pattern '(x' is not a regular expression")
    new_id = catalog.anchors()[0].id
    assert json.loads(run(dsn, "-c", "test", "anchors", "remove", str(new_id)).stdout)["removed"] == 1
    assert catalog.anchors() == []


# -- anchors inside the route statement ----------------------------------------------------------------------------


def test_an_anchor_boosts_its_tool_case_insensitively_and_explain_shows_it(catalog: ToolStore) -> None:
    text = "Post the TICKET number in the channel"
    before = catalog.route(text, k=3)
    assert before.ids[0] != "linear.create_issue"
    (anchor,) = catalog.add_anchors([Anchor(r"\mticket\M", "linear.create_issue", 1.0)])
    after = catalog.route(text, k=3)
    top = after.tools[0]
    assert top.tool.id == "linear.create_issue"
    assert top.adjustments.get("anchor_boost", 0.0) == 1.0 and top.anchors == (anchor.id,)
    old = next((r.score for r in before.tools + before.skipped if r.tool.id == "linear.create_issue"), 0.0)
    assert top.score == pytest.approx(old + 1.0) if old else top.score >= 1.0
    assert all(r.adjustments.get("anchor_boost", 0.0) == 0 and r.anchors == () for r in after.tools[1:])
    assert (
        catalog.route("nothing about it", k=3).tools[0].adjustments.get("anchor_boost", 0.0) == 0
    )  # the pattern does not match


def test_an_anchored_tool_no_retriever_returned_still_appears(catalog: ToolStore) -> None:
    text = "zzqx"  # no term of any tool: without an anchor nothing is routed
    assert catalog.route(text, k=3, weights={"dense": 0, "intent": 0}).ids == []
    catalog.add_anchors([Anchor("^zz", "gmail.send_email", 0.5), Anchor("q", "gmail.send_email", 0.25)])
    result = catalog.route(text, k=3, weights={"dense": 0, "intent": 0})
    assert result.ids == ["gmail.send_email"]
    assert result.tools[0].adjustments.get("anchor_boost", 0.0) == 0.75 and len(result.tools[0].anchors) == 2
    assert result.tools[0].signals.name is None
    # filters apply to anchored tools too
    assert catalog.route(text, k=3, weights={"dense": 0, "intent": 0}, providers=["slack"]).ids == []


def test_a_negative_anchor_demotes(catalog: ToolStore) -> None:
    text = "send a message"
    first = catalog.route(text, k=3).ids[0]
    catalog.add_anchors([Anchor("message", first, -2.0)])
    result = catalog.route(text, k=3)
    assert first not in result.ids or result.ids[-1] == first


def test_a_busy_server_does_not_make_a_plain_pattern_pathological(
    catalog: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load every match slows alike: a clock on which each trial match takes 150 ms (over TRIAL_MS) refuses a
    plain word only if a plain word's own match, timed just before, is not as slow."""
    from toolstore import _anchors

    ticks = iter(range(1000))
    monkeypatch.setattr(_anchors, "time", SimpleNamespace(perf_counter=lambda: next(ticks) * 0.15))
    with catalog.connection() as conn, conn.transaction():
        _anchors._check_pattern(conn, Anchor("slack", "slack.send_message"), "anchor")  # both trials took 150 ms
    slow = iter([0.0, 0.001, 0.0, 0.15] * _anchors.TRIAL_TRIES)  # the reference 1 ms, the pattern 150 ms, each try
    monkeypatch.setattr(_anchors, "time", SimpleNamespace(perf_counter=lambda: next(slow)))
    with catalog.connection() as conn, pytest.raises(InvalidInputError, match="took over 100 ms"), conn.transaction():
        _anchors._check_pattern(conn, Anchor("slack", "slack.send_message"), "anchor")
