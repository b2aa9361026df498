"""Faults: the database stopping and coming back, the embedding provider failing or hanging, secrets in errors."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import psycopg
import pytest

from toolstore import (
    AsyncToolStore,
    DatabaseError,
    EmbedderError,
    HashingEmbedder,
    InvalidInputError,
    InvalidTypeError,
    OpenAIEmbedder,
    ToolStore,
    migrate,
)
from toolstore._connect import AsyncConnector, Connector, first_line
from toolstore._errors import redact
from toolstore.testing.fake_openai import FakeOpenAI

from catalog_gen import generated_queries, generated_tools
from servers import migrated_dsn, private_server, start, stop

TIMEOUT = 2.0
#: Generous: a call must fail within about its timeout, not after the 30 s a blocked pool used to wait.
BOUND = 3 * TIMEOUT + 4


def test_every_call_fails_fast_while_the_server_is_down_and_the_store_recovers() -> None:
    tools = generated_tools(30, seed=12)
    query = generated_queries(1)[0]
    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=HashingEmbedder(32), catalog="r", timeout=TIMEOUT) as store:
            store.upsert(tools)
            before = store.route(query).ids
            stop(server)
            calls = {
                "route": lambda: store.route(query),
                "upsert": lambda: store.upsert(tools),
                "tools": store.tools,
                "info": store.info,
                "remove": lambda: store.remove(tools[0].id),
            }
            for name, call in calls.items():
                started = time.monotonic()
                with pytest.raises(DatabaseError):
                    call()
                assert time.monotonic() - started < BOUND, name
            start(server)
            deadline = time.monotonic() + 60
            while True:  # the pool reconnects in the background: the first calls may still time out
                try:
                    assert store.route(query).ids == before
                    break
                except DatabaseError:
                    assert time.monotonic() < deadline, "the store did not recover"
                    time.sleep(0.5)
            assert store.upsert(tools).unchanged == 30


def test_a_call_waits_for_a_connection_once_while_the_server_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool timeout is not a lost connection: retrying it waited `timeout` twice."""
    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=None, catalog="r", timeout=TIMEOUT) as store:
            store.upsert(generated_tools(5))
            stop(server)
            with pytest.raises(DatabaseError):
                store.info()  # the pooled connection is found dead: the documented retry
            waits = []
            connection = store._db.connection

            def counted() -> object:
                waits.append(1)
                return connection()

            monkeypatch.setattr(store._db, "connection", counted)
            with pytest.raises(DatabaseError, match=f"within {TIMEOUT:g} s"):
                store.info()
            assert len(waits) == 1


def test_a_restart_between_calls_is_invisible(dsn: str) -> None:
    """Connections the server dropped (a restart, or terminated backends) are replaced, the call retried once."""
    with ToolStore(dsn, embedder=None, catalog="t", timeout=TIMEOUT, pool_size=2) as store:
        store.upsert(generated_tools(5))
        with store.connection() as conn:
            conn.execute("select 1")
        with ToolStore(dsn, embedder=None, catalog="t") as admin, admin.connection() as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity "
                "where datname = current_database() and pid <> pg_backend_pid()"
            )
        assert len(store.route("send a message")) > 0


#: Failed connection attempts the pool makes before the server comes back: psycopg_pool backs off 1, 2, 4 s between
#: them, so its fifth would come about 8 s after the fourth, past a call's `timeout` (3 s) once the server is back.
ATTEMPTS = 4


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_call_after_a_long_outage_gets_a_connection_once_the_server_is_back(kind: str) -> None:
    """The server was down long enough for the pool's reconnection to back off (a stop of 20 s, say): a route
    started after it came back failed, 'no database connection within 5 s: is the server up?', until the pool's next
    try, up to 11 s later (30 s after a minute's outage). A call waiting for a connection makes the pool try again
    at once."""
    query = generated_queries(1)[0]

    async def asynchronous(dsn: str, server: object) -> None:
        async with AsyncToolStore(dsn, embedder=None, catalog="r", timeout=3, pool_size=1) as store:
            assert len(await store.route(query)) > 0
            assert store._db is not None
            pool = store._db.pool
            await asyncio.to_thread(stop, server)
            while pool.connect_errors() < ATTEMPTS:  # calls meanwhile fail, as a busy service's do
                with pytest.raises(DatabaseError):
                    await store.info()
            await asyncio.to_thread(start, server)
            assert len(await store.route(query)) > 0

    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=None, catalog="r", timeout=3, pool_size=1) as store:
            store.upsert(generated_tools(20))
            if kind == "sync":
                stop(server)
                while store._db.pool.connect_errors() < ATTEMPTS:
                    with pytest.raises(DatabaseError):
                        store.info()
                start(server)
                assert len(store.route(query)) > 0
        if kind == "async":
            asyncio.run(asynchronous(dsn, server))


