"""FILE ``-`` is stdin wherever a command reads a file (import, examples, sessions import, anchors import, eval, tune,
route --messages), read once, an empty stdin an error naming it; /dev/null is an empty file, other devices refused."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import IO, Any

import click
import pytest
from click.testing import CliRunner

from toolstore import ToolStore
from toolstore.cli import cli
from toolstore.cli.params import ReadFile, Written

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "github.create_issue", "name": "create_issue", "description": "Open an issue in a GitHub repository"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]
REQUESTS = [
    ("mail bob the report", "gmail.send_email"),
    ("email alice about lunch", "gmail.send_email"),
    ("open a bug for the crash", "github.create_issue"),
    ("file an issue in the repo", "github.create_issue"),
    ("will it rain in Paris", "weather.forecast"),
    ("forecast for Oslo tomorrow", "weather.forecast"),
]


def lines(*records: Any) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


TOOLS_JSONL = lines(*TOOLS)
TRAIN = lines(*({"qid": f"q{i}", "query": q, "relevant": [t]} for i, (q, t) in enumerate(REQUESTS)))
SESSIONS = lines(
    {"sid": "s1", "turns": [{"query": "mail bob", "relevant": ["gmail.send_email"]}]},
    {"sid": "s2", "turns": [{"query": "rain?", "relevant": ["weather.forecast"], "calls": ["weather.forecast"]}]},
)
ANCHORS = json.dumps([{"pattern": "mail", "tool": "gmail.send_email", "boost": 1.0}])
MESSAGES = json.dumps([{"role": "user", "content": "send an email to bob"}])
NEGATIVES = "book me a flight to Rome\norder a pizza\n"


def run(dsn: str, *args: str, stdin: str | int | IO[Any] = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """The command line as a process on ``dsn`` with the hashing embedder, its stdin ``stdin`` (a text is piped in)."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "-q", *args]
    piped: dict[str, Any] = {"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **piped)


def catalog_with_tools(dsn: str, tmp_path: Path, catalog: str) -> Path:
    """Catalog ``catalog`` holding :data:`TOOLS`; their file."""
    path = tmp_path / "tools.jsonl"
    path.write_text(TOOLS_JSONL)
    done = run(dsn, "-c", catalog, "import", str(path))
    assert done.returncode == 0, done.stderr
    return path


def held(dsn: str, catalog: str) -> tuple[int, int, int]:
    """The catalog's tools, intent examples and anchors."""
    with ToolStore(dsn, embedder=None, create=False, catalog=catalog) as store:
        info = store.info()
        return info.n_tools, info.n_examples, len(store.anchors())


def labelled(tmp_path: Path) -> tuple[str, str]:
    """A queries file and a sessions file."""
    queries, sessions = tmp_path / "queries.jsonl", tmp_path / "sessions.jsonl"
    queries.write_text(TRAIN)
    sessions.write_text(SESSIONS)
    return str(queries), str(sessions)


@pytest.mark.parametrize(
    "command",
    ["examples", "sessions", "anchors", "messages", "eval-tools", "eval-train", "tune", "tune-negatives"],
)
def test_dash_reads_stdin_wherever_a_file_is_read(dsn: str, tmp_path: Path, command: str) -> None:
    """`toolstore import -` read the tools from stdin, but every other command reading a file said "File '-' does not
    exist": `jq ... | toolstore examples -` failed. Each reads FILE (or the option's file) ``-`` from stdin, by its
    text, the file said as stdin; eval's --train, read twice (its requests, then its intent examples), reads stdin
    once."""
    catalog = f"stdin-{command}"
    tools = catalog_with_tools(dsn, tmp_path, catalog)
    queries, sessions = labelled(tmp_path)
    on = ("-c", catalog)
    if command == "examples":
        done = run(dsn, *on, "examples", "-", stdin=TRAIN)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) | {"catalog": None} == {
            "version": 1,
            "catalog": None,
            "file": "-",
            "examples": 6,
        }
        assert held(dsn, catalog) == (3, 6, 0)
    elif command == "sessions":
        done = run(dsn, *on, "sessions", "import", "-", stdin=SESSIONS)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["sessions"] == 2, done.stdout
    elif command == "anchors":
        done = run(dsn, *on, "anchors", "import", "-", stdin=ANCHORS)
        assert done.returncode == 0, done.stderr
        assert held(dsn, catalog) == (3, 0, 1)
    elif command == "messages":
        done = run(dsn, *on, "route", "--messages", "-", "-k", "1", stdin=MESSAGES)
        assert done.returncode == 0, done.stderr
        routed = json.loads(done.stdout)
        assert routed["query"] == "send an email to bob" and len(routed["tools"]) == 1, routed
    elif command == "eval-tools":
        done = run(dsn, "eval", "--tools", "-", "--queries", queries, "--config", "bm25", stdin=TOOLS_JSONL)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["n_queries"] == 6
    elif command == "eval-train":
        done = run(dsn, "eval", "--tools", str(tools), "--queries", queries, "--train", "-", "--tune", stdin=TRAIN)
        assert done.returncode == 0, done.stderr
        assert "tuned" in json.loads(done.stdout)["configs"]
    elif command == "tune":
        done = run(dsn, *on, "tune", "--sessions", sessions, "--examples", "-", "--dry-run", stdin=TRAIN)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["stored"] is False
    else:
        args = ("tune", "--examples", queries, "--negatives", "-", "--dry-run")
        done = run(dsn, *on, *args, stdin=NEGATIVES)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["abstain"], done.stdout


READERS = {
    "import": (("import", "-"), "tools file"),
    "examples": (("examples", "-"), "queries file"),
    "sessions": (("sessions", "import", "-"), "sessions file"),
    "anchors": (("anchors", "import", "--replace", "--allow-empty", "-"), "anchors file"),
    "messages": (("route", "--messages", "-"), "messages file"),
}


