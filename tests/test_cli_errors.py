"""What the command line says when a command fails: the error's one line, then its notes (PEP 678), never a
traceback."""

from __future__ import annotations

import gc
import json
import logging
import sys
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool.pool
import pytest
from click.testing import CliRunner

import toolstore._bulk_load
import toolstore._catalog
import toolstore._connect
import toolstore._indexes
import toolstore._lending
from toolstore import HashingEmbedder, ToolStore
from toolstore._errors import InvalidToolError, UnknownCatalogError
from toolstore.cli import cli
from toolstore.cli import main as entry

from catalog_gen import generated_tools


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The entry point on ``args`` with the hashing embedder: its exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", ["toolstore", "--embedder", "hashing", *args])
    with pytest.raises(SystemExit) as exited:
        entry()
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def failed_bulk_import(dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """A catalog 'noted' of 25 tools with its HNSW index, and the arguments of an import of 60 (a bulk load: the
    index dropped before it) that fails (a namespace clash) and whose index cannot be built again after it (a
    deadlock victim every time), as test_upsert_examples provokes it."""
    monkeypatch.setattr(toolstore._indexes, "HNSW_MIN_ROWS", 20)
    monkeypatch.setattr(toolstore._bulk_load, "BULK_VECTORS", 10)
    tools = generated_tools(60, seed=5)
    with ToolStore(dsn, embedder=HashingEmbedder(), catalog="noted") as store:
        store.upsert(tools[:25])
    path = tmp_path / "tools.jsonl"
    path.write_text(
        "".join(json.dumps({"id": t.id, "name": t.name, "description": t.description}) + "\n" for t in tools)
    )

    def deadlocked(conn: Any, info: Any) -> None:
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    def clash(*args: Any) -> None:
        raise InvalidToolError("a namespace clash")

    monkeypatch.setattr(toolstore._indexes, "ensure_indexes", deadlocked)
    monkeypatch.setattr(toolstore._catalog, "_check_namespaces", clash)
    note = (
        "catalog 'noted''s HNSW indexes, dropped before this write, were not built again (DatabaseError: a "
        "concurrent write kept conflicting: deadlock detected): its dense retrieval searches exactly meanwhile; the "
        "catalog's next write builds them (ToolStore.upsert([]) will do; on the command line, importing its own "
        "tools again: toolstore -c noted export --with-metadata -o FILE, then toolstore -c noted import FILE)"
    )
    return note, ["--dsn", dsn, "-c", "noted", "import", str(path)]


def test_an_errors_notes_follow_its_line(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed bulk import whose HNSW index could not be built again raises its own error with a note saying so and
    how to build it; the command line printed the error alone (`str(exc)`), so with logging elsewhere (here pytest's)
    the user never saw how. Each note is a line `note: ...` after the error's."""
    note, args = failed_bulk_import(dsn, tmp_path, monkeypatch)
    code, _, err = run(monkeypatch, capsys, *args)
    assert (code, err.splitlines()) == (1, [f"error: {args[-1]}: a namespace clash", f"note: {note}"]), err


def test_the_command_a_failed_bulk_imports_note_names_builds_the_indexes(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note of a failed bulk import whose index was not built again said only "ToolStore.upsert([]) will do",
    library-speak on the command line, which prints notes; it names the command line's way too (an empty file is
    refused): an import of the catalog's own tools, exported with their ids, which builds the index."""
    ensure, namespaces = toolstore._indexes.ensure_indexes, toolstore._catalog._check_namespaces
    _, args = failed_bulk_import(dsn, tmp_path, monkeypatch)
    code, _, err = run(monkeypatch, capsys, *args)
    assert code == 1 and "toolstore -c noted export --with-metadata -o FILE, then toolstore -c noted import FILE" in err
    monkeypatch.setattr(toolstore._indexes, "ensure_indexes", ensure)
    monkeypatch.setattr(toolstore._catalog, "_check_namespaces", namespaces)
    with ToolStore(dsn, embedder=None, catalog="noted") as store:
        info = store.info()
        assert info.embed_dim is not None
        index = toolstore._indexes.index_name("tool_vectors", info.id, info.embed_dim)
        valid = (
            "select count(*) from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = %s "
            "and i.indisvalid"
        )
        with store.connection() as conn:
            assert conn.execute(valid, [index]).fetchone() == (0,)
        kept, on = tmp_path / "kept.json", ["--embedder", "hashing", "--dsn", dsn, "-c", "noted"]
        assert CliRunner().invoke(cli, [*on, "export", "--with-metadata", "-o", str(kept)]).exit_code == 0
        imported = CliRunner().invoke(cli, [*on, "import", str(kept)])
        assert imported.exit_code == 0, imported.output
        with store.connection() as conn:
            assert conn.execute(valid, [index]).fetchone() == (1,)
        assert store.info().n_tools == 25


def test_a_note_said_as_a_warning_is_not_said_again(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the command line logs to stderr itself (nothing else configured logging), the library's warning of the
    indexes not built again is a line while the command runs; the same text as a note of its error is not said twice."""
    note, args = failed_bulk_import(dsn, tmp_path, monkeypatch)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # restored after: the handler the entry point adds goes
    code, _, err = run(monkeypatch, capsys, *args)
    assert (code, err.splitlines()) == (1, [f"warning: toolstore: {note}", f"error: {args[-1]}: a namespace clash"]), (
        err
    )


def test_a_failed_close_says_what_it_closed(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store's close that fails raises its first failure with a note of what it was closing (and of every other
    failure); the command line said the error alone. A database error's notes follow its line too."""

    def lost(self: Any) -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(toolstore._connect.Connector, "close", lost)
    code, _, err = run(monkeypatch, capsys, "--dsn", dsn, "catalogs")
    assert (code, err.splitlines()) == (
        1,
        ["database error: server closed the connection unexpectedly", "note: raised closing the primary's pool"],
    ), err


def _interrupted_join(*threads: Any, **options: Any) -> None:
    """psycopg_pool's join of the pool's workers at close, then Ctrl-C: a user interrupting the wait."""
    joined(*threads, **options)
    raise KeyboardInterrupt


def _failed_pool_close(self: Any, *args: Any, **kwargs: Any) -> None:
    """A pool's close, closed, then failing as a lost server's does."""
    closed(self, *args, **kwargs)
    raise psycopg.OperationalError("server closed the connection unexpectedly")


joined, closed = psycopg_pool.pool.gather, toolstore._lending.CountedPool.close
CLOSE_FAILURES = {
    "ctrl-c": ((psycopg_pool.pool, "gather", _interrupted_join), 130, ["aborted"]),  # no blank line off a terminal
    "database": (
        (toolstore._lending.CountedPool, "close", _failed_pool_close),
        1,
        ["database error: server closed the connection unexpectedly", "note: raised closing the primary's pool"],
    ),
}


@pytest.mark.parametrize("failure", CLOSE_FAILURES)
def test_a_failed_close_says_what_the_command_did_first(
    failure: str, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store was closed before the command printed its output, so a close that failed (Ctrl-C while it waits for
    the pool's workers, a pool's close failing) said its error alone: an import that committed, a route, printed
    nothing. The output comes first now, then the close's error, with its exit status."""
    patch, status, said = CLOSE_FAILURES[failure]
    path = tmp_path / "tools.jsonl"
    tools = generated_tools(3, seed=2)
    path.write_text(
        "".join(json.dumps({"id": t.id, "name": t.name, "description": t.description}) + "\n" for t in tools)
    )
    catalog = f"closing-{failure}"
    gc.collect()  # an earlier test's pool left open (its close failed) is not collected, and joined, under the patch
    monkeypatch.setattr(*patch)
    code, out, err = run(monkeypatch, capsys, "--dsn", dsn, "-c", catalog, "import", str(path))
    assert (code, err.splitlines()) == (status, said), err
    assert json.loads(out) | {"file": None} == {
        **{"version": 1, "catalog": catalog, "file": None, "inserted": 3, "updated": 0, "unchanged": 0},
        **{"removed": 0, "embedded": 3, "cached": 0, "unembedded": 0, "examples": 0},
    }
    code, out, err = run(monkeypatch, capsys, "--dsn", dsn, "-c", catalog, "route", "send an email", "-k", "2")
    assert (code, err.splitlines()) == (status, said), err
    assert json.loads(out)["query"] == "send an email" and len(json.loads(out)["tools"]) == 2
    monkeypatch.undo()
    with ToolStore(dsn, embedder=None, create=False, catalog=catalog) as store:
        assert store.info().n_tools == 3


def test_a_command_that_fails_keeps_its_error_when_the_close_fails_too(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command's error and then a failed close: the close's error was said in place of the command's (a route of a
    catalog never made said only that the server closed the connection). The command's error is said, the close's
    failure a note after it."""
    gc.collect()  # as above: an earlier test's pool is not collected under the patch
    monkeypatch.setattr(toolstore._lending.CountedPool, "close", _failed_pool_close)
    code, out, err = run(monkeypatch, capsys, "--dsn", dsn, "-c", "never-made-closing", "route", "send an email")
    lines = err.splitlines()
    assert (code, out) == (1, ""), err
    assert lines[0].startswith("error: no catalog named 'never-made-closing'"), err
    assert "note: closing the store failed too: OperationalError: server closed the connection unexpectedly" in lines


def test_notes_are_redacted_as_the_error_line_is(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a note quotes that looks like a credential is redacted, as usage errors' text is; a note of several lines
    is one line."""

    def failing(self: Any) -> None:
        error = UnknownCatalogError("no catalog named 'x'")
        error.__notes__ = ["tried postgresql://app:Sup3rSecret@db/app\nwith --token abc123"]
        raise error

    monkeypatch.setattr(ToolStore, "catalogs", failing)
    code, _, err = run(monkeypatch, capsys, "--dsn", dsn, "catalogs")
    assert (code, err.splitlines()) == (
        1,
        ["error: no catalog named 'x'", "note: tried postgresql://app:[redacted]@db/app with --token [redacted]"],
    ), err


def test_the_command_line_runs_without_termios(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry point imported termios (POSIX only) to tell whether Ctrl-C's ``^C`` was echoed: without it (Windows),
    the command line failed to import at all. It is looked for only then, and without it nothing was echoed."""
    import importlib

    module = importlib.import_module("toolstore.cli.main")  # the module (toolstore.cli.main is its function)
    monkeypatch.setitem(sys.modules, "termios", None)  # `import termios` raises ImportError
    try:
        assert importlib.reload(module)._ctrl_c_echoed() is False
    finally:
        monkeypatch.undo()
        importlib.reload(module)
