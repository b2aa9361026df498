"""The session log: calls appended and read back, transition counts kept equal to the log through inserts, trims,
prunes, imports and deletions, concurrent writers of one session, no catalog lock, all-or-nothing writes, retention,
bad input, and ``toolstore sessions`` end to end."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest

from toolstore import (
    AsyncToolStore,
    HashingEmbedder,
    InvalidInputError,
    SessionCall,
    Tool,
    ToolStore,
    UnknownCatalogError,
    UnknownToolError,
)
from toolstore import _sessions as sessions_module
from toolstore._catalog_row import lock_catalog
from toolstore._retention import Retention
from toolstore.cli.sessions import parse_duration

TOOLS = [Tool(id=f"app.t{i}", name=f"t{i}", provider="app", description=f"tool number {i}") for i in range(8)]


@pytest.fixture
def logged(store: ToolStore) -> ToolStore:
    store.upsert(TOOLS)
    return store


def stored_counts(store: ToolStore) -> Counter[tuple[str, str]]:
    return Counter({(r["prev_tool"], r["next_tool"]): r["n"] for r in store.transitions(limit=100_000)})


def recomputed_counts(store: ToolStore) -> Counter[tuple[str, str]]:
    """Transition counts recomputed from the log: pairs of calls at positions (s, s + 1) of one session."""
    with store.connection() as conn:
        rows = conn.execute(
            "select a.tool_id, b.tool_id from session_calls a join session_calls b on b.catalog_id = a.catalog_id "
            "and b.session_id = a.session_id and b.seq = a.seq + 1 where a.catalog_id = %s",
            [store.info().id],
        ).fetchall()
    return Counter((a, b) for a, b in rows)


def test_calls_are_appended_and_read_back(logged: ToolStore) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    written = logged.record_calls(
        "chat-1", ["app.t1", "t2", "app__t3", SessionCall("app.t4", ok=False, at=at, call_id="c1")]
    )
    assert written == 4
    log = logged.session_log("chat-1")
    assert [(c.seq, c.tool_id, c.ok) for c in log] == [
        (1, "app.t1", True),
        (2, "app.t2", True),
        (3, "app.t3", True),
        (4, "app.t4", False),
    ]
    assert log[3].at == at and log[3].call_id == "c1" and log[0].at.tzinfo is not None
    # a call id the session already logged is skipped, within a batch too
    assert (
        logged.record_calls("chat-1", [SessionCall("app.t5", call_id="c1"), SessionCall("app.t6", call_id="c2")]) == 1
    )
    assert (
        logged.record_calls("chat-1", [SessionCall("app.t7", call_id="c3"), SessionCall("app.t7", call_id="c3")]) == 1
    )
    assert [c.tool_id for c in logged.session_log("chat-1")][-2:] == ["app.t6", "app.t7"]
    assert logged.record_calls("chat-2", ["app.t6"]) == 1  # call ids are per session: c1 is free elsewhere
    assert (
        stored_counts(logged)
        == recomputed_counts(logged)
        == Counter(
            {
                ("app.t1", "app.t2"): 1,
                ("app.t2", "app.t3"): 1,
                ("app.t3", "app.t4"): 1,
                ("app.t4", "app.t6"): 1,
                ("app.t6", "app.t7"): 1,
            }
        )
    )
    listed = {r["session_id"]: r["calls"] for r in logged.sessions()}
    assert listed == {"chat-1": 6, "chat-2": 1}


def test_transition_counts_equal_the_log_through_every_change(logged: ToolStore) -> None:
    """Random inserts, trims, prunes, re-imports and deletions: after each, the incremental counts equal the counts
    recomputed from the log."""
    rng = random.Random(11)
    ids = [t.id for t in TOOLS]
    old = datetime.now(timezone.utc) - timedelta(days=10)
    logged.set_session_retention(max_calls=25)
    for step in range(60):
        session = f"s{rng.randrange(6)}"
        action = rng.random()
        if action < 0.55:
            calls = [
                SessionCall(rng.choice(ids), at=old if rng.random() < 0.3 else None) for _ in range(rng.randint(1, 9))
            ]
            logged.record_calls(session, calls)
        elif action < 0.7:
            logged.import_sessions([(session, [rng.choice(ids) for _ in range(rng.randint(0, 12))])])
        elif action < 0.8:
            logged.prune_sessions(older_than=timedelta(days=5))
        elif action < 0.9:
            logged.prune_sessions(session=session)
        else:
            with logged.connection() as conn:  # a delete from the middle of a session: pairs on both sides go
                conn.execute("delete from session_calls where session_id = %s and seq %% 3 = 1", [session])
        assert stored_counts(logged) == recomputed_counts(logged), step
    assert sum(stored_counts(logged).values()) > 0
    assert all(len(logged.session_log(r["session_id"])) <= 25 for r in logged.sessions())


def test_dropping_the_catalog_drops_its_log_and_counts(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="one") as one, ToolStore(dsn, embedder=None, catalog="two") as two:
        for store in (one, two):
            store.upsert(TOOLS)
            store.record_calls("s", ["app.t1", "app.t2", "app.t1"])
        one.drop_catalog()
        with two.connection() as conn:
            assert conn.execute("select count(*) from session_calls").fetchone()[0] == 3
            assert conn.execute("select count(*) from tool_transitions").fetchone()[0] == 2
        assert stored_counts(two) == recomputed_counts(two)


def test_concurrent_writers_to_one_session_keep_every_call(dsn: str) -> None:
    with ToolStore(dsn, embedder=None, catalog="busy", pool_size=8) as store:
        store.upsert(TOOLS)
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                for i in range(25):
                    store.record_calls("shared", [SessionCall(TOOLS[(w + i) % 8].id, call_id=f"w{w}-{i}")])
                    store.record_calls(f"own-{w}", [TOOLS[i % 8].id, TOOLS[(i + w) % 8].id])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        log = store.session_log("shared")
        assert [c.seq for c in log] == list(range(1, 201))  # gapless
        assert sorted(c.call_id for c in log) == sorted(f"w{w}-{i}" for w in range(8) for i in range(25))
        assert stored_counts(store) == recomputed_counts(store)


@pytest.mark.parametrize("one_session", [True, False], ids=["one session", "all sessions"])
def test_a_prune_waits_for_a_first_write_in_progress(logged: ToolStore, one_session: bool) -> None:
    """A prune that starts while a session's first write is uncommitted waits for it and then prunes its calls, so a
    later write to the session cannot pair with a call the prune deleted (the soak found a leaked transition when
    the prune locked nothing: a select does not see an uncommitted session row)."""
    info = logged.info(counts=False)
    if not one_session:
        logged.record_calls("committed", ["app.t5", "app.t6"])  # the all-sessions prune lists committed sessions
    result: dict[str, int] = {}
    with logged.connection() as first, logged.connection() as other:
        with first.transaction():
            sessions_module._append(first, info, "fresh", [SessionCall("app.t1"), SessionCall("app.t2")], Retention())
            pid = other.info.backend_pid
            pruner = threading.Thread(
                target=lambda: result.update(
                    sessions_module.prune(other, info, session="fresh" if one_session else None)
                )
            )
            pruner.start()
            with logged.connection() as watcher:
                for _ in range(200):  # until the prune waits on the write's lock (the old code never did)
                    row = watcher.execute("select wait_event_type from pg_stat_activity where pid = %s", [pid])
                    if row.fetchone() == ("Lock",) or not pruner.is_alive():
                        break
                    time.sleep(0.05)
        pruner.join(30)
    if one_session:  # it waited, then pruned the calls committed before it went on
        assert result == {"calls": 2, "sessions": 1} and logged.session_log("fresh") == []
    else:  # what was committed when it listed the sessions, and nothing of a session begun meanwhile
        assert result == {"calls": 2, "sessions": 1} and len(logged.session_log("fresh")) == 2
        assert logged.session_log("committed") == []
    logged.record_calls("fresh", ["app.t3"])
    assert stored_counts(logged) == recomputed_counts(logged)


def test_logging_never_waits_for_the_catalog_lock(logged: ToolStore) -> None:
    """A catalog write in progress (its row lock held) does not hold up logging calls."""
    with logged.connection() as locker, locker.transaction():
        lock_catalog(locker, logged.catalog)  # what every catalog write does first
        with logged.connection() as conn:
            conn.execute("set lock_timeout = '2s'")  # would fail on the catalog lock instead of waiting forever
            info = logged.info(counts=False)
            assert sessions_module.record_calls(conn, info, "s", ["app.t1", "app.t2"]) == 2
            assert sessions_module.record_calls(conn, info, "s", ["app.t3"]) == 1


def test_a_failed_write_writes_nothing(logged: ToolStore, monkeypatch: pytest.MonkeyPatch) -> None:
    logged.record_calls("s", ["app.t1"])
    before = (logged.session_log("s"), stored_counts(logged))
    with pytest.raises(UnknownToolError, match="'ghost'"):
        logged.record_calls("s", ["app.t2", "ghost", "app.t3"])
    real = sessions_module.query

    def failing(name: str) -> str:
        return "select 1/0" if name == "trim_session" else real(name)

    monkeypatch.setattr(sessions_module, "query", failing)  # the last statement of the write fails
    with pytest.raises(Exception, match="division by zero"):
        logged.record_calls("s", ["app.t2", "app.t3"])
    with pytest.raises(Exception, match="division by zero"):
        logged.import_sessions([("s", ["app.t4"]), ("t", ["app.t5"])])
    monkeypatch.undo()
    assert (logged.session_log("s"), stored_counts(logged)) == before
    assert [r["session_id"] for r in logged.sessions()] == ["s"]


@pytest.mark.parametrize(
    ("session", "calls", "error"),
    [
        ("x" * 201, ["app.t1"], "session id is 201 characters long; the limit is 200"),
        ("a\x00b", ["app.t1"], "session id contains a NUL byte"),
        ("", ["app.t1"], "session id is empty"),
        (42, ["app.t1"], "session id must be a string"),
        ("s", "app.t1", "calls must be a list"),
        ("s", [3], r"calls\[0\]: expected a tool id"),
        ("s", [SessionCall("app.t1", ok="yes")], r"calls\[0\].ok"),  # type: ignore[arg-type]
        ("s", [SessionCall("app.t1", at=datetime(2026, 1, 1))], r"calls\[0\].at: expected a datetime with a time zone"),
        ("s", [SessionCall("app.t1", call_id="")], r"calls\[0\].call_id is empty"),
        ("s", ["app.t1", ""], r"calls\[1\].tool is empty"),
    ],
)
def test_bad_input_is_a_clear_error(logged: ToolStore, session: Any, calls: Any, error: str) -> None:
    with pytest.raises(InvalidInputError, match=error):
        logged.record_calls(session, calls)
    assert logged.sessions() == []


def test_a_call_dated_past_the_clock_skew_allowed_is_refused_and_nothing_written(logged: ToolStore) -> None:
    """A SessionCall dated a year ahead was logged as given (and would outlive the retention's age, after the calls
    made after it); a call more than MAX_CLOCK_SKEW (5 minutes) after the database's time is an InvalidInputError
    naming the call, its tool and its time, and the write fails whole: record_calls, record_new_calls and an import
    write nothing, not the calls before it nor another session's. Within the skew, or the database's time written in
    another zone, it is logged as given."""
    with logged.connection() as conn:
        [(now,)] = conn.execute("select now()").fetchall()
    ahead = now + timedelta(days=365)
    said = rf"the call of 'app.t2' is dated {re.escape(ahead.isoformat())}, more than 5 minutes after the database's"
    with pytest.raises(InvalidInputError, match=rf"^calls\[1\].at: {said} time \(.*\): a call's time may be ahead"):
        logged.record_calls("s", ["app.t1", SessionCall("app.t2", at=ahead), "app.t3"])
    with pytest.raises(InvalidInputError, match=rf"^calls\[0\].at: {said}"):
        logged.record_new_calls("s", ["c1", "c2"], [SessionCall("app.t2", at=ahead, call_id="c2")])
    with pytest.raises(InvalidInputError, match=rf"^session #2: calls\[1\].at: {said}"):
        logged.import_sessions([("a", ["app.t1"]), ("b", ["app.t1", SessionCall("app.t2", at=ahead)])])
    assert (logged.sessions(), stored_counts(logged)) == ([], Counter())
    soon, elsewhere = now + timedelta(minutes=2), now.astimezone(timezone(timedelta(hours=9)))
    logged.record_calls("s", [SessionCall("app.t1", at=soon), SessionCall("app.t2", at=elsewhere)])
    assert [(c.tool_id, c.at) for c in logged.session_log("s")] == [("app.t1", soon), ("app.t2", now)]


def test_unknown_catalog_and_route_session_checks(dsn: str, logged: ToolStore) -> None:
    with ToolStore(dsn, embedder=None, catalog="nowhere", create=False) as missing:
        with pytest.raises(UnknownCatalogError):
            missing.record_calls("s", ["x"])
    with pytest.raises(InvalidInputError, match="session id is 201 characters"):
        logged.route("tool number", session="x" * 201)
    with pytest.raises(InvalidInputError, match="NUL"):
        logged.route("tool number", session="\x00")


def test_retention_limits(logged: ToolStore) -> None:
    assert logged.session_retention() == {"max_calls": 1000, "max_age_days": None}
    logged.set_session_retention(max_calls=3, max_age_days=7)
    assert logged.session_retention() == {"max_calls": 3, "max_age_days": 7.0}
    old = datetime.now(timezone.utc) - timedelta(days=8)
    logged.record_calls("s", [SessionCall("app.t1", at=old), "app.t2", "app.t3", "app.t4", "app.t5"])
    assert [c.tool_id for c in logged.session_log("s")] == ["app.t3", "app.t4", "app.t5"]  # the newest 3
    logged.set_session_retention(max_calls=None, max_age_days=7)
    logged.record_calls("old", [SessionCall("app.t1", at=old), SessionCall("app.t2", at=old)])
    assert logged.session_log("old") == []  # applied at the write
    with logged.connection() as conn:  # calls that aged in place go with prune, which applies the retention age
        conn.execute("update session_calls set called_at = called_at - interval '30 days' where session_id = 's'")
    assert logged.prune_sessions() == {"calls": 3, "sessions": 1}
    assert stored_counts(logged) == recomputed_counts(logged) == Counter()
    # a lower max_calls applies to every session by prune too, not only to the next write to each
    logged.record_calls("long", ["app.t1", "app.t2", "app.t3", "app.t4"])
    logged.record_calls("short", ["app.t5"])
    logged.set_session_retention(max_calls=2, max_age_days=None)
    assert logged.prune_sessions() == {"calls": 2, "sessions": 0}
    assert [c.tool_id for c in logged.session_log("long")] == ["app.t3", "app.t4"]
    assert [c.tool_id for c in logged.session_log("short")] == ["app.t5"]
    assert stored_counts(logged) == recomputed_counts(logged) == Counter({("app.t3", "app.t4"): 1})
    logged.set_session_retention(max_calls=None, max_age_days=None)
    with pytest.raises(InvalidInputError, match="set a retention limit"):
        logged.prune_sessions()
    for bad in ({"max_calls": 0}, {"max_calls": 1.5}, {"max_age_days": -1}, {"max_age_days": float("nan")}):
        with pytest.raises(InvalidInputError):
            logged.set_session_retention(**bad)  # type: ignore[arg-type]
    for tiny in (1e-12, 0.99 / 86400):  # under a second: would be stored as 0 days, refused by every later write
        with pytest.raises(InvalidInputError, match="max_age_days must be None or a number of days from 1 second"):
            logged.set_session_retention(max_age_days=tiny)
    logged.set_session_retention(max_age_days=1 / 86400)
    assert logged.session_retention()["max_age_days"] == pytest.approx(1 / 86400)
    logged.record_calls("s", ["app.t1"])
    logged.set_session_retention(max_calls=None, max_age_days=None)
    for huge in ({"max_calls": 10**400}, {"max_age_days": 10**400}):  # past a float's range
        with pytest.raises(InvalidInputError, match=next(iter(huge))):
            logged.set_session_retention(**huge)
    for bad_age in (timedelta(days=-1), timedelta(days=10**6)):  # the second would overflow a datetime
        with pytest.raises(InvalidInputError, match="older_than"):
            logged.prune_sessions(older_than=bad_age)


def test_calls_retention_trimmed_are_not_logged_again(logged: ToolStore) -> None:
    """An agent passes its whole message list at every step: the calls retention trimmed from the log must not come
    back as new ones (with a fresh time and a transition from the newest call)."""
    from toolstore.integrations.openai import route_messages

    logged.set_session_retention(max_calls=2)
    calls = [SessionCall(f"app.t{i}", call_id=f"c{i}") for i in (1, 2, 3)]
    assert logged.record_calls("s", calls) == 3
    assert logged.record_calls("s", calls) == 0  # c1 was trimmed, but it came before c3, which the log holds
    assert [(c.tool_id, c.call_id) for c in logged.session_log("s")] == [("app.t2", "c2"), ("app.t3", "c3")]
    assert stored_counts(logged) == recomputed_counts(logged) == Counter({("app.t2", "app.t3"): 1})
    assert logged.record_calls("s", [*calls, SessionCall("app.t4", call_id="c4")]) == 1  # only the new one
    step = [{"id": f"m{i}", "type": "function", "function": {"name": f"t{i}", "arguments": "{}"}} for i in (5, 6, 7)]
    messages = [
        {"role": "user", "content": "run the tools"},
        {"role": "assistant", "content": None, "tool_calls": step},
        *({"role": "tool", "tool_call_id": f"m{i}", "content": "ok"} for i in (5, 6, 7)),
    ]
    for _ in range(2):  # the same list twice
        route_messages(logged, messages, session="chat")
    assert [(c.tool_id, c.call_id) for c in logged.session_log("chat")] == [("app.t6", "m6"), ("app.t7", "m7")]


def test_a_session_pruned_empty_does_not_log_its_calls_again(logged: ToolStore) -> None:
    """Retention or a prune by age may take every call of a session: the same message list passed again must not log
    them again (fresh times, transitions the log no longer had); only calls after the last one seen are new. A prune
    of the whole session (``prune_sessions(session=...)``) forgets it: then the list is new again."""
    from toolstore.integrations.openai import route_messages

    def messages(*numbers: int) -> list[dict[str, Any]]:
        step = [{"id": f"m{i}", "type": "function", "function": {"name": f"t{i}", "arguments": "{}"}} for i in numbers]
        replies = [{"role": "tool", "tool_call_id": f"m{i}", "content": "ok"} for i in numbers]
        return [{"role": "user", "content": "run the tools"}, {"role": "assistant", "tool_calls": step}, *replies]

    def log(session: str) -> list[str | None]:
        return [c.call_id for c in logged.session_log(session)]

    def age(session: str) -> None:
        with logged.connection() as conn:
            conn.execute(
                "update session_calls set called_at = called_at - interval '30 days' where session_id = %s", [session]
            )

    route_messages(logged, messages(1, 2, 3), session="chat")
    age("chat")
    assert logged.prune_sessions(older_than=timedelta(days=7))["calls"] == 3 and log("chat") == []
    route_messages(logged, messages(1, 2, 3), session="chat")  # the same list: nothing new
    assert log("chat") == [] and stored_counts(logged) == recomputed_counts(logged) == Counter()
    # the session is kept, without calls: what it has seen (the last call id), no session went
    assert {r["session_id"]: r["calls"] for r in logged.sessions()} == {"chat": 0}
    route_messages(logged, messages(1, 2, 3, 4, 5), session="chat")  # only the calls after the last one seen
    assert log("chat") == ["m4", "m5"]
    assert stored_counts(logged) == recomputed_counts(logged) == Counter({("app.t4", "app.t5"): 1})
    # the retention's age, applied by a prune of every session, and a prune by age of this one session
    logged.set_session_retention(max_age_days=7)
    age("chat")
    assert logged.prune_sessions() == {"calls": 2, "sessions": 0}  # kept, as it remembers a call id
    assert logged.record_calls("chat", [SessionCall(f"app.t{i}", call_id=f"m{i}") for i in range(1, 6)]) == 0
    route_messages(logged, messages(1, 2, 3, 4, 5, 6), session="chat")
    assert logged.prune_sessions(older_than=timedelta(0), session="chat") == {"calls": 1, "sessions": 0}
    route_messages(logged, messages(1, 2, 3, 4, 5, 6), session="chat")
    assert log("chat") == [] and stored_counts(logged) == recomputed_counts(logged) == Counter()
    # a log trimmed to calls without a call id: the calls before them were seen all the same
    logged.set_session_retention(max_calls=2)
    calls = [*(SessionCall(f"app.t{i}", call_id=f"c{i}") for i in (1, 2, 3)), "app.t4", "app.t5"]
    assert logged.record_calls("ids", calls) == 5 and log("ids") == [None, None]
    assert logged.record_calls("ids", calls[:3]) == 0
    # forgetting the session (a prune of all of it) or replacing it by an import starts it over
    assert logged.prune_sessions(session="chat") == {"calls": 0, "sessions": 1}
    assert logged.sessions()[0]["session_id"] == "ids" and len(logged.sessions()) == 1
    route_messages(logged, messages(1, 2, 3), session="chat")
    assert log("chat") == ["m2", "m3"]  # max_calls 2
    logged.import_sessions([("ids", ["app.t6"])])
    assert logged.record_calls("ids", calls[:3]) == 3
    assert stored_counts(logged) == recomputed_counts(logged)


def test_a_list_edited_past_the_last_call_logs_nothing_again(logged: ToolStore) -> None:
    """A session whose log a prune by age emptied, given its message list without the last call it logged (the
    agent dropped or redid that step), logs none of the older calls again: it remembers the newest 64 call ids it has
    seen, as hashes in its row, cut at each write (older ones are new again once gone from the log too); forgetting
    the session takes them with the row."""
    from toolstore.integrations.openai import route_messages

    def messages(*numbers: int) -> list[dict[str, Any]]:
        step = [
            {"id": f"m{i}", "type": "function", "function": {"name": f"t{i % 8}", "arguments": "{}"}} for i in numbers
        ]
        replies = [{"role": "tool", "tool_call_id": f"m{i}", "content": "ok"} for i in numbers]
        return [{"role": "user", "content": "run the tools"}, {"role": "assistant", "tool_calls": step}, *replies]

    def seen(session: str) -> int:
        with logged.connection() as conn:
            row = conn.execute("select cardinality(seen_calls) from sessions where session_id = %s", [session])
            return row.fetchone()[0]  # type: ignore[index]

    route_messages(logged, messages(1, 2, 3, 4, 5), session="chat")
    assert logged.prune_sessions(older_than=timedelta(0)) == {"calls": 5, "sessions": 0}
    route_messages(logged, messages(1, 2, 3, 4), session="chat")  # m5 edited away: m4 was seen all the same
    assert logged.record_calls("chat", [SessionCall("app.t1", call_id="m1")]) == 0
    assert logged.session_log("chat") == [] and stored_counts(logged) == recomputed_counts(logged) == Counter()
    route_messages(logged, messages(1, 2, 6), session="chat")  # after the last one seen: new
    assert [c.call_id for c in logged.session_log("chat")] == ["m6"]
    logged.record_calls("chat", [SessionCall("app.t1", call_id=f"n{i}") for i in range(100)])
    assert seen("chat") == 64
    logged.prune_sessions(older_than=timedelta(0))
    assert logged.new_calls("chat", ["n34", "n35", "x"]) == ["x"]  # n36..n99 are the newest 64, the others kept apart
    assert logged.prune_sessions(session="chat") == {"calls": 0, "sessions": 1}
    assert logged.new_calls("chat", ["m4", "n99"]) == ["m4", "n99"]


def messages_of(numbers: Any) -> list[dict[str, Any]]:
    """One user turn and an assistant message calling t{i % 8} with call id m{i} for each number, with the replies."""
    step = [{"id": f"m{i}", "type": "function", "function": {"name": f"t{i % 8}", "arguments": "{}"}} for i in numbers]
    replies = [{"role": "tool", "tool_call_id": f"m{i}", "content": "ok"} for i in numbers]
    return [{"role": "user", "content": "run the tools"}, {"role": "assistant", "tool_calls": step}, *replies]


def seen_rows(store: ToolStore, session: str | None = None) -> list[int]:
    """The positions of the call ids ``session`` remembers (`session_seen_calls`; None: every session of a catalog)."""
    with store.connection() as conn:
        rows = conn.execute(
            "select seq from session_seen_calls where catalog_id = %s and (%s::text is null or session_id = %s)"
            " order by session_id, seq",
            [store.info().id, session, session],
        )
        return [r[0] for r in rows]


def test_a_long_conversation_replayed_from_an_earlier_point_logs_nothing_again(logged: ToolStore) -> None:
    """A conversation of 100 calls whose log a prune by age emptied, given again cut back to its first 10 calls (further
    back than the newest 64 call ids the session's row keeps), logs none of them again: the session remembers the call
    ids of every call its retention keeps (``session_seen_calls``, migration 0025); calls after them are new."""
    from toolstore.integrations.openai import route_messages

    route_messages(logged, messages_of(range(100)), session="chat")
    assert len(logged.session_log("chat")) == 100
    assert logged.prune_sessions(older_than=timedelta(0)) == {"calls": 100, "sessions": 0}
    assert logged.new_calls("chat", [f"m{i}" for i in range(10)]) == []
    route_messages(logged, messages_of(range(10)), session="chat")
    assert logged.session_log("chat") == [] and stored_counts(logged) == recomputed_counts(logged) == Counter()
    assert logged.record_calls("chat", [SessionCall("app.t1", call_id=f"m{i}") for i in range(5)]) == 0
    route_messages(logged, messages_of([*range(10), 100, 101]), session="chat")  # the list goes on from there
    assert [c.call_id for c in logged.session_log("chat")] == ["m100", "m101"]
    assert stored_counts(logged) == recomputed_counts(logged) == Counter({("app.t4", "app.t5"): 1})


def test_the_call_ids_a_session_remembers_are_bounded_by_retention_and_go_with_it(dsn: str, logged: ToolStore) -> None:
    """``session_seen_calls`` keeps the call ids of the calls the retention keeps (at each write, and by a prune of
    every session), not more; a prune by an age of its own takes calls but not those; forgetting the session, an
    import or dropping the catalog takes them."""
    logged.set_session_retention(max_calls=70)
    calls = [SessionCall(f"app.t{i % 8}", call_id=f"c{i}") for i in range(100)]
    assert logged.record_calls("s", calls) == 100
    assert seen_rows(logged, "s") == list(range(31, 101))  # the newest 70 positions, as the log
    assert [c.seq for c in logged.session_log("s")] == seen_rows(logged, "s")
    assert logged.new_calls("s", ["c29"]) == ["c29"] and logged.new_calls("s", ["c30"]) == []
    assert logged.prune_sessions(older_than=timedelta(0)) == {"calls": 70, "sessions": 0}
    assert seen_rows(logged, "s") == list(range(31, 101))  # a prune by age: the log only
    assert logged.record_calls("s", [*calls, "app.t1", SessionCall("app.t2", call_id="d")]) == 2
    assert seen_rows(logged, "s") == [*range(33, 101), 102]  # positions 101 and 102, 101 without a call id
    with logged.connection() as conn:
        conn.execute("update session_seen_calls set called_at = called_at - interval '8 days' where seq < 50")
    logged.set_session_retention(max_calls=40, max_age_days=7)  # a prune by the retention: its age, its count
    assert logged.prune_sessions() == {"calls": 0, "sessions": 0}
    assert seen_rows(logged, "s") == [*range(63, 101), 102]  # those 40 back and newer: 63..102
    logged.set_session_retention(max_calls=None, max_age_days=7)
    with logged.connection() as conn:
        conn.execute("update session_seen_calls set called_at = called_at - interval '8 days' where seq < 70")
    logged.record_calls("s", [SessionCall("app.t3", call_id="e")])  # a write applies the age too
    assert seen_rows(logged, "s") == [*range(70, 101), 102, 103]
    logged.import_sessions([("s", [SessionCall("app.t1", call_id="i1")])])
    assert seen_rows(logged, "s") == [1] and logged.new_calls("s", ["c99", "i1"]) == []
    assert logged.new_calls("s", ["c99", "i1", "c98"]) == ["c98"]
    logged.record_calls("t", [SessionCall("app.t1", call_id="t1")])
    assert logged.prune_sessions(session="s") == {"calls": 1, "sessions": 1}
    assert seen_rows(logged, "s") == [] and seen_rows(logged) == [1]
    catalog = logged.info().id
    logged.drop_catalog()
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select count(*) from toolstore.session_seen_calls where catalog_id = %s", [catalog])
        assert rows.fetchone() == (0,)


def test_new_calls_are_what_an_append_logs(logged: ToolStore) -> None:
    """``new_calls`` (which of a message list's calls route_messages reports) names exactly the calls a write of
    that list then logs, through edits, repeats, trims and prunes; it writes nothing; bad input is refused."""
    rng = random.Random(5)
    logged.set_session_retention(max_calls=4)
    history: list[str] = []
    for step in range(40):
        history += [f"c{step}-{i}" for i in range(rng.randint(0, 3))]
        ids = list(history)
        if rng.random() < 0.4 and ids:  # an edited list: a call or the tail from it removed, a call repeated
            cut = rng.randrange(len(ids))
            ids = ids[:cut] + (ids[cut + 1 :] if rng.random() < 0.5 else [])
            ids += rng.sample(history, 1)
        if rng.random() < 0.2:
            logged.prune_sessions(older_than=timedelta(0))
        before = [c.call_id for c in logged.session_log("s")]
        new = logged.new_calls("s", ids)
        assert [c.call_id for c in logged.session_log("s")] == before  # a read
        written = logged.record_calls("s", [SessionCall(f"app.t{len(i) % 8}", call_id=i) for i in ids])
        assert written == len(new), step
        if new:
            assert [c.call_id for c in logged.session_log("s")][-min(len(new), 4) :] == new[-4:], step
    assert logged.new_calls("never", ["x", "y"]) == ["x", "y"] and [r["session_id"] for r in logged.sessions()] == ["s"]
    bad_input = [("c1", "call_ids must be a list"), ([""], r"call_ids\[0\] is empty"), ([3], "call_ids")]
    for bad, error in [*bad_input, (["c"] * 10_001, "more than 10,000 call ids")]:
        with pytest.raises(InvalidInputError, match=error):
            logged.new_calls("s", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match=error):
            logged.record_new_calls("s", bad, [])  # type: ignore[arg-type]
    log = logged.session_log("s")
    for call in (SessionCall("app.t1", call_id="elsewhere"), SessionCall("app.t1")):
        with pytest.raises(InvalidInputError, match=r"calls\[0\]\.call_id: .* is not one of call_ids"):
            logged.record_new_calls("s", ["fresh"], [call])
    assert logged.session_log("s") == log and logged.new_calls("s", ["fresh"]) == ["fresh"]
    assert logged.record_new_calls("s", ["fresh", "x"], [SessionCall("app.t1", call_id="x")]) == ["fresh", "x"]
    assert logged.session_log("s")[-1].call_id == "x" and logged.new_calls("s", ["fresh", "x"]) == []


def test_pruning_a_session_never_logged_removes_no_session(logged: ToolStore) -> None:
    logged.record_calls("real", ["app.t1", "app.t2"])
    assert logged.prune_sessions(session="never-logged") == {"calls": 0, "sessions": 0}
    assert [r["session_id"] for r in logged.sessions()] == ["real"]
    logged.import_sessions([("empty", [])])  # a session that exists without calls is one that goes
    assert logged.prune_sessions(session="empty") == {"calls": 0, "sessions": 1}
    assert logged.prune_sessions(session="real") == {"calls": 2, "sessions": 1}
    assert logged.sessions() == []


def test_forget_idle_forgets_exactly_the_idle_sessions(logged: ToolStore) -> None:
    """``prune_sessions(forget_idle=...)`` forgets (row, calls, last call id) every session whose last write
    (``updated_at``) is older than the age, and no other; the counts follow; a bad value is refused."""

    def idle(*sessions: str) -> None:  # last written 100 days ago
        with logged.connection() as conn:
            conn.execute(
                "update sessions set updated_at = now() - interval '100 days' where session_id = any (%s)",
                [list(sessions)],
            )

    logged.set_session_retention(max_calls=None)
    logged.record_calls("old-a", ["app.t1", "app.t2", "app.t3"])
    logged.record_calls("old-b", [SessionCall("app.t3", call_id="b1"), SessionCall("app.t4", call_id="b2")])
    logged.record_calls("old-empty", [SessionCall("app.t5", call_id="e1")])
    logged.prune_sessions(session="old-empty", older_than=timedelta(0))  # trimmed: a row with no call left
    logged.record_calls("active", ["app.t2", "app.t3", "app.t4"])
    logged.record_calls("revived", [SessionCall("app.t6", call_id="r1")])
    idle("old-a", "old-b", "old-empty", "revived")
    assert logged.record_calls("revived", [SessionCall("app.t6", call_id="r1")]) == 0  # a write all the same
    assert {r["session_id"]: r["calls"] for r in logged.sessions()}["old-empty"] == 0
    active_log = logged.session_log("active")
    assert logged.prune_sessions(forget_idle=timedelta(days=90)) == {"calls": 5, "sessions": 3}
    assert {r["session_id"]: r["calls"] for r in logged.sessions()} == {"active": 3, "revived": 1}
    assert logged.session_log("active") == active_log
    assert (
        stored_counts(logged)
        == recomputed_counts(logged)
        == Counter({("app.t2", "app.t3"): 1, ("app.t3", "app.t4"): 1})
    )
    # forgotten: the call ids they had seen log anew
    assert logged.record_calls("old-b", [SessionCall("app.t3", call_id="b1"), SessionCall("app.t4", call_id="b2")]) == 2
    assert logged.prune_sessions(forget_idle=timedelta(days=90)) == {"calls": 0, "sessions": 0}
    # with a trim: both in one prune, the counts still equal the log
    logged.set_session_retention(max_calls=2)
    idle("active")
    assert logged.prune_sessions(forget_idle=timedelta(days=1), older_than=timedelta(days=1)) == {
        "calls": 3,
        "sessions": 1,
    }
    assert sorted(r["session_id"] for r in logged.sessions()) == ["old-b", "revived"]
    assert stored_counts(logged) == recomputed_counts(logged)
    for bad in (timedelta(0), timedelta(seconds=-1), timedelta(days=100_001), 90, "90d"):
        with pytest.raises(InvalidInputError, match="forget_idle must be a timedelta"):
            logged.prune_sessions(forget_idle=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="forget_idle .* without session"):
        logged.prune_sessions(forget_idle=timedelta(days=1), session="old-b")
    assert len(logged.sessions()) == 2


def test_import_replaces_sessions(logged: ToolStore) -> None:
    assert logged.import_sessions([("a", ["app.t1", "app.t2"]), ("b", ["app.t2", "app.t1"])]) == {
        "sessions": 2,
        "calls": 4,
    }
    assert logged.import_sessions([("a", ["app.t1", "app.t2"]), ("b", ["app.t2", "app.t1"])]) == {
        "sessions": 2,
        "calls": 4,
    }
    assert stored_counts(logged) == Counter({("app.t1", "app.t2"): 1, ("app.t2", "app.t1"): 1})
    with pytest.raises(UnknownToolError, match=r"2 called tool.*: 'nope' \(session 'c'\), 'nah' \(session 'd'\)$"):
        logged.import_sessions([("a", ["app.t3"]), ("c", ["app.t1", "nope"]), ("d", ["nope", "nah"])])
    assert [c.tool_id for c in logged.session_log("a")] == ["app.t1", "app.t2"]
    with pytest.raises(InvalidInputError, match=r"session #2: session id is empty"):
        logged.import_sessions([("a", ["app.t3"]), ("", ["app.t1"])])


def test_a_session_id_given_twice_to_import_sessions_is_refused_and_writes_nothing(logged: ToolStore) -> None:
    """import_sessions([("a", calls), ("a", others)]) replaced the first log by the second without a word (reporting
    one session); a session id given twice is refused, naming it and both positions, and nothing is written."""
    logged.import_sessions([("kept", ["app.t1"])])
    with pytest.raises(InvalidInputError, match=r"session #3: session id 'a' is given twice \(session #1 too\)"):
        logged.import_sessions([("a", ["app.t1"]), ("kept", ["app.t2"]), ("a", ["app.t3", "app.t4"])])
    assert not logged.has_session("a")
    assert [c.tool_id for c in logged.session_log("kept")] == ["app.t1"]


def test_both_stores_take_and_refuse_the_same_session_writes(dsn: str, logged: ToolStore) -> None:
    """AsyncToolStore listed what it was given in the event loop before ToolStore's checks, so a single value was split
    into characters or keys (record_calls("s", "a") logged a call of tool "a"); both stores now refuse it alike, and
    import_sessions takes a mapping of session id to calls on both (a mapping's keys were taken for pairs). One
    SessionCall or a number where a list goes is refused too, naming its type, by every session write, and a listing's
    bad limit or prev as the bad input it is."""
    refusals = [
        ("record_calls", ("s", "app.t1"), "calls must be a list of tool calls, not a single value"),
        ("record_calls", ("s", {"tool": "app.t1"}), "calls must be a list of tool calls, not a single value"),
        ("record_new_calls", ("s", ["c1"], "app.t1"), "calls must be a list of tool calls, not a single value"),
        ("import_sessions", ("s1",), "sessions must be .session id, calls. pairs or a mapping"),
        ("import_sessions", ([("s1", ["app.t1"], "x")],), r"session #1: expected a \(session id, calls\) pair"),
        # one call or a number where a list goes: a TypeError out of iteration ('SessionCall' object is not iterable)
        ("record_calls", ("s", SessionCall("app.t1")), r"calls must be a list of tool calls, not .*\(SessionCall\)"),
        ("record_calls", ("s", 5), r"calls must be a list of tool calls, not a single value \(int\)"),
        ("import_sessions", ([("s", SessionCall("app.t1"))],), r"session #1: calls must be a list of tool calls"),
        ("new_calls", ("s", 5), r"call_ids must be a list of call ids, not a single value \(int\)"),
        ("record_new_calls", ("s", 5, ["app.t1"]), r"call_ids must be a list of call ids, not a single value"),
        ("record_calls", ("s", None), r"^calls must be a list of tool calls, got None$"),  # was '... (NoneType)'
        ("new_calls", ("s", None), r"^call_ids must be a list of call ids, got None$"),
        # a DatabaseError ('LIMIT must not be negative', 'bigint out of range'), or no transition at all for prev=5
        ("sessions", (), r"limit must be an integer from 1 to 9,223,372,036,854,775,807, got -1", {"limit": -1}),
        ("transitions", (), r"limit must be an integer from 1 to .*, got 1180591620717411303424", {"limit": 2**70}),
        ("transitions", (), r"prev must be a string, got int", {"prev": 5}),
    ]

    async def run_async() -> list[str]:
        errors = []
        async with AsyncToolStore(dsn, embedder=None, catalog=logged.catalog, create=False) as astore:
            for method, args, _, *options in refusals:  # options: the keyword arguments, when given
                try:
                    await getattr(astore, method)(*args, **(options[0] if options else {}))
                    errors.append("")
                except InvalidInputError as exc:
                    errors.append(str(exc))
            assert await astore.import_sessions({"a1": ["app.t1", "app.t2"]}) == {"sessions": 1, "calls": 2}
        return errors

    for (method, args, error, *options), async_error in zip(refusals, asyncio.run(run_async())):
        with pytest.raises(InvalidInputError, match=error) as refused:
            getattr(logged, method)(*args, **(options[0] if options else {}))
        assert async_error == str(refused.value), method
    assert logged.import_sessions({"s1": ["app.t1"], "s2": ["app.t2", "app.t1"]}) == {"sessions": 2, "calls": 3}
    assert {r["session_id"] for r in logged.sessions()} == {"a1", "s1", "s2"}
    assert [c.tool_id for c in logged.session_log("a1")] == ["app.t1", "app.t2"]


def test_cli_sessions_end_to_end(dsn: str, tmp_path: Path) -> None:
    with ToolStore(dsn, embedder=HashingEmbedder(16), catalog="cli") as store:
        store.upsert(TOOLS)
    file = tmp_path / "sessions.jsonl"
    rows = [
        {"sid": "one", "turns": [{"query": "q", "relevant": ["app.t1"], "calls": ["app.t1", "app.t2"]}]},
        {"sid": "two", "turns": [{"query": "q", "relevant": ["app.t2"]}, {"query": "r", "relevant": ["app.t3"]}]},
    ]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "TOOLSTORE_DSN": dsn}

    def run(*args: str) -> Any:
        cmd = [sys.executable, "-m", "toolstore", "-c", "cli", "--embedder", "hashing-16", "sessions", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert run("import", str(file)) == {"version": 1, "sessions": 2, "calls": 4}
    assert run("import", str(file))["calls"] == 4  # replaced, not doubled
    assert {s["session_id"]: s["calls"] for s in run("list")["sessions"]} == {"one": 2, "two": 2}
    assert [c["tool"] for c in run("show", "two")["calls"]] == ["app.t2", "app.t3"]
    pairs = {(t["prev_tool"], t["next_tool"]): t["n"] for t in run("transitions")["transitions"]}
    assert pairs == {("app.t1", "app.t2"): 1, ("app.t2", "app.t3"): 1}
    assert run("transitions", "--from", "app.t2")["transitions"] == [
        {"prev_tool": "app.t2", "next_tool": "app.t3", "n": 1}
    ]
    assert run("retention", "--max-age-days", "30", "--max-calls", "none") == {
        "version": 1,
        "max_calls": None,
        "max_age_days": 30.0,
    }
    assert run("prune", "--session", "one") == {"version": 1, "calls": 2, "sessions": 1, "session_found": True}
    assert run("prune", "--older-than", "1h") == {"version": 1, "calls": 0, "sessions": 0}
    with ToolStore(dsn, embedder=None, catalog="cli") as store, store.connection() as conn:
        conn.execute("update sessions set updated_at = now() - interval '100 days' where session_id = 'two'")
    assert run("prune", "--forget-idle", "90d") == {"version": 1, "calls": 2, "sessions": 1}
    assert run("list")["sessions"] == []
    bad = subprocess.run(
        [sys.executable, "-m", "toolstore", "-c", "cli", "sessions", "prune", "--older-than", "soon"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        bad.returncode == 2 and "--older-than: 'soon' is not a duration" in bad.stderr and "Traceback" not in bad.stderr
    )
    with pytest.raises(click.BadParameter, match="too long"):
        parse_duration("99999999999d")
    # past the library's bound but no overflow: 'error: older_than must be a timedelta from 0 to 100,000 days, got
    # datetime.timedelta(days=999999)', naming the library's argument, not the option
    for option in ("--older-than", "--forget-idle"):
        bad = subprocess.run(
            [sys.executable, "-m", "toolstore", "-c", "cli", "sessions", "prune", option, "999999d"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        said = f"{option}: '999999d' is too long: at most 100,000 days"
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "toolstore", "-c", "cli", "sessions", "prune", "--forget-idle", "later"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        bad.returncode == 2
        and "--forget-idle: 'later' is not a duration" in bad.stderr
        and "Traceback" not in bad.stderr
    )


def test_a_write_retried_after_a_lost_connection_logs_the_calls_it_was_given(
    dsn: str, logged: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's write runs once more on a fresh connection when the first was lost (a restarted server). The calls
    were read inside the first try, so a generator given to record_calls, record_new_calls or import_sessions (or
    AsyncToolStore's, which hands it on as given) was spent by then: the retry logged nothing and said 0, and an
    import replaced the sessions' logs with empty ones. The calls are now read before the write is tried."""
    from toolstore import _sessions

    append, lost = _sessions._append_rows, []

    def terminated_once(conn: Any, params: Any, calls: Any) -> list[str]:
        if not lost:  # the server ends this backend mid-write, as a restart would
            lost.append(True)
            conn.execute("select pg_terminate_backend(pg_backend_pid())")
        return append(conn, params, calls)

    monkeypatch.setattr(_sessions, "_append_rows", terminated_once)

    def written(session: str) -> list[str]:
        return [c.tool_id for c in logged.session_log(session)]

    assert logged.record_calls("r", (t for t in ["app.t1", "app.t2"])) == 2 and lost
    lost.clear()
    calls = (SessionCall(t, call_id=f"c{i}") for i, t in enumerate(["app.t3", "app.t4"]))
    assert logged.record_new_calls("n", ["c0", "c1"], calls) == ["c0", "c1"] and lost
    lost.clear()
    assert logged.import_sessions([("i", (t for t in ["app.t5"]))]) == {"sessions": 1, "calls": 1} and lost
    lost.clear()

    async def record_async() -> int:
        async with AsyncToolStore(dsn, embedder=None, catalog=logged.catalog, create=False) as astore:
            return await astore.record_calls("a", (t for t in ["app.t6", "app.t7"]))

    assert asyncio.run(record_async()) == 2 and lost
    assert [written(s) for s in "rnia"] == [
        ["app.t1", "app.t2"],
        ["app.t3", "app.t4"],
        ["app.t5"],
        ["app.t6", "app.t7"],
    ]
