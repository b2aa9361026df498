"""Labelled sessions: the eval replay (turn / session / tuned through the real route()), tuning the conversation
signals with folds by session and transitions only from training sessions, and the CLI end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolstore import HashingEmbedder, InvalidInputError, LabelledSession, SessionTurn, Tool, ToolStore
from toolstore._candidates import CandidateTable, Transitions
from toolstore._eval import evaluate_sessions, replay_messages
from toolstore._fusion import SIGNALS, Fusion
from toolstore._lists import fetch_lists, load_tool_index
from toolstore._metrics import METRICS
from toolstore._tune import session_probes, tune

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()
TOOLS = [Tool(id=f"k.{w}", name=w, provider="k", description=f"handles {w} records") for w in WORDS]
VAGUE = ["now the usual next step", "and then what comes after", "carry on as always", "do the follow up"]


def habit_sessions(n: int, offset: int = 0, *, unique: bool = False) -> list[LabelledSession]:
    """Two-turn sessions: a request naming tool A, then a vague follow-up needing A's habitual successor B.
    ``unique``: every session has its own (A, B) pair, so no other session can teach it."""
    out = []
    for i in range(n):
        a = WORDS[(i + offset) % 8] if not unique else WORDS[i % len(WORDS)]
        b = WORDS[8 + (i + offset) % 8] if not unique else WORDS[(i * 7 + 3) % len(WORDS)]
        turns = (
            SessionTurn(f"please handle the {a} records", (f"k.{a}",), (f"k.{a}",)),
            SessionTurn(VAGUE[i % len(VAGUE)], (f"k.{b}",), (f"k.{b}",)),
        )
        out.append(LabelledSession(f"s{offset}-{i}", turns))
    return out


@pytest.fixture
def habits(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    store.import_sessions((s.sid, s.calls) for s in habit_sessions(16))  # A -> B habits, logged
    return store


def test_replay_messages_hold_the_conversation_so_far() -> None:
    session = habit_sessions(1)[0]
    messages = replay_messages(session, 1)
    assert messages[0] == {"role": "user", "content": "please handle the alpha records"}
    assert messages[1]["tool_calls"][0]["function"]["name"] == "k.alpha" and messages[-1]["content"] == VAGUE[0]
    assert replay_messages(session, 0) == [{"role": "user", "content": "please handle the alpha records"}]


def test_evaluate_sessions_replays_turn_by_turn(habits: ToolStore) -> None:
    sessions = habit_sessions(8, offset=0)
    report = evaluate_sessions(habits, sessions, configs=["turn", "session"], k=5)
    assert set(report) == {"configs", "n_sessions", "n_turns", "n_tools", "degraded"} and report["degraded"] is None
    assert (report["n_sessions"], report["n_turns"], report["n_tools"]) == (8, 16, len(TOOLS))
    turn, session = report["configs"]["turn"], report["configs"]["session"]
    assert set(turn) == {*METRICS, "latency_ms_p50", "latency_ms_p95"}
    assert session["comp@5"] == 1.0 and session["nDCG@10"] > 0.95  # the logged habit finds the vague follow-up
    assert turn["comp@5"] < 0.75  # alone, a vague request finds nothing
    assert len(habits.sessions()) == 16  # the replay logged nothing
    with pytest.raises(InvalidInputError, match="unknown session config"):
        evaluate_sessions(habits, sessions, configs=["nope"])
    ghost = LabelledSession("g", (SessionTurn("x", ("k.nowhere",), ()),))
    with pytest.raises(InvalidInputError, match="'k.nowhere'"):
        evaluate_sessions(habits, [ghost])
    unscored = LabelledSession("u", (SessionTurn("hello there", (), ()),))  # context only: no turn to score
    with pytest.raises(InvalidInputError, match="no turn of the sessions names a relevant tool"):
        evaluate_sessions(habits, [unscored])


def test_tune_learns_transitions_from_training_sessions(store: ToolStore) -> None:
    store.upsert(TOOLS)
    report = tune(store, sessions=habit_sessions(24), seed=1, folds=4)
    assert report.n_sessions == 24 and report.n_examples == 48
    assert report.tuned.weights["transition"] > 0 and report.fusion.weights["transition"] > 0
    assert report.cv_ndcg_tuned > 0.9 and report.cv_ndcg_uniform > 0.9  # the default weighs transitions too
    assert store.info().settings["fusion"]["weights"] == dict(report.fusion.weights)
    off = {**{s: 1.0 for s in SIGNALS[:5]}, "transition": 0.0, "context": 0.0}
    store.set_fusion(weights=off)  # a stored fusion without transitions is replaced by what tuning finds
    assert tune(store, sessions=habit_sessions(24), seed=1, folds=4).fusion.weights["transition"] > 0


def test_tuning_never_sees_a_held_out_sessions_own_transitions(store: ToolStore) -> None:
    """Every session's (A, B) pair is its own: only its own log could teach it. Counting it would make the
    transition signal look perfect; counted from the other sessions only, it knows nothing."""
    store.upsert(TOOLS)
    sessions = habit_sessions(16, unique=True)
    index = load_tool_index(store)
    rows = [(p, j) for s in sessions for p, j in session_probes(s) if j is not None and p.history]
    lists = fetch_lists(store, [p for p, _ in rows], depth=40, tools=index)
    leaky = Transitions.of(s.calls for s in sessions)
    table = CandidateTable(lists, index, [j for _, j in rows], 40, [leaky] * len(rows))
    transition_only = [4.0 if s == "transition" else 0.01 if s == "description" else 0.0 for s in SIGNALS]
    assert table.ndcg(transition_only, 5.0).mean() > 0.95  # what leaking would look like
    report = tune(store, sessions=sessions, seed=0, folds=4, save=False)
    assert report.cv_ndcg_tuned < 0.75


def test_tune_rejects_bad_sessions(store: ToolStore) -> None:
    store.upsert(TOOLS)
    with pytest.raises(InvalidInputError, match="no examples"):
        tune(store)
    with pytest.raises(InvalidInputError, match="'k.zulu'"):
        tune(store, sessions=[LabelledSession("z", (SessionTurn("q", ("k.zulu",), ()),))])
    with pytest.raises(InvalidInputError, match="LabelledSession"):
        tune(store, sessions=[{"sid": "x"}])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="sessions must be a list, not a single LabelledSession"):
        tune(store, sessions=habit_sessions(2)[0])  # type: ignore[arg-type]  # a TypeError out of list()
    with pytest.raises(InvalidInputError, match="examples must be a list, not a single int"):
        store.tune(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="2 examples or sessions to cross-validate"):
        tune(store, sessions=habit_sessions(1))  # two scored turns, but one session: a single fold


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(sessions: list[LabelledSession]) -> list[dict[str, Any]]:
    return [
        {
            "sid": s.sid,
            "turns": [{"query": t.query, "relevant": list(t.relevant), "calls": list(t.calls)} for t in s.turns],
        }
        for s in sessions
    ]


def test_cli_eval_and_tune_with_sessions(dsn: str, tmp_path: Path) -> None:
    tools = _write(
        tmp_path / "tools.jsonl", [{"id": t.id, "name": t.name, "description": t.description} for t in TOOLS]
    )
    train = _write(tmp_path / "train.jsonl", _rows(habit_sessions(24)))
    test = _write(tmp_path / "test.jsonl", _rows(habit_sessions(8, offset=3)))
    env = {**os.environ, "TOOLSTORE_DSN": dsn}
    base = [sys.executable, "-m", "toolstore", "--embedder", "hashing"]
    args = [*base, "eval", "--tools", str(tools), "--sessions", str(test), "--train-sessions", str(train), "--tune"]
    proc = subprocess.run(
        [*args, "--json", "--report", str(tmp_path / "r")], capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out["configs"]) == ["turn", "session", "tuned"] and out["n_turns"] == 16 and out["n_sessions"] == 8
    assert out["configs"]["session"]["comp@5"] > out["configs"]["turn"]["comp@5"]
    assert out["configs"]["tuned"]["nDCG@10"] >= out["configs"]["turn"]["nDCG@10"]
    assert out["tune"]["n_sessions"] == 24 and "| session |" in (tmp_path / "r" / "eval.md").read_text()
    bad = subprocess.run([*base, "eval", "--tools", str(tools)], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "--queries or --sessions" in bad.stderr  # a usage error
    with ToolStore(dsn, embedder=HashingEmbedder(256), catalog="tuned") as store:
        store.upsert(TOOLS)
    tuned = subprocess.run(
        [*base, "-c", "tuned", "tune", "--sessions", str(train), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert json.loads(tuned.stdout)["n_sessions"] == 24
    with ToolStore(dsn, embedder=HashingEmbedder(256), catalog="tuned") as store:
        assert Fusion(**store.info().settings["fusion"]).weights["transition"] > 0