def test_a_call_that_waited_while_the_server_went_down_does_not_say_the_pool_is_busy() -> None:
    """A call waited for the pool's one connection while another held it, and the server went down meanwhile: the
    connection came back lost, and the call that got none said 'the pool's connections (pool_size=1) are all in use'
    (raise pool_size, it read), as if the server answered. A lost connection that comes back shows no server that
    answers: the call says 'is the server up?'. The waiter's timeout is counted from before the server's stop, which
    it must outlast (the connection is given back only after it): an immediate stop, and 10 s for a loaded machine."""
    with private_server() as server:
        dsn = migrated_dsn(server)
        with ToolStore(dsn, embedder=None, catalog="r", timeout=10, pool_size=1) as store:
            store.upsert(generated_tools(5))
            failures: list[BaseException] = []

            def waiter() -> None:
                try:
                    store.info()
                except DatabaseError as exc:
                    failures.append(exc)

            with pytest.raises(DatabaseError), store.connection() as conn:
                thread = threading.Thread(target=waiter)
                thread.start()
                while not store._db.pool.get_stats().get("requests_queued"):  # the waiter waits for the connection
                    time.sleep(0.05)
                stop(server, mode="immediate")
                conn.execute("select 1")
            thread.join()
    (failure,) = failures
    assert "is the server up?" in str(failure), failure


def openai_store(dsn: str, server: FakeOpenAI, **options: object) -> ToolStore:
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small",
        dimensions=64,
        api_key=server.api_key,
        base_url=server.base_url,
        sleep=lambda _: None,
        query_timeout=1.0,
    )
    return ToolStore(dsn, embedder=embedder, catalog="oa", **options)  # type: ignore[arg-type]


def test_an_embedding_outage_routes_lexically_at_once_and_recovers(dsn: str) -> None:
    tools = generated_tools(30, seed=13)
    queries = iter(generated_queries(40, seed=14))
    with FakeOpenAI() as server, openai_store(dsn, server, embedder_cooldown=1.0) as store:
        store.upsert(tools)
        assert store.route(next(queries)).dense_used
        server.fail_next(status=500, times=1000)
        first = store.route(next(queries))
        assert not first.dense_used and "500" in (first.degraded_reason or "")
        asked = len(server.requests_to("/embeddings"))
        for _ in range(5):  # the breaker is open: lexical at once, the provider is not asked
            started = time.monotonic()
            result = store.route(next(queries))
            assert not result.dense_used and len(result) > 0
            assert time.monotonic() - started < 1.0
        assert len(server.requests_to("/embeddings")) == asked
        server._script.clear()  # the provider is back
        time.sleep(1.1)
        assert store.route(next(queries)).dense_used  # probed after the cool-down, no restart


def test_a_hanging_provider_costs_one_query_timeout(dsn: str) -> None:
    with FakeOpenAI() as server, openai_store(dsn, server) as store:
        store.upsert(generated_tools(10))
        server.stall_next(seconds=8)
        started = time.monotonic()
        result = store.route("send the weekly report")
        assert not result.dense_used and "Timeout" in (result.degraded_reason or "")
        assert time.monotonic() - started < 4.0  # query_timeout is 1 s; 188 s before the fix
        started = time.monotonic()
        assert not store.route("another request").dense_used
        assert time.monotonic() - started < 1.0


