"""The friendlier CLI: progress bars only on a terminal (and never with --quiet), `dsn`, `list --long`, YAML
import, `sync mcp --env`, and JSON output that carries its version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from terminal import open_terminal, read_all

from toolstore._vectors import CACHE_GRACE
from toolstore.cli.demo import DEMO_DIR

PETSTORE = """\
openapi: 3.0.3
info: {title: Pet Store, version: "1"}
paths:
  /pets:
    post:
      operationId: addPet
      summary: Add a pet to the store
      responses: {200: {description: ok}}
"""


def cli(dsn: str, *args: str, terminal: bool = False) -> tuple[int, str, str]:
    """Run the CLI; with ``terminal`` its stderr is a pseudo-terminal (where progress bars show)."""
    cmd = [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args]
    if not terminal:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr
    leader, follower = open_terminal(100)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    drawn = read_all(leader)  # before stdout: the process ends once both are read
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=300), out, drawn


def test_progress_only_on_a_terminal_and_never_quiet(dsn: str) -> None:
    tools = str(DEMO_DIR / "tools.jsonl")
    code, out, err = cli(dsn, "-c", "a", "import", tools, terminal=True)
    assert code == 0 and "embedding tools" in err and "115/115" in err
    assert json.loads(out)["inserted"] == 115
    code, out, err = cli(dsn, "-c", "b", "--quiet", "import", tools, terminal=True)
    assert code == 0 and "embedding" not in err
    code, _, err = cli(dsn, "-c", "c", "import", tools)  # stderr not a terminal
    assert code == 0 and err == ""
    code, _, err = cli(dsn, "-c", "a", "examples", str(DEMO_DIR / "examples.jsonl"), terminal=True)
    assert code == 0 and "embedding examples" in err


def test_dsn_list_long_yaml_and_versioned_json(dsn: str, tmp_path: Path) -> None:
    code, out, _ = cli(dsn, "dsn")
    data = json.loads(out)
    assert code == 0 and data["version"] == 1 and data["dsn"] == dsn
    with psycopg.connect(data["dsn"]) as conn:  # a DSN a client accepts
        assert conn.execute("select 1").fetchone() == (1,)
    spec = tmp_path / "petstore.yaml"
    spec.write_text(PETSTORE, encoding="utf-8")
    code, out, err = cli(dsn, "-c", "pets", "import", str(spec))
    assert code == 0 and json.loads(out)["inserted"] == 1, err
    code, out, _ = cli(dsn, "-c", "pets", "list", "--long")
    [tool] = json.loads(out)["tools"]
    assert tool["id"] == "pet_store.addPet" and tool["description"] == "Add a pet to the store"
    assert tool["http"] == {"method": "POST", "path": "/pets"}
    code, out, _ = cli(dsn, "-c", "pets", "route", "add a pet")
    routed = json.loads(out)
    assert routed["version"] == 1 and routed["tools"][0]["http"]["path"] == "/pets"
    bad = tmp_path / "notes.yml"
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    code, _, err = cli(dsn, "-c", "pets", "import", str(bad))
    assert code == 1 and "not an OpenAPI document" in err and len(err.strip().splitlines()) == 1


def test_import_of_a_malformed_openapi_schema_is_one_line(tmp_path: Path) -> None:
    """A body schema's ``required`` not a list, a $ref to a string, a chain of 400 $refs: one line, exit 1 (the
    file is parsed before any database is touched)."""
    ref = "#/components/schemas/S{}"
    chain = {f"S{i}": {"type": "object", "properties": {"next": {"$ref": ref.format(i + 1)}}} for i in range(400)}
    for body, schemas, needle in [
        ({"type": "object", "properties": {"a": {}}, "required": 5}, {}, "required must be a list"),
        ({"$ref": ref.format(0)}, {"S0": "not a schema"}, "must point to a schema"),
        ({"$ref": ref.format(0)}, {**chain, "S400": {"type": "string"}}, "nested deeper than 64 levels"),
    ]:
        op = {"operationId": "addPet", "requestBody": {"content": {"application/json": {"schema": body}}}}
        doc = {"openapi": "3.0.3", "info": {"title": "Pets"}, "paths": {"/pets": {"post": op}}}
        spec = tmp_path / "pets.json"
        spec.write_text(json.dumps({**doc, "components": {"schemas": schemas}}), encoding="utf-8")
        code, _, err = cli("postgresql:///none?host=/nonexistent", "import", str(spec))
        assert code == 1 and err.startswith("error: ") and needle in err, err[-600:]
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err[-600:]


def test_sync_env_is_recorded_for_the_gateway(dsn: str, monkeypatch: object) -> None:
    server = str(Path(__file__).with_name("mcp_server.py"))
    env = {**os.environ, "WX_NAME": "weather"}
    args = ["-c", "gw", "sync", "mcp", "--env", "WX_TOKEN=${WX_NAME}", "--", sys.executable, server]
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore", "--dsn", dsn, "--embedder", "hashing", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select transport, command, args, env from toolstore.mcp_upstreams").fetchone()
    assert row == ("stdio", sys.executable, [server], {"WX_TOKEN": "${WX_NAME}"})  # the reference, not its value


def test_import_skips_builtin_tools_with_a_warning(dsn: str, tmp_path: Path) -> None:
    """An OpenAI Assistant's code interpreter and file search are no functions to route to: `import` writes its
    function tools and warns on stderr, one line naming the skipped ones; a file of nothing else fails, one line."""
    function = {"type": "function", "function": {"name": "get_weather", "description": "Weather now."}}
    assistant = {"name": "Helper", "tools": [{"type": "code_interpreter"}, function, {"type": "file_search"}]}
    path = tmp_path / "assistant.json"
    path.write_text(json.dumps(assistant), encoding="utf-8")
    code, out, err = cli(dsn, "-c", "helper", "--json", "import", str(path))
    assert code == 0 and json.loads(out)["inserted"] == 1, err
    assert err.startswith(f"warning: toolstore: {path}: skipped 2 built-in tools: tool tools[0] (type ")
    assert len(err.strip().splitlines()) == 1, err
    path.write_text(json.dumps({**assistant, "tools": [{"type": "file_search"}]}), encoding="utf-8")
    code, _, err = cli("postgresql:///none?host=/nonexistent", "import", str(path))
    assert code == 1 and err.startswith(f"error: {path}: no function tools to import, only built-in ones"), err
    assert len(err.strip().splitlines()) == 1, err


def test_cache_prune_deletes_the_vectors_a_reembed_left(dsn: str) -> None:
    tools = str(DEMO_DIR / "tools.jsonl")
    assert cli(dsn, "-c", "a", "import", tools)[0] == 0
    assert cli(dsn, "-c", "a", "reembed", "--model", "hashing-64")[0] == 0  # hashing-256's vectors: no catalog's now
    assert json.loads(cli(dsn, "cache", "prune")[1])["pruned"] == 0  # written within CACHE_GRACE: kept
    with psycopg.connect(dsn) as conn:
        conn.execute("update toolstore.embedding_cache set created_at = created_at - 2 * %s::interval", (CACHE_GRACE,))
    code, out, err = cli(dsn, "cache", "prune")
    assert code == 0 and json.loads(out)["pruned"] == 115, err
    assert json.loads(cli(dsn, "cache", "prune")[1])["pruned"] == 0


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("route", "-k", "0", "hi"),
            "Invalid value for '-k' / '--k': 0 is not in the range 1<=x<=1000 (see {} route --help)",
        ),
        (("nosuch",), "No such command 'nosuch' (see {} --help)"),
        # click before 8.4 words it "No such option: --bogus" (pyproject allows click 8.2)
        (
            ("route", "hi", "--bogus"),
            ("No such option '--bogus' (see {} route --help)", "No such option: --bogus (see {} route --help)"),
        ),
        (("route", "hi", "--seed", "3"), "--seed is the draw's seed: it needs --explore (see {} route --help)"),
        (
            ("route", "hi", "--turns", "2"),
            "--turns is how many turns of --messages are read: it needs --messages (see {} route --help)",
        ),
        (("route", "hi", "-k"), "Option '-k' requires an argument (see {} route --help)"),
        (("--catalog",), "Option '--catalog' requires an argument (see {} --help)"),
    ],
)
def test_a_usage_error_is_one_line_as_a_library_error(args: tuple[str, ...], said: str | tuple[str, ...]) -> None:
    """README says the CLI's errors are one line, but click's usage errors took four ('Usage: ...', 'Try ... for
    help.', a blank line, 'Error: Invalid value ...'); they are one line as a library error's, naming the command's
    help, and exit 2 still (piped, where output is JSON, as library errors are: a line)."""
    code, out, err = cli("postgresql:///none?host=/nonexistent", *args)
    assert code == 2 and out == "", (code, out)
    forms = (said,) if isinstance(said, str) else said
    assert err.startswith(tuple(f"error: {form.format('python -m toolstore')}" for form in forms)), err
    assert len(err.splitlines()) == 1 and "Usage:" not in err, err


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ("--statement-timeout", "postgresql://app:hunter2@db/app", "catalogs"),
            "Invalid value for '--statement-timeout': "
            "'postgresql://app:[redacted]@db/app' is not a positive number of seconds",
        ),
        (
            ("catalogs", "postgresql://app:hunter2@db/app"),
            "Got unexpected extra argument (postgresql://app:[redacted]@db/app)",
        ),
        (("route", "-k", "password=hunter2", "q"), "Invalid value for '-k' / '--k': 'password=[redacted]' is not"),
        (
            ("sync", "mcp", "--url", "http://mcp.example", "--header", "A: b", "--header", "X-Api-Key hunter2"),
            "Invalid value for --header: #2 is not 'Name: value' (it has no ':')",
        ),
        (
            ("sync", "mcp", "--url", "http://mcp.example", "--header", ": hunter2"),
            "Invalid value for --header: #1 is not 'Name: value' (nothing before its ':')",
        ),
        (
            ("sync", "mcp", "--env", "hunter2", "--", "srv"),
            "Invalid value for --env: #1 is not NAME=VALUE (it has no '=')",
        ),
        (("sync", "mcp", "--env", "=hunter2", "--", "srv"), "Invalid value for --env: #1 is not NAME=VALUE (nothing"),
    ],
)
def test_a_usage_error_shows_no_secret_it_was_given(args: tuple[str, ...], said: str) -> None:
    """A usage error quoted what was typed as typed, where a library error redacts it: a DSN given to the wrong option
    or as an extra argument showed its password, and a --header or --env value with no ':' or '=' (or nothing before
    it) was quoted whole, though it may be all secret. The line is redacted as a library error's text is, and such a
    value is only counted; exit 2 still."""
    code, out, err = cli("postgresql:///none?host=/nonexistent", *args)
    assert code == 2 and out == "", (code, out)
    assert err.startswith(f"error: {said}") and "hunter2" not in err, err
