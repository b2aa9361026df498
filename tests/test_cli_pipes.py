"""A pipe as the file a command reads: `toolstore import <(curl ...)` (/dev/fd/N, named without a suffix) and a FIFO,
waited for as `cat` waits for its writer, the wait ended by Ctrl-C without a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from terminal import controlling, echoing, in_background, read_all

from toolstore import InvalidToolError, ToolStore, load_tools_file

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]
JSONL = "".join(json.dumps(t) + "\n" for t in TOOLS)
OPENAPI_YAML = """openapi: 3.0.0
info: {title: pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      summary: List the pets
"""


def start(dsn: str, *args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    """The command line as a process on ``dsn`` with the hashing embedder, stdin empty, its output piped."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=pass_fds
    )


def tool_ids(dsn: str, catalog: str) -> list[str]:
    with ToolStore(dsn, embedder=None, create=False, catalog=catalog) as store:
        return sorted(t.id for t in store.tools())


@pytest.mark.parametrize(
    "text, ids",
    [
        (JSONL, ["gmail.send_email", "weather.forecast"]),
        (json.dumps(TOOLS, indent=2), ["gmail.send_email", "weather.forecast"]),
        (json.dumps(TOOLS[0]), ["gmail.send_email"]),
        (OPENAPI_YAML, ["pets.listPets"]),
    ],
    ids=["jsonl", "json", "one-line-json", "yaml"],
)
def test_import_reads_a_pipe_named_without_a_suffix(dsn: str, text: str, ids: list[str]) -> None:
    """`toolstore import <(curl ...)` reads /dev/fd/N, a pipe named without a suffix: refused as 'unsupported file type
    ''', and as 'not a regular file'. It is read to its end (the writer writing after the command started), as JSON
    lines, a JSON document or an OpenAPI YAML document by its text."""
    read, write = os.pipe()
    catalog = f"piped-{len(text)}"
    proc = start(dsn, "-c", catalog, "import", f"/dev/fd/{read}", pass_fds=(read,))
    os.close(read)
    with os.fdopen(write, "w") as writer:
        writer.write(text)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["inserted"] == len(ids)
    assert tool_ids(dsn, catalog) == ids


def test_import_dash_reads_stdin_by_its_text(dsn: str, tmp_path: Path) -> None:
    """`curl -s URL | toolstore import -` was a usage error ("File '-' does not exist"); FILE ``-`` is stdin, a pipe or
    a file it is redirected from, read by its text as a pipe named without a suffix is, and "file" says ``-``; stdin
    a terminal is a usage error saying to pipe the tools in, not a wait for typing."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "-c", "dashed", "import", "-"]
    piped = subprocess.run(cmd, input=JSONL, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["file"] == "-" and json.loads(piped.stdout)["inserted"] == 2
    redirected = tmp_path / "tools"
    redirected.write_text(OPENAPI_YAML)
    with redirected.open() as stdin:
        done = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert tool_ids(dsn, "dashed") == ["gmail.send_email", "pets.listPets", "weather.forecast"]
    leader, terminal = os.openpty()
    try:
        typed = subprocess.run(cmd, stdin=terminal, capture_output=True, text=True, timeout=300)
    finally:
        os.close(terminal)
        os.close(leader)
    assert typed.returncode == 2 and "- reads the tools from stdin, a terminal here: pipe them in" in typed.stderr
    closed = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, preexec_fn=lambda: os.close(0)
    )
    assert closed.returncode == 2 and "- reads the tools from stdin, closed here: pipe them in" in closed.stderr


def test_import_waits_for_a_fifos_writer(dsn: str, tmp_path: Path) -> None:
    """A FIFO is read once a writer comes (the writer here opens it after the command did), not refused."""
    fifo = tmp_path / "tools.jsonl"
    os.mkfifo(fifo)
    proc = start(dsn, "-c", "fifo", "import", str(fifo))
    with open(fifo, "w") as writer:  # waits for the command to open it
        writer.write(JSONL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert tool_ids(dsn, "fifo") == ["gmail.send_email", "weather.forecast"]


def holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == str(path) for fd in fds.iterdir())
    except FileNotFoundError:  # an fd closed while listed
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the command's open files")
def test_ctrl_c_ends_the_wait_for_a_fifos_writer(dsn: str, tmp_path: Path) -> None:
    """A FIFO no writer opens is waited for as `cat` waits; Ctrl-C (SIGINT) ends the wait: exit 130, "aborted",
    no traceback, nothing written."""
    fifo = tmp_path / "tools.jsonl"
    os.mkfifo(fifo)
    proc = start(dsn, "-c", "never", "import", str(fifo))
    deadline = time.monotonic() + 300  # a bound on a wait, not a measurement
    while not holds_open(proc.pid, fifo):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never opened the FIFO"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert (proc.returncode, out, err) == (130, "", "aborted\n"), err  # click's blank line before it is gone
    with ToolStore(dsn, embedder=None, catalog="default") as store:
        assert "never" not in [c["name"] for c in store.catalogs()]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the command's open files")
def test_ctrl_c_typed_on_a_terminal_says_aborted_past_its_echo(dsn: str, tmp_path: Path) -> None:
    """On a terminal Ctrl-C is echoed as ``^C``, where the cursor was: "aborted" follows on a line of its own, as it
    did when click's blank line came first (which a pipe got as an empty line: above), exit 130."""
    fifo = tmp_path / "tools.jsonl"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "-c", "never", "import", str(fifo)]
    proc, leader = controlling(cmd)
    deadline = time.monotonic() + 300  # a bound on a wait, not a measurement
    while not holds_open(proc.pid, fifo):
        assert proc.poll() is None, read_all(leader)
        assert time.monotonic() < deadline, "the command never opened the FIFO"
        time.sleep(0.05)
    os.write(leader, b"\x03")  # Ctrl-C typed
    drawn = read_all(leader).replace("\r\n", "\n")
    assert (proc.wait(timeout=300), drawn) == (130, "^C\naborted\n")


