"""A write whose connection is lost during its COMMIT: written once, whether the COMMIT took effect or not.

The loss is made by wrapping psycopg's transaction exit: the outermost transaction's COMMIT is sent (or not), then
the connection dies as a server that went away leaves it, and the client sees the OperationalError psycopg raises then.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import toolstore._indexes
from toolstore import DatabaseError, HashingEmbedder, Tool, ToolStore
from toolstore._commits import Commits
from toolstore._indexes import VECTOR_TABLES, index_name, partition_name
from toolstore._sql import query

LOST = "consuming input failed: server closed the connection unexpectedly"
TOOLS = [Tool(id="mail.send", name="send_mail", description="Send an email")]


def lose_the_next_commit(
    monkeypatch: pytest.MonkeyPatch, *, commit: bool, close: bool = True, after: int = 0
) -> list[int]:
    """The next outermost transaction that ends well (after ``after`` others): COMMIT sent (``commit``) or not, then
    the connection dropped (``close``: by the client; else the server still holds the transaction). Returns the
    backend pids it hit."""
    original = psycopg.Transaction.__exit__
    hit: list[int] = []
    passed: list[int] = []

    def exit(self: psycopg.Transaction, exc_type: object, exc: object, tb: object) -> object:
        if hit or exc_type is not None or self.savepoint_name:  # "" for the outermost
            return original(self, exc_type, exc, tb)  # type: ignore[arg-type]
        if len(passed) < after:
            passed.append(1)
            return original(self, exc_type, exc, tb)  # type: ignore[arg-type]
        conn = self.connection
        hit.append(conn.info.backend_pid)
        if commit:
            original(self, None, None, None)
        if close:
            conn.pgconn.finish()
        raise psycopg.OperationalError(LOST)

    monkeypatch.setattr(psycopg.Transaction, "__exit__", exit)
    return hit


@pytest.fixture
def store(dsn: str) -> Iterator[ToolStore]:
    """lock_timeout: a transaction the server still holds fails the next write on its locks instead of hanging."""
    with ToolStore(make_conninfo(dsn, options="-c lock_timeout=5s"), embedder=HashingEmbedder(32), catalog="c") as s:
        s.upsert(TOOLS)
        yield s


@pytest.mark.parametrize(
    "took_effect", [True, False], ids=["took effect: not run again", "never took effect: run again"]
)
def test_a_lost_commit_writes_the_calls_once(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch, took_effect: bool
) -> None:
    """The COMMIT reached the server (the write is done: a second run would log the call twice) or not (the second
    try writes it): either way the call is logged once."""
    hit = lose_the_next_commit(monkeypatch, commit=took_effect)
    assert store.record_calls("s1", ["mail.send"]) == 1
    assert hit
    assert [c.tool_id for c in store.session_log("s1")] == ["mail.send"]


def test_a_commit_that_never_reached_the_server_is_ended_there_and_written_once(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server still holds the transaction (and its locks) of a connection the client lost: it is ended, so its
    outcome is final, and the second try writes."""
    hit = lose_the_next_commit(monkeypatch, commit=False, close=False)
    assert store.record_calls("s1", ["mail.send"]) == 1
    assert [c.tool_id for c in store.session_log("s1")] == ["mail.send"]
    with store.connection() as conn:
        assert conn.execute("select count(*) from pg_stat_activity where pid = %s", hit).fetchone() == (0,)


