"""The README's Python blocks run as written: the library quickstart, and the agent loops of the OpenAI and Anthropic
adapters (on the demo catalog they name, with the SDK client replaced by a stub that answers with the SDK's own
types: one tool call beside an invented one, then text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion

from toolstore import LocalEmbedder, ToolStore
from toolstore.cli.demo import DEMO_CATALOG, load_demo

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


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


def _block(adapter: str) -> str:
    found = [b for b in BLOCKS if f"from toolstore.integrations.{adapter} import" in b]
    assert len(found) == 1, f"README has {len(found)} python blocks using toolstore.integrations.{adapter}"
    return found[0]


#: A name the model makes up beside its call of an offered tool, which the loops answer with the error naming those
#: offered.
INVENTED = "file_bug_report"


class _Replies:
    """The model's side of the loop: the first call asks for github's create_issue under the name it was offered,
    the next answers in text. ``offered`` keeps the tool names of each call."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    def issue_tool(self, names: list[str]) -> str | None:
        self.offered.append(names)
        if len(self.offered) > 1:
            return None
        return next(n for n in names if n in ("create_issue", "github__create_issue"))


class _OpenAIStub:
    def __init__(self, replies: _Replies) -> None:
        self.chat = self
        self.completions = self
        self.replies = replies

    def create(self, *, model: str, messages: list[Any], tools: list[dict[str, Any]]) -> ChatCompletion:
        name = self.replies.issue_tool([t["function"]["name"] for t in tools])
        call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": '{"title": "login bug"}'}}
        invented = {"id": "call_2", "type": "function", "function": {"name": INVENTED, "arguments": "{}"}}
        message = (
            {"role": "assistant", "content": "filed it"}
            if name is None
            else {"role": "assistant", "content": None, "tool_calls": [call, invented]}
        )
        choice = {"index": 0, "finish_reason": "stop" if name is None else "tool_calls", "message": message}
        return ChatCompletion.model_validate(
            {"id": "c", "object": "chat.completion", "created": 0, "model": model, "choices": [choice]}
        )


class _AnthropicStub:
    def __init__(self, replies: _Replies) -> None:
        self.messages = self
        self.replies = replies

    def create(self, *, model: str, max_tokens: int, messages: list[Any], tools: list[dict[str, Any]]) -> Message:
        name = self.replies.issue_tool([t["name"] for t in tools])
        use = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {"title": "login bug"}}
        invented = {"type": "tool_use", "id": "toolu_2", "name": INVENTED, "input": {}}
        content = [{"type": "text", "text": "filed it"}] if name is None else [use, invented]
        usage = {"input_tokens": 1, "output_tokens": 1}
        stop = "end_turn" if name is None else "tool_use"
        return Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
        )


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_the_agent_loops_run(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], adapter: str
) -> None:
    code = _block(adapter)
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog=DEMO_CATALOG) as store:
        load_demo(store)
    replies = _Replies()
    if adapter == "openai":
        monkeypatch.setattr(openai, "OpenAI", lambda: _OpenAIStub(replies))
    else:
        monkeypatch.setattr(anthropic, "Anthropic", lambda: _AnthropicStub(replies))
    monkeypatch.setenv("TOOLSTORE_DSN", dsn)
    ran: list[tuple[str, object]] = []

    def run_tool(tool_id: str, arguments: object) -> dict[str, bool]:
        ran.append((tool_id, arguments))
        return {"ok": True}

    namespace: dict[str, Any] = {"run_tool": run_tool}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    namespace["store"].close()
    assert capsys.readouterr().out.splitlines() == ["filed it"]
    assert ran == [("github.create_issue", {"title": "login bug"})]
    answers = namespace["messages"][2]["content"] if adapter == "anthropic" else namespace["messages"][2:4]
    said = f"no offered tool is named '{INVENTED}' (offered: "
    if adapter == "openai":
        assert [m["tool_call_id"] for m in answers] == ["call_1", "call_2"] and answers[1]["content"].startswith(said)
    else:
        assert [(r["tool_use_id"], r.get("is_error")) for r in answers] == [("toolu_1", None), ("toolu_2", True)]
        assert answers[1]["content"].startswith(said)
    assert len(replies.offered) == 2  # a step with the tool call, then one with its result
    with ToolStore(dsn, embedder=LocalEmbedder(), catalog=DEMO_CATALOG) as store:  # the second step logged the call
        logged = store.session_log("chat-42")
    assert [(c.tool_id, c.call_id) for c in logged] == [
        ("github.create_issue", "call_1" if adapter == "openai" else "toolu_1")
    ]
    assert "github.create_issue" in namespace["result"].ids  # the last step routed the request too


def test_the_fake_openai_example_runs(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Tests section's example: an app tested against FakeOpenAI's scripted tool call, through the real SDK."""
    [code] = [b for b in BLOCKS if "from toolstore.testing.fake_openai import" in b]
    monkeypatch.setenv("TOOLSTORE_DSN", dsn)
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["said"] == "Sunny in Paris." and namespace["ran"] == [("forecast", {"city": "Paris"})]
    [_, second] = namespace["fake"].requests_to("/chat/completions")
    assert second.body["messages"][-1]["content"] == '{"sky": "sunny"}'
    assert namespace["fake"].replies_left == 0