def _import_waiting(dsn: str, fifo: Path, where: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """``import FIFO`` started with its stderr an echoing terminal, as a background job of that terminal or on one
    that does not control it (a supervisor's pty): the process to wait for, the command's pid, the terminal's leader;
    returned once the command waits for the FIFO's writer."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", "-c", "never", "import", str(fifo)]
    if where == "background":
        proc, pid, leader = in_background(cmd)
    else:
        leader, follower = echoing()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, start_new_session=True
        )  # a session of its own without a controlling terminal: the pty is not one
        os.close(follower)
        pid = proc.pid
    deadline = time.monotonic() + 300  # a bound on a wait, not a measurement
    while not holds_open(pid, fifo):
        assert proc.poll() is None, read_all(leader)
        assert time.monotonic() < deadline, "the command never opened the FIFO"
        time.sleep(0.05)
    return proc, pid, leader


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the command's open files")
@pytest.mark.parametrize("where", ["background", "not-controlling"])
def test_kill_int_with_stderr_a_terminal_says_aborted_without_a_blank_line(
    dsn: str, tmp_path: Path, where: str
) -> None:
    """`kill -INT` of a command whose stderr is a terminal echoing control characters, but which no Ctrl-C typed there
    can reach (a background job of it, or a terminal that does not control it), printed a blank line before "aborted",
    as if past an echoed ``^C`` that nothing drew; it is the one line, exit 130."""
    fifo = tmp_path / "tools.jsonl"
    os.mkfifo(fifo)
    proc, pid, leader = _import_waiting(dsn, fifo, where)
    os.kill(pid, signal.SIGINT)
    drawn = read_all(leader).replace("\r\n", "\n")
    assert (proc.wait(timeout=300), drawn) == (130, "aborted\n")


def test_a_file_named_without_a_suffix_is_read_by_its_text(tmp_path: Path) -> None:
    """The library reads a name without a suffix as the command line does (a malformed JSON document said by the
    JSON reader, where it breaks)."""
    path = tmp_path / "tools"
    path.write_text(json.dumps(TOOLS, indent=2))
    assert [t.id for t in load_tools_file(path)] == ["gmail.send_email", "weather.forecast"]
    path.write_text('[\n  {"id": "a.b", "name": "b", "description": "x"},\n]\n')
    said = r"tools line 2, column 49: invalid JSON: Illegal trailing comma before end of array$"  # on every Python
    with pytest.raises(InvalidToolError, match=said):
        load_tools_file(path)


@pytest.mark.parametrize(
    "text, why",
    [
        ("404: Not Found", "as YAML, a mapping without an 'openapi' key); it starts '404: Not Found'"),
        ("<!DOCTYPE html>\n<html>\n<body>Not: Found</body>\n", "line 3, column 10: mapping values are not allowed"),
        ("hello world\n", "(as YAML, a string); it starts 'hello world'"),
        ("null\n", "(as YAML, null); it starts 'null'"),
    ],
    ids=["curl-404", "html", "text", "null"],
)
def test_a_text_named_without_a_suffix_that_is_no_tools_file_says_what_it_was_read_as(
    tmp_path: Path, text: str, why: str
) -> None:
    """`toolstore import <(curl -s URL)` of a URL that failed read the page as YAML, nobody's meaning, and said "YAML
    files must hold an OpenAPI 3.x document" or "invalid YAML: mapping values are not allowed here" (and "a YAML
    NoneType"); it says the text is neither JSON, JSON lines nor an OpenAPI document, read by its text, and how it
    starts. A file named .yaml keeps YAML's words."""
    path = tmp_path / "page"
    path.write_text(text)
    said = "page: neither JSON (it does not start with { or [), JSON lines nor an OpenAPI document (YAML with an "
    with pytest.raises(InvalidToolError, match=re.escape(said) + ".*" + re.escape(why)):
        load_tools_file(path)
    named = tmp_path / "page.yaml"
    named.write_text("null\n")
    with pytest.raises(InvalidToolError, match=re.escape("not an OpenAPI document (null); YAML files must hold")):
        load_tools_file(named)
