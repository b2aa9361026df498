"""``toolstore drop-catalog NAME``: the CLI's way to delete a catalog (a misspelt import's, one `eval --keep` kept),
which only ``store.drop_catalog()`` in Python could do before."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from terminal import answered, controlling, drawn_until, read_all

from toolstore import (
    Anchor,
    CatalogInfo,
    DatabaseError,
    HashingEmbedder,
    IntentExample,
    SessionCall,
    Tool,
    ToolStore,
    UnknownCatalogError,
    _housekeeping,
)
from toolstore.cli import cli

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]
EXAMPLES = [{"qid": "t1", "query": "send a note by email", "relevant": ["gmail.send_email"]}]


def invoke(dsn: str, *args: str) -> Result:
    """The CLI on ``dsn`` with the hashing embedder, stdout and stdin not a terminal."""
    return CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args])


def run(dsn: str, *args: str, answer: bytes | None = None) -> tuple[int, str, str]:
    """The CLI as a process: exit status, stdout, stderr. With ``answer``, its stdin and stdout are a terminal on
    which the user types ``answer``; else stdin is empty and stdout a pipe."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args]
    if answer is None:
        proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, text=True, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr
    return answered(cmd, answer)


def fill(dsn: str, tmp_path: Path, *catalogs: str) -> None:
    """Each of ``catalogs`` with the two tools and one intent example."""
    tools, examples = tmp_path / "tools.jsonl", tmp_path / "train.jsonl"
    tools.write_text("".join(json.dumps(t) + "\n" for t in TOOLS))
    examples.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES))
    for name in catalogs:
        for args in (("import", str(tools)), ("examples", str(examples))):
            result = invoke(dsn, "-c", name, *args)
            assert result.exit_code == 0, result.output


def catalogs(dsn: str) -> dict[str, tuple[int, int]]:
    with ToolStore(dsn, embedder=None, create=False, catalog="default") as store:
        return {c["name"]: (c["n_tools"], c["n_examples"]) for c in store.catalogs()}


def test_drop_catalog_with_yes_drops_the_named_catalog_and_says_what_it_held(dsn: str, tmp_path: Path) -> None:
    """There was no such command: a user had to write Python to drop a catalog."""
    fill(dsn, tmp_path, "cmr", "crm")
    result = invoke(dsn, "drop-catalog", "cmr", "--yes")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"version": 1, "dropped": "cmr", "tools": 2, "examples": 1}
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_drop_catalog_drops_the_catalog_named_not_the_one_of_the_catalog_option(dsn: str, tmp_path: Path) -> None:
    """NAME is the only catalog it drops: -c (or $TOOLSTORE_CATALOG, which a shell may hold for another purpose)
    names none, and no NAME (or an empty one: a script's unset variable) is a usage error that drops nothing."""
    fill(dsn, tmp_path, "default", "crm", "cmr")
    result = invoke(dsn, "-c", "crm", "drop-catalog", "cmr", "--yes")
    assert result.exit_code == 0, result.output
    for args in (("-c", "crm", "drop-catalog", "--yes"), ("drop-catalog", "", "--yes")):
        result = CliRunner(env={"TOOLSTORE_CATALOG": "crm"}).invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args])
        assert result.exit_code == 2, result.output
    assert catalogs(dsn) == {"default": (2, 1), "crm": (2, 1)}


def test_ctrl_c_at_the_question_says_aborted_on_a_line_of_its_own(dsn: str, tmp_path: Path) -> None:
    """Ctrl-C typed at drop-catalog's question (click's confirm: an Abort, without the blank line click's main writes
    past ``^C``) drew "aborted" right after the echoed ``^C``, "[y/N]: ^Caborted"; it is on a line of its own, exit
    130, and the catalog is kept."""
    fill(dsn, tmp_path, "crm")
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "drop-catalog", "crm"]
    proc, leader = controlling(cmd)
    asked = drawn_until(leader, "? [y/N]: ")
    os.write(leader, b"\x03")  # Ctrl-C typed
    drawn = asked + read_all(leader).replace("\r\n", "\n")
    assert (proc.wait(timeout=300), drawn) == (
        130,
        "drop catalog 'crm' (2 tools, 1 intent example)? [y/N]: ^C\naborted\n",
    )
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_end_of_input_at_the_question_ends_its_line_before_aborted(dsn: str, tmp_path: Path) -> None:
    """Ctrl-D (end of input, which a terminal does not echo) at drop-catalog's question drew "[y/N]: aborted" on the
    question's line; the line is ended first, then "aborted", exit 130 as for Ctrl-C, and the catalog is kept."""
    fill(dsn, tmp_path, "crm")
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "drop-catalog", "crm"]
    proc, leader = controlling(cmd)
    asked = drawn_until(leader, "? [y/N]: ")
    os.write(leader, b"\x04")  # Ctrl-D typed
    drawn = asked + read_all(leader).replace("\r\n", "\n")
    assert (proc.wait(timeout=300), drawn) == (
        130,
        "drop catalog 'crm' (2 tools, 1 intent example)? [y/N]: \naborted\n",
    )
    assert catalogs(dsn) == {"crm": (2, 1)}


