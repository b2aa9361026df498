"""A PgBouncer (transaction pooling mode, or session) on loopback, in front of the test server."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

#: The binary (Debian puts it in /usr/sbin, which a user's PATH may lack), None when not installed.
BINARY = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")
#: Why the tests that need it skip where the binary is missing.
MISSING = (
    "pgbouncer is not on PATH: `apt-get install -y pgbouncer` (Debian, Ubuntu; `brew install pgbouncer` on macOS) "
    "runs these tests (.ci/run installs it)"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _user_for(host: str) -> str:
    """Who pgbouncer runs as when the tests run as root (it refuses root): the owner of the server's socket directory,
    who may enter it (an embedded server's), else nobody."""
    return pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"


@contextmanager
def pgbouncer(server_dsn: str, users: tuple[str, ...] = (), mode: str = "transaction") -> Iterator[tuple[str, int]]:
    """PgBouncer (``pool_mode = transaction``, or ``mode``) in front of the server of ``server_dsn``, every database of
    it, the DSN's user and ``users`` (roles the server trusts, passwordless) trusted; yields its host and port."""
    params = conninfo_to_dict(server_dsn)
    host, user = str(params.get("host") or "localhost"), str(params.get("user") or "postgres")
    target = f"host={host} port={params.get('port') or 5432}"
    if params.get("password"):
        target += f" password={params['password']}"
    base = Path(tempfile.mkdtemp(prefix="toolstore-pgbouncer-"))
    base.chmod(0o777)  # pgbouncer, run as another user under root, writes its log here
    port = _free_port()
    (base / "users.txt").write_text("".join(f'"{name}" ""\n' for name in (user, *users)))
    ini = base / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\n* = {target}\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {base / 'users.txt'}\npool_mode = {mode}\nmax_client_conn = 200\n"
        f"default_pool_size = 20\nlogfile = {base / 'pgbouncer.log'}\n"
    )
    command = [BINARY or "pgbouncer", str(ini)]
    if os.geteuid() == 0:
        command[1:1] = ["-u", _user_for(host)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"pgbouncer did not start: {said}") from None
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def through(dsn: str, address: tuple[str, int]) -> str:
    """``dsn``'s database, reached through the pgbouncer at ``address``."""
    return make_conninfo(dsn, host=address[0], port=address[1], password="")