@pytest.mark.parametrize("source", ["pipe", "devnull"])
@pytest.mark.parametrize("command", READERS)
def test_an_empty_stdin_is_an_error_naming_it(dsn: str, tmp_path: Path, command: str, source: str) -> None:
    """Nothing piped in (the command before it failed: `jq` on a missing file) was, for `import -`, "/dev/stdin: file
    is empty", and "File '-' does not exist" for the others; stdin redirected from /dev/null was "not a regular file
    or a pipe". Both are one error naming stdin and what was to be piped in, exit 1, and nothing is written."""
    catalog = f"empty-{command}-{source}"
    catalog_with_tools(dsn, tmp_path, catalog)
    args, what = READERS[command]
    done = run(dsn, "-c", catalog, *args, stdin="" if source == "pipe" else subprocess.DEVNULL)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: stdin is empty: no {what} was piped in\n")
    assert held(dsn, catalog) == (3, 0, 0)


def test_a_non_blocking_pipe_on_stdin_is_read_to_its_end(dsn: str) -> None:
    """Stdin a pipe its caller left non-blocking (O_NONBLOCK, shared with this process) was read until the writer
    paused: what it had written so far was taken for the whole file (here the first tool alone was imported, exit 0).
    It is read to the writer's end, all three tools, and the caller's pipe is left non-blocking as it was."""
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    first, rest = TOOLS_JSONL.encode().split(b"\n", 1)
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "-q", "-c", "nb", "import", "-"]
    with subprocess.Popen(cmd, stdin=reader, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        os.write(writer, first + b"\n")
        deadline = time.monotonic() + 300  # a bound on a wait, not a measurement
        while unread(reader):  # the command read the first line and finds nothing more yet: the writer writes on
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never read its stdin"
            time.sleep(0.05)
        os.write(writer, rest)
        os.close(writer)
        out, err = proc.communicate(timeout=300)
    assert not os.get_blocking(reader)
    os.close(reader)
    assert (proc.returncode, err, json.loads(out)["inserted"]) == (0, "", 3)
    assert held(dsn, "nb")[0] == 3


def unread(fd: int) -> int:
    """How many bytes the pipe ``fd`` holds, not read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def test_stdin_is_read_by_one_option_and_never_from_a_terminal(dsn: str, tmp_path: Path) -> None:
    """Stdin holds one file: ``-`` given to two options (eval's --tools and --queries) is a usage error naming both,
    where the second would have read what the first did. ``-`` with stdin a terminal is a usage error saying to pipe
    the file in (as `import -`'s), not a wait for typing."""
    done = run(dsn, "eval", "--tools", "-", "--queries", "-", stdin=TOOLS_JSONL)
    assert done.returncode == 2 and "'--queries': - reads stdin, which '--tools' reads already" in done.stderr
    leader, terminal = os.openpty()
    try:
        typed = run(dsn, "route", "--messages", "-", stdin=terminal)
    finally:
        os.close(terminal)
        os.close(leader)
    said = "- reads the messages from stdin, a terminal here: pipe them in (... | "  # python -m toolstore ...
    assert typed.returncode == 2 and said in typed.stderr, typed.stderr
    assert "toolstore route --messages -) or name their file" in typed.stderr, typed.stderr


@pytest.mark.parametrize(
    "args, empty",
    [(("import",), "tools"), (("examples",), "queries.jsonl"), (("anchors", "import"), "anchors.json")],
    ids=["import", "examples", "anchors"],
)
def test_dev_null_is_an_empty_file(dsn: str, tmp_path: Path, args: tuple[str, ...], empty: str) -> None:
    """`toolstore import /dev/null` was refused as "not a regular file or a pipe", where a user reads /dev/null as an
    empty file (a script's FILE=/dev/null): it says what the command says of an empty file. Another device is still
    refused, /dev/zero, which would never end, and so is stdin redirected from it."""
    catalog_with_tools(dsn, tmp_path, "devnull")
    path = tmp_path / empty
    path.write_text("")
    of_file = run(dsn, "-c", "devnull", *args, str(path))
    of_null = run(dsn, "-c", "devnull", *args, "/dev/null")
    assert of_file.returncode == of_null.returncode == 1
    assert of_null.stderr == of_file.stderr.replace(str(path), "/dev/null"), (of_null.stderr, of_file.stderr)
    assert run(dsn, "-c", "devnull", *args, "/dev/zero").stderr == "error: /dev/zero: not a regular file or a pipe\n"
    with open("/dev/zero", "rb") as zero:
        piped = run(dsn, "-c", "devnull", *args, "-", stdin=zero)
    assert piped.returncode == 1 and "error: stdin: not a regular file or a pipe" in piped.stderr, piped.stderr
    assert held(dsn, "devnull") == (3, 0, 0)


def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, with the words that name it."""
    found = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def test_every_file_a_command_reads_takes_dash_and_its_help_says_so() -> None:
    """Only `import` took ``-``: each file a command reads is a ReadFile (``-`` for stdin, checked in one place), and
    the command's --help says stdin is ``-``; a path a command writes (export -o, eval --report) is no such file."""
    reading = []
    for words, command in commands(cli):
        files = [p for p in command.params if isinstance(p.type, click.Path) and not isinstance(p.type, Written)]
        if not files:
            continue
        reading.append(" ".join(words))
        assert all(isinstance(p.type, ReadFile) for p in files), words
        shown = CliRunner().invoke(cli, [*words, "--help"])
        assert shown.exit_code == 0 and "stdin" in " ".join(shown.output.split()), (words, shown.output)
    assert sorted(reading) == ["anchors import", "eval", "examples", "import", "route", "sessions import", "tune"]