def test_a_request_over_the_models_context_routes_densely_and_leaves_the_breaker_closed(dsn: str) -> None:
    """20,000 characters can be over 8,191 tokens; the API's refusal used to fail the route's dense part and open
    the breaker, so every route for the next 30 s answered lexically."""
    long = "a " * 9_985 + "send the weekly report"  # 9,989 tokens as FakeOpenAI counts them
    with FakeOpenAI() as server, openai_store(dsn, server) as store:
        store.upsert(generated_tools(10))
        result = store.route(long)
        assert result.dense_used, result.degraded_reason
        assert store.route("another request").dense_used


def test_provider_errors_never_carry_the_api_key(dsn: str) -> None:
    secret = "sk-live-0123456789abcdefghij"
    body = {"error": {"message": f"proxy rejected header Authorization: Bearer {secret}", "type": "server_error"}}
    with FakeOpenAI() as server, openai_store(dsn, server) as store:
        store.upsert(generated_tools(5))
        server.fail_next(status=400, body=body, times=2)
        result = store.route("send the weekly report")
        assert result.degraded_reason and secret not in result.degraded_reason
        assert "[redacted]" in result.degraded_reason
        with pytest.raises(EmbedderError) as info:
            store.embedder.embed("hello")  # type: ignore[union-attr]
        assert secret not in str(info.value)


@pytest.mark.parametrize("scheme", ["Bearer", "Basic", "bearer"])
def test_an_authorization_headers_credential_is_redacted_after_its_scheme(scheme: str) -> None:
    """A provider's error quoting ``Authorization: Bearer X`` with a key no key pattern knows showed X: the
    ``authorization:`` rule hid the scheme word alone; the credential after it is hidden, the scheme shown."""
    for text in (
        f"proxy rejected header Authorization: {scheme} tok_0123456789 (401)",
        f"authorization={scheme} tok_0123456789",
    ):
        shown = redact(text)
        assert "tok_0123456789" not in shown and f"{scheme} [redacted]" in shown, shown


class LeakyEmbedder(HashingEmbedder):
    """A user's remote embedder whose client puts its credential in its error, as many HTTP clients do."""

    secret = "tok_live_0123456789abcdef"
    fail = False

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise RuntimeError(f"401 Unauthorized for url https://embed.example/v1?token={self.secret}")
        return super().embed_queries(texts)


