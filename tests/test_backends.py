"""``_backends.Backends`` without a server: which pool connections are taken to be behind a pooler in transaction mode
(two open ones set up on one server backend), and which never are (a direct connection; one its pooler ended)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from toolstore import TransactionPoolingError
from toolstore._backends import Backends

#: A search_path as set_session's row spells it.
PATH = '"toolstore", "public"'


class Connection:
    """What ``Backends.set_up`` reads of a psycopg connection: the pid it was told at connect, where it connected, its
    socket (the client's end of a pair: the other end is the server's, or the pooler's)."""

    def __init__(self, told_pid: int, database: str) -> None:
        self.info = SimpleNamespace(backend_pid=told_pid, host="127.0.0.1", port=6432, dbname=database, user="u")
        self.client, self.server = socket.socketpair()
        self.closed = False

    def fileno(self) -> int:
        return self.client.fileno()


@pytest.fixture
def connect() -> Iterator[Callable[[int], Connection]]:
    database, made = f"db_{uuid.uuid4().hex[:8]}", []  # the registry is the process's: a database of the test's own

    def connection(told_pid: int) -> Connection:
        made.append(Connection(told_pid, database))
        return made[-1]

    yield connection
    for conn in made:
        conn.client.close()
        conn.server.close()


def test_two_open_connections_set_up_on_one_backend_through_a_pooler_look_transaction_pooled(
    connect: Callable[[int], Connection],
) -> None:
    first, second = Backends(), Backends()
    first.set_up(connect(9001), (42, PATH, ""))
    with pytest.raises(TransactionPoolingError, match=r"two open connections were set up on one server backend \(42\)"):
        second.set_up(connect(9002), (42, PATH, "b"))
    assert first.verdict is not None and second.verdict is not None  # both stores' calls say it from now on
    with pytest.raises(TransactionPoolingError):
        first.check()


def test_a_connection_its_pooler_ended_or_a_direct_one_is_not_taken_for_one_sharing_its_backend(
    connect: Callable[[int], Connection],
) -> None:
    backends = Backends()
    ended = connect(9001)
    backends.set_up(ended, (42, PATH, ""))
    ended.server.close()  # the pooler ended it (a session-mode pooler then hands its backend to the next client)
    backends.set_up(connect(9002), (42, PATH, ""))
    backends.set_up(connect(43), (43, PATH, ""))  # direct: told its own backend's pid, so never recorded
    backends.set_up(connect(43), (43, PATH, ""))
    closed = connect(9003)
    backends.set_up(closed, (44, PATH, ""))
    closed.closed = True
    backends.set_up(connect(9004), (44, PATH, ""))
    assert backends.verdict is None
    backends.check()