def test_a_drop_whose_connection_was_lost_after_its_commit_is_done(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tried again, the drop said the catalog it had dropped did not exist. The partitions' drop that follows it, lost
    with the connection, is done on a fresh one (it was left to the next drop)."""
    cid = store.info().id
    hit = lose_the_next_commit(monkeypatch, commit=True)
    store.drop_catalog()
    assert len(hit) == 1
    assert "c" not in [c["name"] for c in store.catalogs()]
    assert partitions(store, cid) == []


def partitions(store: ToolStore, catalog_id: int) -> list[str]:
    """The vector tables' partitions of catalog ``catalog_id`` that exist, attached or not."""
    names = [partition_name(table, catalog_id) for table in VECTOR_TABLES]
    with store.connection() as conn:
        return [r[0] for r in conn.execute("select relname from pg_class where relname = any(%s)", [names])]


def indexes(store: ToolStore) -> list[str]:
    with store.connection() as conn:
        return [r[0] for r in conn.execute(query("vector_indexes"), {"catalog": store.info().id})]


def test_an_upsert_lost_after_its_commit_builds_its_indexes_on_a_fresh_connection(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tools' transaction (after the embedding cache's) committed; the connection is lost before the catalog's
    indexes are made whole: that follow-up is done again on a fresh connection, and the upsert returns its report (it
    said 'the connection was lost after the write committed')."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 2)  # the second tool makes an index wanted
    hit = lose_the_next_commit(monkeypatch, commit=True, after=1)
    report = store.upsert([Tool(id="cal.add", name="add_event", description="Add a calendar event")])
    assert len(hit) == 1 and report.inserted == ["cal.add"]
    assert [t.id for t in store.tools()] == ["cal.add", "mail.send"]
    assert indexes(store) == [index_name("tool_vectors", store.info().id, 32)]


def test_a_follow_up_lost_twice_says_what_committed_and_what_did_not(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index build is lost on the fresh connection too: one more try only, then a DatabaseError that says the
    write committed and who builds the indexes; the next write does."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 2)
    build = toolstore._indexes.ensure_catalog_indexes
    builds: list[int] = []

    def lost_build(conn: psycopg.Connection, catalog: str) -> None:
        builds.append(conn.info.backend_pid)
        if len(builds) > 1:
            return build(conn, catalog)
        conn.pgconn.finish()
        raise psycopg.OperationalError(LOST)

    monkeypatch.setattr(toolstore._indexes, "ensure_catalog_indexes", lost_build)
    hit = lose_the_next_commit(monkeypatch, commit=True, after=1)
    said = "the write committed, but building .* HNSW indexes after it did not: .* the catalog's next write does it"
    with pytest.raises(DatabaseError, match=said):
        store.upsert([Tool(id="cal.add", name="add_event", description="Add a calendar event")])
    assert len(hit) == 1 and len(builds) == 1  # not on the lost connection; once on a fresh one
    assert [t.id for t in store.tools()] == ["cal.add", "mail.send"] and indexes(store) == []
    store.upsert([])
    assert len(builds) == 2 and indexes(store) == [index_name("tool_vectors", store.info().id, 32)]


def test_work_lost_after_its_commit_that_is_no_follow_up_is_not_run_again(store: ToolStore) -> None:
    """A write's transaction committed, then the connection is lost in work that may not be done twice (not a
    follow-up): the error says the write committed, and it is not tried again."""
    tries: list[int] = []

    def work(conn: psycopg.Connection) -> None:
        tries.append(1)
        with conn.transaction():
            conn.execute("update catalogs set settings = settings || '{\"x\": 1}'")
        conn.pgconn.finish()
        raise psycopg.OperationalError(LOST)

    with pytest.raises(DatabaseError, match="lost after the write committed, so it was not run again"):
        store._run(work)
    assert tries == [1]


def test_a_write_lost_after_the_embedding_cache_committed_is_tried_again(
    store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache's vectors are the same the second time: its commit does not make the write done."""
    hit = lose_the_next_commit(monkeypatch, commit=True)
    report = store.upsert([Tool(id="cal.add", name="add_event", description="Add a calendar event")])
    assert len(hit) == 1 and report.inserted == ["cal.add"]
    assert [t.id for t in store.tools()] == ["cal.add", "mail.send"]


def test_a_restarted_servers_committed_is_not_taken_for_done_and_its_other_answers_say_not_committed(dsn: str) -> None:
    """A server that crashed during the COMMIT may have lost the transaction with its id (its commit record never
    reached the disk) and given the id to another since: its "committed" may be the other's, so the write is neither
    taken for done nor run again (an error says so); "aborted", and an id not handed out yet, say it never committed.
    The restart is the server's start time differing from the one read with the id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = conn.execute("select pg_postmaster_start_time()").fetchone()[0]  # type: ignore[index]
        with conn.transaction():
            committed = conn.execute("select pg_current_xact_id()::text").fetchone()[0]  # type: ignore[index]
        with conn.transaction():
            aborted = conn.execute("select pg_current_xact_id()::text").fetchone()[0]  # type: ignore[index]
            raise psycopg.Rollback()
    future = str(int(committed) + 1_000_000)
    lost, before = psycopg.OperationalError(LOST), started - timedelta(minutes=1)
    assert Commits(dsn, 5).took_effect(committed, 0, started, lost) is True
    assert Commits(dsn, 5).took_effect(aborted, 0, started, lost) is False
    restarted = Commits(dsn, 5)
    with pytest.raises(DatabaseError, match="restarted since"):
        restarted.took_effect(committed, 0, before, lost)
    assert restarted.undecided and not restarted.clean
    assert Commits(dsn, 5).took_effect(aborted, 0, before, lost) is False
    assert Commits(dsn, 5).took_effect(future, 0, before, lost) is False


def test_a_transaction_that_wrote_nothing_leaves_a_lost_connection_to_a_second_try(store: ToolStore) -> None:
    """A read in a transaction of its own (a snapshot), committed, then the connection lost: nothing was written, so
    the work is tried again, as before commits were watched; and the read takes no transaction id (the id is asked for
    just before the COMMIT, when the transaction has one)."""
    tries: list[object] = []

    def work(conn: psycopg.Connection) -> str:
        with conn.transaction():
            tries.append(conn.execute("select pg_current_xact_id_if_assigned()").fetchone()[0])  # type: ignore[index]
        if len(tries) == 1:
            conn.pgconn.finish()
            raise psycopg.OperationalError(LOST)
        return "done"

    assert store._run(work) == "done"
    assert tries == [None, None]


def test_a_callers_own_connection_is_lent_as_the_readme_says(
    dsn: str, store: ToolStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README, "Your own SQL": a transaction on ``store.connection()`` is not watched, so a COMMIT lost there raises
    though it took effect, and nothing tries it again; and a SET there stays for the next call on that connection."""
    hit = lose_the_next_commit(monkeypatch, commit=True)
    with pytest.raises(DatabaseError, match="server closed the connection"):
        with store.connection() as conn, conn.transaction():
            conn.execute("update catalogs set settings = settings || '{\"x\": 1}'")
    assert len(hit) == 1 and store.info().settings["x"] == 1
    with ToolStore(dsn, embedder=None, catalog="c", pool_size=1) as one:
        with one.connection() as conn:
            conn.execute("set statement_timeout = '1234ms'")
        with one.connection() as conn:
            assert conn.execute("show statement_timeout").fetchone() == ("1234ms",)