def test_a_degraded_route_never_carries_the_embedders_secret(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    embedder = LeakyEmbedder(32)
    with ToolStore(dsn, embedder=embedder, catalog="e") as store:
        store.upsert(generated_tools(10))
        embedder.fail = True
        with caplog.at_level(logging.DEBUG, logger="toolstore"):
            first = store.route("send the weekly report")  # the embedder's own exception
            second = store.route("another request")  # the breaker's stored reason
    assert not first.dense_used and not second.dense_used
    for reason in (first.degraded_reason or "", second.degraded_reason or "", caplog.text):
        assert "[redacted]" in reason and embedder.secret not in reason, reason


def test_cli_routes_lexically_without_an_api_key(dsn: str) -> None:
    with FakeOpenAI() as server, openai_store(dsn, server) as store:
        store.upsert(generated_tools(10))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env |= {"TOOLSTORE_DSN": dsn, "TOOLSTORE_EMBEDDER": "openai/text-embedding-3-small@64", "TOOLSTORE_CATALOG": "oa"}
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore", "route", "send the weekly report"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    routed = json.loads(proc.stdout)
    assert not routed["dense_used"] and "OPENAI_API_KEY" in routed["degraded_reason"] and routed["tools"]


# A '%' not percent-encoded in a password makes libpq quote the token it could not decode; an IPv6 typo, the whole URI.
MALFORMED_DSNS = ["postgresql://app:Sup3r%Secret@localhost/app", "postgresql://app:Sup3rSecret@[::1/app"]


@pytest.mark.parametrize("bad", MALFORMED_DSNS)
def test_a_malformed_dsn_is_refused_without_its_password(dsn: str, bad: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        for call in (
            lambda: ToolStore(bad, embedder=None),
            lambda: migrate(bad),
            lambda: ToolStore(dsn, embedder=None, read_dsn=[bad]),
            lambda: asyncio.run(AsyncToolStore(bad, embedder=None).open()),
        ):
            with pytest.raises(InvalidInputError, match="malformed DSN") as info:
                call()
            assert "Sup3r" not in str(info.value), str(info.value)
    assert "Sup3r" not in caplog.text
    env = {**os.environ, "TOOLSTORE_DSN": bad, "TOOLSTORE_EMBEDDER": "none"}
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore", "catalogs"], capture_output=True, text=True, env=env, timeout=120
    )
    said = "error: Invalid value for '--dsn' (from $TOOLSTORE_DSN): malformed DSN"  # a usage error
    assert proc.returncode == 2 and proc.stderr.startswith(said), proc.stderr
    assert "Sup3r" not in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(psycopg.Error) as raw:  # any DatabaseError text built from libpq's is redacted too
        psycopg.connect(bad)
    assert "Sup3r" in str(raw.value) and "Sup3r" not in first_line(raw.value)


def test_a_password_with_an_at_sign_not_percent_encoded_is_refused(dsn: str) -> None:
    """libpq parses it: the password ends at the first '@' and the rest is taken for the host, which a connection
    error would quote."""
    bad = "postgresql://app:Sup3r@Secret@localhost/app"
    for call in (lambda: ToolStore(bad, embedder=None), lambda: migrate(bad)):
        with pytest.raises(InvalidInputError, match="malformed DSN: its host holds an '@'") as info:
            call()
        assert "Secret" not in str(info.value) and "Sup3r" not in str(info.value)
    ToolStore(dsn, embedder=None).close()  # a well-formed DSN still opens


@pytest.mark.parametrize("given", ["", "   "])
def test_an_empty_dsn_is_refused_not_taken_for_none(dsn: str, given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ToolStore(os.environ.get("DATABASE_URL", "")) with the variable unset took the empty DSN for none, so the store
    opened $TOOLSTORE_DSN or the embedded server, another database, without a word (the CLI refuses --dsn ""); a blank
    one was handed to libpq, which read it as its defaults. Either is refused, saying what to give, before anything is
    opened; None still means $TOOLSTORE_DSN."""
    monkeypatch.setenv("TOOLSTORE_DSN", dsn)
    said = "dsn is empty: give a Postgres DSN, or None for $TOOLSTORE_DSN or the embedded server"
    for call in (
        lambda: ToolStore(given, embedder=None),
        lambda: migrate(given),
        lambda: AsyncToolStore(given, embedder=None),
    ):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert str(info.value) == said
    for wrong in (5, b"postgresql://app@localhost/app"):  # said as a bad type, never quoted (it may hold a password)
        with pytest.raises(InvalidTypeError, match=f"^dsn must be a string or None, got {type(wrong).__name__}$"):
            ToolStore(wrong, embedder=None)  # type: ignore[arg-type]
    ToolStore(None, embedder=None).close()  # None: $TOOLSTORE_DSN


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg", "psycopg2"])
def test_a_sqlalchemy_url_is_refused_saying_what_to_write(dsn: str, driver: str) -> None:
    """An application's SQLAlchemy URL (its engine's, its alembic env's: postgresql+psycopg://...) given as the DSN
    was 'malformed DSN: invalid connection option "[redacted]"' (libpq quotes the whole URI, redacted), which says
    nothing a user can act on; the error names the scheme and what to write instead, never the password."""
    bad = f"postgresql+{driver}://app:Sup3rSecret@localhost/app"
    expected = (
        f"malformed DSN: 'postgresql+{driver}://' is SQLAlchemy's URL scheme, not libpq's: write 'postgresql://' "
        f"(drop '+{driver}')"
    )
    for call in (
        lambda: ToolStore(bad, embedder=None),
        lambda: migrate(bad),
        lambda: ToolStore(dsn, embedder=None, read_dsn=[bad]),
        lambda: asyncio.run(AsyncToolStore(bad, embedder=None).open()),
    ):
        with pytest.raises(InvalidInputError) as info:
            call()
        assert str(info.value) == expected


@pytest.mark.parametrize("connector", ["sync", "async"])
def test_a_connection_setup_that_fails_is_said_at_open(empty_dsn: str, connector: str) -> None:
    """A database without pgvector: psycopg_pool tried the connection's setup (its configure) again and again until
    the open timeout, then said only 'pool initialization incomplete after 15.0 sec'; the setup's own error is said.
    A pool opened without waiting (a replica's) says it when a call gets no connection, not 'is the server up?'."""
    pgvector = "pgvector is not installed in this database"

    def sync() -> None:
        with pytest.raises(DatabaseError, match=f"could not be set up: {pgvector}"):
            Connector(empty_dsn, schema="toolstore", timeout=1)
        connector = Connector(empty_dsn, schema="toolstore", timeout=1, wait=False)
        with pytest.raises(DatabaseError, match=f"within 1 s: a new one's setup failed: {pgvector}"):
            connector.run(lambda conn: None)
        connector.close()

    async def asynchronous() -> None:
        with pytest.raises(DatabaseError, match=f"could not be set up: {pgvector}"):
            await AsyncConnector.open(empty_dsn, schema="toolstore", timeout=1)
        connector = await AsyncConnector.open(empty_dsn, schema="toolstore", timeout=1, wait=False)
        with pytest.raises(DatabaseError, match=f"within 1 s: a new one's setup failed: {pgvector}"):
            await connector.run(lambda conn: asyncio.sleep(0))
        await connector.close()

    if connector == "sync":
        sync()
    else:
        asyncio.run(asynchronous())


@pytest.mark.parametrize("popped", [False, True], ids=["", "after pop_stats"])
def test_a_setup_failure_is_not_said_once_the_server_cannot_be_reached(popped: bool) -> None:
    """A pool's setup failed (a database without pgvector), then the server went down: a call that got no connection
    still said 'a new one's setup failed: pgvector is not installed', the last setup's error, where no connection
    could be made at all; it says so once the pool failed to connect since (its count of failed connections). A
    caller reading the pool's stats with pop_stats(), which resets its counters, took that count back to where the
    setup failed, and the setup's error was said again; the count is kept whole."""
    pgvector = "a new one's setup failed: pgvector is not installed"

    async def main(dsn: str, stopped: Callable[[], None]) -> None:
        sync = Connector(dsn, schema="toolstore", timeout=1, wait=False)
        asynchronous = await AsyncConnector.open(dsn, schema="toolstore", timeout=1, wait=False)
        try:
            with pytest.raises(DatabaseError, match=pgvector):
                sync.run(lambda conn: None)
            with pytest.raises(DatabaseError, match=pgvector):
                await asynchronous.run(lambda conn: asyncio.sleep(0))
            stopped()
            deadline = time.monotonic() + 60  # a call makes each pool try to connect again: wait for one to fail
            while not all(pool.get_stats().get("connections_errors") for pool in (sync.pool, asynchronous.pool)):
                assert time.monotonic() < deadline, "the pools did not try to connect"
                with pytest.raises(DatabaseError):
                    sync.run(lambda conn: None)
                with pytest.raises(DatabaseError):
                    await asynchronous.run(lambda conn: asyncio.sleep(0))
            if popped:
                assert all(pool.pop_stats()["connections_errors"] for pool in (sync.pool, asynchronous.pool))
            with pytest.raises(DatabaseError, match="within 1 s: is the server up"):
                sync.run(lambda conn: None)
            with pytest.raises(DatabaseError, match="within 1 s: is the server up"):
                await asynchronous.run(lambda conn: asyncio.sleep(0))
        finally:
            sync.close()
            await asynchronous.close()

    with private_server() as server:  # its `postgres` database has no pgvector
        asyncio.run(main(server.get_uri(), lambda: stop(server)))
