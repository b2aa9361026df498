"""The files the command line writes (export -o, eval --report): whole or not at all, never through a symlink."""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from toolstore.cli import cli
from toolstore.cli.files import write_file

TOOLS = [
    {"id": "gmail.send_email", "name": "send_email", "description": "Send an email to a recipient"},
    {"id": "github.create_issue", "name": "create_issue", "description": "Open an issue in a GitHub repository"},
    {"id": "weather.forecast", "name": "forecast", "description": "Weather forecast for a city"},
]


def invoke(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dsn", dsn, "--embedder", "hashing", *args])


def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TOOLS))
    return str(path)


def test_export_replaces_a_symlink_rather_than_writing_through_it(dsn: str, tmp_path: Path) -> None:
    """`export -o FILE` wrote through a symlink at FILE, so a link planted there overwrote whatever it named; the
    link is replaced by the exported file, and what it named is left as it was."""
    assert invoke(dsn, "-c", "out", "import", tools_file(tmp_path)).exit_code == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "export.json"
    link.symlink_to(victim)
    result = invoke(dsn, "-c", "out", "export", "-o", str(link))
    assert result.exit_code == 0, (result.exception, result.output)
    assert victim.read_text() == "keep me\n"
    assert not link.is_symlink() and len(json.loads(link.read_text())["tools"]) == 3


def test_eval_report_replaces_symlinks_rather_than_writing_through_them(dsn: str, tmp_path: Path) -> None:
    """`eval --report DIR` wrote eval.md through a symlink at DIR/eval.md; it replaces the link."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"qid": "q1", "query": "mail bob", "relevant": ["gmail.send_email"]}) + "\n")
    report = tmp_path / "report"
    report.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (report / "eval.md").symlink_to(victim)
    args = ["eval", "--tools", tools_file(tmp_path), "--queries", str(queries), "--config", "default"]
    result = invoke(dsn, *args, "--report", str(report))
    assert result.exit_code == 0, (result.exception, result.output)
    assert victim.read_text() == "keep me\n"
    written = report / "eval.md"
    assert not written.is_symlink() and written.read_text().startswith("# ")


def _limit_file_size() -> None:
    """In the child: files may not grow past 200 bytes (a full disk, as a write sees it: EFBIG)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))


def test_an_export_that_fails_midway_leaves_the_old_file_whole(dsn: str, tmp_path: Path) -> None:
    """`export -o FILE` truncated FILE, then wrote: a write that failed midway (a full disk, a crash) left half a
    file and the old one lost. It writes a temporary file beside it and renames it over FILE, so FILE stays whole and
    no temporary file is left."""
    assert invoke(dsn, "-c", "out", "import", tools_file(tmp_path)).exit_code == 0
    target = tmp_path / "out" / "export.json"
    target.parent.mkdir()
    target.write_text('{"tools": []}\n')
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "-c", "out", "export", "-o", str(target)]
    proc = subprocess.run(cmd, capture_output=True, env=env, timeout=120, preexec_fn=_limit_file_size)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 1 and "File too large" in err and "Traceback" not in err, err
    assert target.read_text() == '{"tools": []}\n'
    assert [p.name for p in target.parent.iterdir()] == ["export.json"]


def test_a_file_that_cannot_be_written_is_named_not_its_temporary(dsn: str, tmp_path: Path) -> None:
    """The error of an export that cannot be written (here: into a directory that does not exist) names the file
    asked for, not the temporary file written beside it."""
    assert invoke(dsn, "-c", "out", "import", tools_file(tmp_path)).exit_code == 0
    target = tmp_path / "nosuch" / "export.json"
    result = invoke(dsn, "-c", "out", "export", "-o", str(target))
    assert isinstance(result.exception, FileNotFoundError), result.exception
    assert result.exception.filename == str(target), result.exception


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is root's alone when the tests run as root)."""
    path = Path(tempfile.mkdtemp(prefix="toolstore-files-"))
    path.chmod(0o755)
    yield path
    path.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("runuser") is None, reason="as root, needs runuser")
