"""The README's library quickstart runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text()
    block = re.search(r"```\n(.*?)```", text, re.S)
    assert block is not None
    assert block.group(1).split("\n")[:2] == ["bash scripts/demo", "bash scripts/test"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test" in ci


def test_quickstart_runs(dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    monkeypatch.setenv("TOOLSTORE_DSN", dsn)
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)  # noqa: S102 - our own README
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("slack.send_message")
    assert namespace["tools"][0]["function"]["name"] == "send_message"  # type: ignore[index]