@pytest.mark.parametrize("key", [b"\x03", b"\x04"], ids=["ctrl-c", "ctrl-d"])
def test_a_question_left_unanswered_ends_its_line_in_a_log_too(dsn: str, tmp_path: Path, key: bytes) -> None:
    """With stderr redirected (``2>log``), the question is written there and Ctrl-C at it, which the terminal echoes
    elsewhere, left the log's line "[y/N]: aborted"; a question without an answer ends its line before "aborted",
    wherever stderr goes, exit 130."""
    fill(dsn, tmp_path, "crm")
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "drop-catalog", "crm"]
    proc, leader = controlling(cmd, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    asked = b""
    while not asked.endswith(b"? [y/N]: "):
        asked += proc.stderr.read1(4096)  # type: ignore[attr-defined]
    os.write(leader, key)
    said = asked + proc.stderr.read()
    read_all(leader)
    assert (proc.wait(timeout=300), said.decode()) == (
        130,
        "drop catalog 'crm' (2 tools, 1 intent example)? [y/N]: \naborted\n",
    )
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_a_ctrl_c_whose_handler_ran_before_the_question_was_read_still_aborts(dsn: str, tmp_path: Path) -> None:
    """Under load the test above hung for 10 minutes on "[y/N]: ^C": the SIGINT came after the question was written
    but before click's input() began its read() of the terminal (perf's trace: the write, the signal delivered to the
    main thread, then the read, which never ended), so Python's C handler noted it and no read was interrupted to run
    it. Made certain here: the SIGINT goes to another thread of the command (Linux's tgkill), whose C handler notes it
    the same way while the main thread waits for the answer. The question is now read so that it ends the wait."""
    tgkill = getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)
    if not sys.platform.startswith("linux") or tgkill is None:
        pytest.skip("needs Linux's tgkill, to signal one thread of another process")
    fill(dsn, tmp_path, "crm")
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "drop-catalog", "crm"]
    proc, leader = controlling(cmd)
    drawn_until(leader, "? [y/N]: ")
    other = next(t for t in _threads(proc.pid) if t != proc.pid)  # the store's pool has threads of its own
    assert tgkill(proc.pid, other, signal.SIGINT) == 0, os.strerror(ctypes.get_errno())
    drawn = read_all(leader).replace("\r\n", "\n")  # hung before: the read went on, the command never ended
    assert (proc.wait(timeout=300), drawn.strip()) == (130, "aborted")
    assert catalogs(dsn) == {"crm": (2, 1)}


def _threads(pid: int) -> list[int]:
    """The threads of process ``pid`` that do not block SIGINT."""
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        blocked = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
        if not blocked & (1 << (signal.SIGINT - 1)):
            found.append(int(tid))
    return found


def test_drop_catalog_off_a_terminal_without_yes_is_refused_in_one_line(dsn: str, tmp_path: Path) -> None:
    """Destructive, so a script (stdin not a terminal, or --json) must say --yes; the refusal is one line."""
    fill(dsn, tmp_path, "crm")
    status, out, err = run(dsn, "drop-catalog", "crm")
    assert (status, out) == (2, "")
    said = "error: dropping catalog 'crm' needs --yes when not asked on a terminal (see "  # python -m toolstore ...
    assert err.startswith(said) and err.endswith(" drop-catalog --help)\n") and err.count("\n") == 1, err
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_drop_catalog_on_a_terminal_asks_first(dsn: str, tmp_path: Path) -> None:
    """On a terminal it asks, naming the catalog and what it holds: "n" keeps it, "y" drops it and says so."""
    fill(dsn, tmp_path, "crm")
    status, drawn, err = run(dsn, "drop-catalog", "crm", answer=b"n\n")
    assert (status, err) == (130, "drop catalog 'crm' (2 tools, 1 intent example)? [y/N]: aborted\n")
    assert "dropped" not in drawn
    assert catalogs(dsn) == {"crm": (2, 1)}
    status, drawn, err = run(dsn, "drop-catalog", "crm", answer=b"y\n")
    assert status == 0, err
    assert drawn.endswith("dropped crm (2 tools, 1 intent example)\n"), drawn
    assert catalogs(dsn) == {}


def test_drop_catalog_of_an_unknown_catalog_is_the_librarys_error_naming_it(dsn: str, tmp_path: Path) -> None:
    fill(dsn, tmp_path, "crm")
    result = invoke(dsn, "drop-catalog", "cmr", "--yes")
    assert isinstance(result.exception, UnknownCatalogError), result.output
    assert "no catalog named 'cmr'" in str(result.exception)
    status, _, err = run(dsn, "drop-catalog", "cmr", "--yes")
    assert status == 1 and err.startswith("error: no catalog named 'cmr'") and err.count("\n") == 1, err
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_drop_catalog_by_a_role_whose_grant_does_not_allow_it_is_the_librarys_error(
    dsn: str, tmp_path: Path, login_role: tuple[str, str]
) -> None:
    """A read-only role sees the catalog but cannot drop it: the library's error, one line, and nothing dropped."""
    role, role_dsn = login_role
    fill(dsn, tmp_path, "crm")
    assert invoke(dsn, "-c", "crm", "grant", role).exit_code == 0
    result = invoke(role_dsn, "drop-catalog", "crm", "--yes")
    assert isinstance(result.exception, DatabaseError), result.output
    assert "grant ROLE --write" in str(result.exception)
    status, _, err = run(role_dsn, "drop-catalog", "crm", "--yes")
    said = "error: database error: permission denied for table catalogs: on toolstore's tables a role's grant decides"
    assert status == 1 and err.startswith(said) and err.count("\n") == 1, err
    assert catalogs(dsn) == {"crm": (2, 1)}