def test_a_writable_file_in_a_directory_not_writable_is_written_in_place(shared_dir: Path) -> None:
    """write_file (export -o, eval --report) wrote a temporary file beside the target, so a writable file in a
    directory the user cannot write to could no longer be written (the old in-place write could); it is written in
    place there."""
    target = shared_dir / "export.json"
    target.write_text("old\n")
    target.chmod(0o666)
    if os.geteuid() != 0:
        shared_dir.chmod(0o555)
    done = write_as_another_user(target)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "new\n"
    assert [p.name for p in shared_dir.iterdir()] == ["export.json"]


def write_as_another_user(target: Path) -> subprocess.CompletedProcess[str]:
    """write_file(target, "new\\n") in a child: as nobody when the tests run as root (who may write anything)."""
    script = "import sys; from pathlib import Path; from toolstore.cli.files import write_file; "
    script += "write_file(Path(sys.argv[1]), 'new\\n')"
    command = [sys.executable, "-c", script, str(target)]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "nobody", "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("runuser") is None, reason="as root, needs runuser")
def test_a_read_only_file_with_another_hard_link_is_still_replaced(shared_dir: Path) -> None:
    """A file with other hard links is written in place, but a read-only one cannot be: it is replaced, as every
    file was before (the links keep the old content), rather than the write failing."""
    if os.geteuid() == 0:
        os.chown(shared_dir, 65534, 65534)
    target = shared_dir / "export.json"
    target.write_text("old\n")
    os.link(target, shared_dir / "elsewhere.json")
    target.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(target, 65534, 65534)
    done = write_as_another_user(target)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "new\n" and (shared_dir / "elsewhere.json").read_text() == "old\n"


def test_a_file_with_another_hard_link_is_written_through_it(tmp_path: Path) -> None:
    """write_file renamed a new file over the target, so another hard link to it kept the old content; a file with
    other links is written in place, which they share."""
    target = tmp_path / "export.json"
    target.write_text("old\n")
    other = tmp_path / "elsewhere.json"
    os.link(target, other)
    write_file(target, "new\n")
    assert other.read_text() == "new\n" and os.path.samefile(target, other)


def test_export_to_a_hard_link_writes_the_file_every_name_shows(dsn: str, tmp_path: Path) -> None:
    """`export -o FILE` where FILE has another hard link writes the file both names show, as `cp` or a shell's `>`
    would: the other name sees the export, the link is kept (no rename cut it), and no temporary file is left."""
    assert invoke(dsn, "-c", "out", "import", tools_file(tmp_path)).exit_code == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    target, other = shared / "export.json", shared / "elsewhere.json"
    target.write_text("old\n")
    os.link(target, other)
    result = invoke(dsn, "-c", "out", "export", "-o", str(target))
    assert result.exit_code == 0, (result.exception, result.output)
    assert os.path.samefile(target, other) and target.stat().st_nlink == 2
    assert len(json.loads(other.read_text())["tools"]) == 3
    assert sorted(p.name for p in shared.iterdir()) == ["elsewhere.json", "export.json"]  # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_owner_keeps_its_owner(tmp_path: Path) -> None:
    """write_file renamed a new file (its writer's) over the target, so a file another user owned changed owner; the
    new file is given the old one's owner and group (or, where that is not allowed, the old file is written in
    place)."""
    target = tmp_path / "export.json"
    target.write_text("old\n")
    os.chown(target, 65534, 65534)
    write_file(target, "new\n")
    assert target.read_text() == "new\n"
    assert (target.stat().st_uid, target.stat().st_gid) == (65534, 65534)


def test_the_directory_is_synced_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_file synced the new file but not its directory, so a crash just after the rename could lose the rename;
    the directory is synced too (where the system allows it)."""
    synced: list[bool] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    write_file(tmp_path / "export.json", "new\n")
    assert synced == [False, True]
