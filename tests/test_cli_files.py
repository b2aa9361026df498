"""The files the command line writes (export -o, eval --report): whole or not at all, never through a symlink."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from toolstore.cli import cli

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