def test_drop_catalog_reports_the_counts_of_what_it_dropped(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts it said were read before the drop, not under its lock: a tool a writer added in between was dropped
    but not counted. They are the drop's own now (``store.drop_catalog()`` returns them)."""
    fill(dsn, tmp_path, "crm")
    lock, raced = _housekeeping.lock_catalog, []

    def write_then_lock(conn: Any, name: str, **options: Any) -> CatalogInfo:  # a writer just before the drop's lock
        if not raced:
            raced.append(name)
            with ToolStore(dsn, embedder=HashingEmbedder(), create=False, catalog=name) as writer:
                writer.upsert([Tool(id="gmail.draft", name="draft", provider="gmail", description="Draft an email")])
        return lock(conn, name, **options)

    monkeypatch.setattr(_housekeeping, "lock_catalog", write_then_lock)
    result = invoke(dsn, "drop-catalog", "crm", "--yes")
    assert result.exit_code == 0, result.output
    assert raced == ["crm"]
    assert json.loads(result.output) == {"version": 1, "dropped": "crm", "tools": 3, "examples": 1}
    assert catalogs(dsn) == {}
    monkeypatch.undo()
    fill(dsn, tmp_path, "crm")
    with ToolStore(dsn, embedder=None, create=False, catalog="crm") as store:
        dropped = store.drop_catalog()
    assert (dropped.name, dropped.n_tools, dropped.n_examples) == ("crm", 2, 1)


@pytest.mark.parametrize(
    "args",
    [
        ("drop-catalog", "nope", "--yes"),
        ("-c", "nope", "remove", "gmail.send_email"),
        ("-c", "nope", "export"),
        ("-c", "nope", "anchors", "list"),
        ("-c", "nope", "anchors", "remove", "1"),
        ("-c", "nope", "sessions", "list"),
    ],
)
def test_a_read_or_removal_of_an_unknown_catalog_says_where_the_catalogs_are_not_to_create_it(
    dsn: str, args: tuple[str, ...]
) -> None:
    """A command that only reads or removes said "no catalog named 'nope'; create it by importing tools into it",
    advice that makes no sense for a drop; it now says where the catalogs' names are, and creates nothing."""
    status, _, err = run(dsn, *args)
    assert status == 1 and err.startswith("error: no catalog named 'nope'; "), err
    assert "create it" not in err and "`toolstore catalogs` list the catalogs there" in err, err
    assert "nope" not in catalogs(dsn)


def test_a_route_or_an_addition_to_an_unknown_catalog_says_to_create_it(dsn: str) -> None:
    """Where creating the catalog is what the caller wants (a route, examples or anchors added, calls logged or
    sessions imported, which said to list the catalogs, as a read does), the advice is to create it."""
    store = ToolStore(dsn, embedder=HashingEmbedder(), catalog="nope")
    calls = [
        lambda: store.route("send an email"),
        lambda: store.add_examples([IntentExample(query="send a note by email", tool_id="gmail.send_email")]),
        lambda: store.add_anchors([Anchor(pattern="email", tool="gmail.send_email")]),
        lambda: store.record_calls("s1", ["gmail.send_email"]),
        lambda: store.new_calls("s1", ["c1"]),
        lambda: store.record_new_calls("s1", ["c1"], [SessionCall("gmail.send_email", call_id="c1")]),
        lambda: store.import_sessions({"s1": ["gmail.send_email"]}),
        lambda: store.drop_catalog(),
        lambda: store.sessions(),
    ]
    hints = []
    for call in calls:
        with pytest.raises(UnknownCatalogError, match="no catalog named 'nope'; ") as caught:
            call()
        hints.append("create it by importing tools into it" in str(caught.value))
    store.close()
    assert hints == [True] * 7 + [False, False]
    assert "nope" not in catalogs(dsn)


def test_sessions_import_into_an_unknown_catalog_says_to_create_it(dsn: str, tmp_path: Path) -> None:
    """`sessions import` into a catalog never made said to list the catalogs; it says to import tools into it."""
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps({"sid": "s1", "turns": [{"query": "mail it", "relevant": ["gmail.send_email"]}]}) + "\n")
    status, _, err = run(dsn, "-c", "nope", "sessions", "import", str(path))
    assert (status, err) == (1, "error: no catalog named 'nope'; create it by importing tools into it\n")
    assert "nope" not in catalogs(dsn)
