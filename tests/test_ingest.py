"""Ingestion and enrichment: live MCP sync (stdio and HTTP), expansions (offline and LLM), export."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import openai
import psycopg
import pytest
from click.testing import CliRunner

from toolstore import (
    EmbedderError,
    ExpansionError,
    HashingEmbedder,
    IntentExample,
    InvalidInputError,
    McpSyncError,
    OpenAIEmbedder,
    Tool,
    ToolStore,
    _mcp_stderr,
    export_catalog,
    parse_tools,
)
from toolstore._expand import expand
from toolstore._formats import FORMATS
from toolstore._mcp_client import open_session
from toolstore._mcp_stderr import ServerStderr
from toolstore._mcp_sync import (
    McpListing,
    Upstream,
    fetch_http,
    fetch_stdio,
    sync_listing,
    sync_mcp_http,
    sync_mcp_stdio,
)
from toolstore._phrases import llm_phrases, make_client, offline_phrases, parse_phrases
from toolstore._rows import expansion_record
from toolstore.cli import cli as main_cli
from toolstore.testing.fake_openai import FakeOpenAI

SERVER = str(Path(__file__).with_name("mcp_server.py"))


class CountingEmbedder(HashingEmbedder):
    """The hashing double, counting the texts it embeds; ``fail`` makes it raise instead."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []
        self.fail = False

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("embedder down")
        self.texts += list(texts)
        return super().embed_batch(texts)


def server(name: str = "weather", variant: str = "base", page_size: int = 2) -> list[str]:
    return [SERVER, "--name", name, "--variant", variant, "--page-size", str(page_size)]


@pytest.fixture(scope="module")
def listings() -> dict[tuple[str, str], McpListing]:
    """Each server variant is started once per module (over stdio, through pages of 2); syncs reuse the listing.
    The weather variants play one server whose tools change between syncs: each is recorded as reached by the base
    variant's command line (another command line is another upstream, see the test of two servers of one name)."""
    variants = [("weather", "base"), ("docs", "base"), ("weather", "changed"), ("weather", "fewer")]
    with ThreadPoolExecutor(len(variants)) as pool:
        found = dict(zip(variants, pool.map(lambda v: fetch_stdio(sys.executable, server(*v)), variants)))
    base = found["weather", "base"].upstream
    return {
        key: dataclasses.replace(listing, upstream=base) if key[0] == "weather" else listing
        for key, listing in found.items()
    }


@pytest.fixture
def counting(dsn: str) -> Iterator[tuple[ToolStore, CountingEmbedder]]:
    embedder = CountingEmbedder()
    with ToolStore(dsn, embedder=embedder, catalog="ingest") as s:
        yield s, embedder


# -- MCP sync ---------------------------------------------------------------------------------------------


def test_stdio_sync_is_namespaced_incremental_and_prunes_in_one_transaction(
    dsn: str, counting: Any, listings: dict[tuple[str, str], McpListing]
) -> None:
    store, embedder = counting
    report = sync_mcp_stdio(store, sys.executable, server("weather"))  # 3 tools over 2 pages
    assert sorted(report.inserted) == ["weather.get_forecast", "weather.list_alerts", "weather.search"]
    assert report.embedded == 3
    alerts = store.get("weather.list_alerts")
    assert alerts.provider == "weather" and alerts.title == "Weather alerts" and alerts.parameters is not None

    report = sync_listing(store, listings["docs", "base"])  # same tool names, another server
    assert sorted(report.inserted) == ["docs.get_forecast", "docs.list_alerts", "docs.search"]
    assert len(store.tools()) == 6 and store.get("docs.search").name == store.get("weather.search").name

    embedder.texts.clear()
    report = sync_listing(store, listings["weather", "base"])
    assert (report.inserted, report.updated, report.removed, report.unchanged, report.embedded) == ([], [], [], 3, 0)
    assert embedder.texts == []

    report = sync_listing(store, listings["weather", "changed"])
    assert report.updated == ["weather.get_forecast"] and report.inserted == [] and report.embedded == 1
    assert len(embedder.texts) == 1 and "hour by hour" in embedder.texts[0]

    # back to the base forecast (needs embedding) and list_alerts gone: a failure writes nothing at all
    with psycopg.connect(dsn) as conn:
        conn.execute("delete from toolstore.embedding_cache")
    embedder.fail = True
    with pytest.raises(EmbedderError):
        sync_listing(store, listings["weather", "fewer"], prune=True)
    assert "hour by hour" in store.get("weather.get_forecast").description
    assert len(store.tools()) == 6
    embedder.fail = False
    report = sync_listing(store, listings["weather", "fewer"], prune=True)
    assert report.removed == ["weather.list_alerts"] and report.updated == ["weather.get_forecast"]
    ids = [t.id for t in store.tools()]
    assert ids == ["docs.get_forecast", "docs.list_alerts", "docs.search", "weather.get_forecast", "weather.search"]


def test_a_sync_that_fails_to_record_its_upstream_writes_nothing(
    store: ToolStore, listings: dict[tuple[str, str], McpListing], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any) -> Any:
        raise RuntimeError("recording the upstream failed")

    monkeypatch.setattr("toolstore._mcp_sync.upstream_params", fail)
    with pytest.raises(RuntimeError, match="recording the upstream failed"):
        sync_listing(store, listings["docs", "base"])
    assert store.catalog not in [c["name"] for c in store.catalogs()]  # no tool, not even the catalog


def test_sync_provider_override_and_errors(store: ToolStore) -> None:
    listing = fetch_stdio(sys.executable, server("weather", page_size=0))  # one page
    assert listing.server_name == "weather" and len(listing.tools) == 3
    report = sync_listing(store, listing, provider="wx")
    assert sorted(report.inserted) == ["wx.get_forecast", "wx.list_alerts", "wx.search"]
    with pytest.raises(McpSyncError, match="No such file"):
        fetch_stdio("/nonexistent/mcp-server", [], timeout=10)
    with pytest.raises(McpSyncError):
        fetch_stdio(sys.executable, ["-c", "import sys; sys.exit(3)"], timeout=10)


def test_a_stdio_server_that_exits_at_once_is_said_with_its_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that exited before it answered was said as "Connection closed" alone: the SDK does not hand on its
    exit status. The error says it now (a shell's 127 for a command it did not find among them); a status of 0 is not
    said (it may be the server's answer to its stdin closed), a command not found is the SDK's error as before, and
    the file of the status has no name, while a session is open too (a process ended without cleaning up leaves
    none)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for command, args, said in [
        (sys.executable, ["-c", "import sys; sys.exit(3)"], "Connection closed (the server exited with status 3)"),
        ("sh", ["-c", "nosuch-mcp-server"], "Connection closed (the server exited with status 127)"),
        (sys.executable, ["-c", "pass"], "Connection closed"),
        ("/nonexistent/mcp-server", [], "[Errno 2] No such file or directory: '/nonexistent/mcp-server'"),
    ]:
        with pytest.raises(McpSyncError) as raised:
            fetch_stdio(command, args, timeout=30)
        assert str(raised.value).endswith(f": {said}"), raised.value
    assert list(tmp_path.iterdir()) == []

    async def session() -> list[Path]:
        async with open_session(Upstream("stdio", command=sys.executable, args=tuple(server()))):
            return list(tmp_path.iterdir())

    assert anyio.run(session) == []


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (exists and is no zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_process_a_server_left_holding_its_stderr_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once the server's process ended, its last lines were waited for until the pipe closed, which a process it left
    running (a child holding its stderr) kept open: FINISH_WAIT, 2 s, for each such session. The wait ends once the
    pipe holds nothing more (what the ended server wrote is in it): with no bound on the wait, the sync returns while
    that child still runs, every line the server wrote shown, its last one without a newline too."""
    monkeypatch.setattr(_mcp_stderr, "FINISH_WAIT", 3600.0)
    pid_file = tmp_path / "left.pid"
    script = (
        f"sleep 60 >/dev/null </dev/null & echo $! > {shlex.quote(str(pid_file))}; "
        f'{shlex.quote(sys.executable)} "$@"; printf "last words" >&2'
    )
    args = ["-c", script, "sh", *server("lingering")]
    try:
        listing = fetch_stdio("sh", args, timeout=120)
        assert listing.server_name == "lingering"
        left = int(pid_file.read_text())
        assert _running(left)  # it holds the pipe still
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
    prefix = f"[{Upstream('stdio', command='sh', args=tuple(args)).describe()}] "
    assert capsys.readouterr().err.splitlines()[-1] == f"{prefix}last words"


def test_a_short_env_value_is_hidden_where_it_follows_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    """An env value of fewer than 4 characters handed to a stdio server was shown in its stderr lines wherever it
    appeared (hiding every "1" would garble them): ``PIN=123`` showed the PIN. It is hidden where it follows its
    variable's name (``NAME=V``, ``NAME: V``, ``"NAME": "V"``), and nowhere else: not inside a longer value or another
    name, not in other words."""
    written = [
        "PIN=123 and 123 apples",
        '{"PIN": "123", "DEBUG": "1"}',
        "DEBUG: 1 of 1; PIN = 123",
        "XPIN=123 PIN=1234 DEBUG=10 DEBUG is 1",
    ]

    async def main() -> None:
        stderr = ServerStderr("stdio: srv", ["123", "1"], {"PIN": "123", "DEBUG": "1"})
        stderr.file.write("".join(f"{line}\n" for line in written))
        stderr.started()
        await stderr.finish()

    anyio.run(main)
    assert capsys.readouterr().err.splitlines() == [
        "[stdio: srv] PIN=[redacted] and 123 apples",
        '[stdio: srv] {"PIN": "[redacted]", "DEBUG": "[redacted]"}',
        "[stdio: srv] DEBUG: [redacted] of 1; PIN = [redacted]",
        "[stdio: srv] XPIN=123 PIN=1234 DEBUG=10 DEBUG is 1",
    ]


SECRETS = ("sk-live1234567890abcdef", "ghp_secret123", "tok/v1", "key=abc")


@pytest.mark.parametrize("where", ["the command", "the server's error"])
def test_a_stdio_sync_failure_shows_no_secret(tmp_path: Path, where: str) -> None:
    """A stdio sync's failure said the command and the error's text as they were, so a command not found that was
    written with a secret in it ('TOKEN=X server') or a server refusing its start quoting its --api-key or a URL
    showed the secret, where the gateway's failures (client_text) and an HTTP sync's URL hide them; both go through
    the same rule now."""
    if where == "the command":
        command, args = f"GITHUB_TOKEN={SECRETS[1]} --api-key {SECRETS[0]} mcp-server", []
    else:
        script = tmp_path / "refuses.py"
        message = f"refused --api-key {SECRETS[0]} and GITHUB_TOKEN={SECRETS[1]} at https://u:pw@host/{SECRETS[2]}?{SECRETS[3]}"
        script.write_text(
            "import json, sys\n"
            "request = json.loads(sys.stdin.readline())\n"
            f"error = {{'code': -32000, 'message': {message!r}}}\n"
            "print(json.dumps({'jsonrpc': '2.0', 'id': request['id'], 'error': error}), flush=True)\n"
        )
        command, args = sys.executable, [str(script)]
    with pytest.raises(McpSyncError) as raised:
        fetch_stdio(command, args, timeout=30)
    text = str(raised.value)
    assert "[redacted]" in text and not [s for s in SECRETS if s in text], text
    assert raised.value.__cause__ is None


def test_a_sync_failure_names_its_server_as_the_gateway_does() -> None:
    """A stdio sync's failure named its server by the command alone as Python writes a string ('MCP server
    '/usr/bin/python3': Connection closed'), an HTTP one by Upstream.describe(); both are named by describe() now, as
    the gateway's log lines and a stdio server's stderr lines are: the command with its arguments, a secret flag's value
    hidden, or the URL without credentials or query, with its header names."""
    args = ["-c", "import sys; sys.exit(3)", "--token", "s3cr3t"]
    with pytest.raises(McpSyncError) as raised:
        fetch_stdio(sys.executable, args, env={"KEY": "v4lue"}, timeout=30)
    named = f"MCP server {shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)' --token [redacted]: "
    assert str(raised.value).startswith(named), str(raised.value)
    assert named[len("MCP server ") : -2] == Upstream("stdio", command=sys.executable, args=tuple(args)).describe()[7:]
    with pytest.raises(McpSyncError) as raised:
        fetch_http("http://u:pw0rd@127.0.0.1:9/mcp?key=k3y", headers={"Authorization": "Bearer t0k"}, timeout=30)
    assert str(raised.value).startswith("MCP server http://127.0.0.1:9/mcp (headers: Authorization): "), raised.value
    assert not [s for s in ("s3cr3t", "v4lue", "pw0rd", "k3y", "t0k") if s in str(raised.value)]


def test_a_sync_failure_shows_no_env_style_secret_among_its_servers_arguments() -> None:
    """Named by describe(), a stdio sync's failure shows the server's arguments (it showed the command alone before):
    an env-style secret among them that no pattern knew (``docker run -e CLIENT_SECRET=X``, a word of SECRET_FLAG's at
    the end of its name) was shown as it is."""
    secrets = ["CLIENT_SECRET=s3cr3t", "AWS_SECRET_ACCESS_KEY=k3y", "SECRET_KEY=p4ss", "DB_PASSWD=pw0rd"]
    args = ["-c", "import sys; sys.exit(3)", *[a for s in secrets for a in ("-e", s)]]
    with pytest.raises(McpSyncError) as raised:
        fetch_stdio(sys.executable, args, timeout=30)
    shown = " ".join(f"-e {s.partition('=')[0]}=[redacted]" for s in secrets)
    named = f"MCP server {shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)' {shown}: "
    assert str(raised.value).startswith(named), str(raised.value)


def test_a_sync_failure_shows_no_query_of_a_url_among_its_servers_arguments() -> None:
    """Named by describe(), a stdio sync's failure shows the server's arguments, and a URL among them with its query
    and fragment (``npx mcp-remote https://host/sse?key=X``), where an HTTP upstream's URL is shown without them and
    the server's own error text cuts it to its host; describe() leaves them out, as the URL of an HTTP upstream."""
    url = "https://mcp.example.com/sse?key=k3y&sig=s1g#t0k"
    with pytest.raises(McpSyncError) as raised:
        fetch_stdio(sys.executable, ["-c", "import sys; sys.exit(3)", url], timeout=30)
    named = f"MCP server {shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)' https://mcp.example.com/sse: "
    assert str(raised.value).startswith(named), str(raised.value)
    mine, other = (Upstream("stdio", command="npx", args=("mcp-remote", u)) for u in (url, url.replace("k3y", "k4y")))
    assert mine.describe() == other.describe() and mine.differences(other) == "arguments differ in a redacted value"


def test_a_sync_prunes_only_what_its_upstream_synced(
    store: ToolStore, listings: dict[tuple[str, str], McpListing], caplog: pytest.LogCaptureFixture
) -> None:
    """Tools imported by hand under a provider are not its upstream's: a first sync of that provider with prune keeps
    them; one of the same id as a tool the server lists is refused, naming it, and writes nothing, unless adopted
    (with a warning naming it), after which the upstream's prune may remove it."""
    radar = Tool(id="weather.radar", name="radar", provider="weather", description="Rain radar images of a region")
    store.upsert([radar])
    report = sync_listing(store, listings["weather", "base"], prune=True)
    assert sorted(report.inserted) == ["weather.get_forecast", "weather.list_alerts", "weather.search"]
    assert report.removed == []
    report = sync_listing(store, listings["weather", "fewer"], prune=True)
    assert report.removed == ["weather.list_alerts"]

    mine = Tool(id="weather.list_alerts", name="list_alerts", provider="weather", description="My own alerts")
    store.upsert([mine])
    for prune in (False, True):
        with pytest.raises(McpSyncError, match=r"'weather.list_alerts' \(imported by hand\).*--adopt"):
            sync_listing(store, listings["weather", "base"], prune=prune)
    assert store.get("weather.list_alerts").description == "My own alerts"
    with caplog.at_level("WARNING", logger="toolstore"):
        report = sync_listing(store, listings["weather", "base"], adopt=True)
    assert report.updated == ["weather.list_alerts"]
    assert any(
        "took over 1 tool(s)" in r.getMessage() and "weather.list_alerts" in r.getMessage() for r in caplog.records
    )
    report = sync_listing(store, listings["weather", "fewer"], prune=True)
    assert report.removed == ["weather.list_alerts"]
    assert [t.id for t in store.tools()] == ["weather.get_forecast", "weather.radar", "weather.search"]


def test_sync_mcp_stdio_adopts_tools_imported_by_hand(store: ToolStore) -> None:
    """The library's sync of a stdio server takes over a listed tool imported by hand when told to (``adopt``), as
    sync_listing and the CLI do, and refuses it otherwise (sync_mcp_http: test_http_sync)."""
    store.upsert([Tool(id="weather.search", name="search", provider="weather", description="My own search")])
    with pytest.raises(McpSyncError, match=r"'weather.search' \(imported by hand\).*--adopt"):
        sync_mcp_stdio(store, sys.executable, server("weather"))
    report = sync_mcp_stdio(store, sys.executable, server("weather"), adopt=True)
    assert sorted(report.inserted) == ["weather.get_forecast", "weather.list_alerts"]
    assert report.updated == ["weather.search"]
    assert store.get("weather.search").description != "My own search"


def _recorded(dsn: str, catalog: str) -> list[tuple[str, list[str]]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "select u.provider, u.args from toolstore.mcp_upstreams u join toolstore.catalogs c on c.id = u.catalog_id"
            " where c.name = %s order by 1",
            [catalog],
        ).fetchall()


def test_two_servers_reporting_one_name_never_share_a_provider(dsn: str, store: ToolStore) -> None:
    """Two upstreams (different command lines) whose servers both say "weather": the second sync is refused, naming
    both, and writes nothing (no tool pruned, the gateway's record of the first kept); under its own provider it
    syncs beside the first; replacing the first (the server moved) is asked for explicitly, and only then pruned."""
    first, other = server("weather"), server("weather", "fewer", page_size=0)  # another command line, one tool less
    sync_mcp_stdio(store, sys.executable, first)
    ids = sorted(t.id for t in store.tools())
    assert ids == ["weather.get_forecast", "weather.list_alerts", "weather.search"]
    listing = fetch_stdio(sys.executable, other)
    assert listing.server_name == "weather" and listing.upstream is not None
    for prune in (False, True):
        with pytest.raises(McpSyncError) as refused:
            sync_listing(store, listing, prune=prune)
        message = str(refused.value)
        assert "'weather'" in message and shlex.join([sys.executable, *first]) in message, message
        assert shlex.join([sys.executable, *other]) in message and "--provider" in message, message
    assert sorted(t.id for t in store.tools()) == ids  # nothing pruned, nothing overwritten
    assert _recorded(dsn, store.catalog) == [("weather", first)]  # call_tool still reaches the first server

    report = sync_listing(store, listing, provider="weather_eu", prune=True)  # kept apart: its own provider
    assert sorted(report.inserted) == ["weather_eu.get_forecast", "weather_eu.search"] and report.removed == []
    assert _recorded(dsn, store.catalog) == [("weather", first), ("weather_eu", other)]
    again = sync_mcp_stdio(store, sys.executable, first, prune=True)  # the same server again: no conflict
    assert (again.unchanged, again.removed) == (3, [])

    report = sync_listing(store, listing, prune=True, replace_upstream=True)  # the server moved: said explicitly
    assert report.removed == ["weather.list_alerts"]
    assert _recorded(dsn, store.catalog) == [("weather", other), ("weather_eu", other)]


def _secrets(dsn: str, catalog: str) -> dict[str, str]:
    """Each recorded upstream's arguments, env, headers and URL as one string, by provider."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "select u.provider, u.args::text || u.env::text || u.headers::text || coalesce(u.url, '')"
            " from toolstore.mcp_upstreams u"
            " join toolstore.catalogs c on c.id = u.catalog_id where c.name = %s",
            [catalog],
        ).fetchall()
    return dict(rows)


def _account(transport: str, secret: str, name: str = "") -> Upstream:
    """One server reached with an account's ``secret``: in an env variable, a header, or the URL's query."""
    if transport == "stdio":
        return Upstream("stdio", command="github-mcp", env={name or "GITHUB_TOKEN": secret})
    if transport == "query":
        return Upstream("http", url=f"https://mcp.example.com/mcp?{name or 'token'}={secret}")
    return Upstream("http", url="https://mcp.example.com/mcp", headers={name or "Authorization": f"Bearer {secret}"})


ACCOUNT_TRANSPORTS = ["stdio", "http", "query"]
DIFFERS = {"stdio": "env GITHUB_TOKEN differ", "http": "headers Authorization differ", "query": "differ in their query"}


@pytest.mark.parametrize("transport", ACCOUNT_TRANSPORTS)
def test_the_same_command_or_url_with_other_env_or_headers_is_another_upstream(
    dsn: str, store: ToolStore, transport: str
) -> None:
    """One server command run with two accounts' tokens (or one URL with two Authorization headers, or two tokens in
    its query) is two upstreams: the second sync under the provider the server names is refused, naming what differs
    but no value and exactly what to pass for either case, and writes nothing; under its own provider both are
    recorded, and the gateway keeps a session for each."""
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    work, home = _account(transport, "work-secret"), _account(transport, "home-secret")
    sync_listing(store, McpListing("github", tools, work))
    for prune in (False, True):
        with pytest.raises(McpSyncError) as refused:
            sync_listing(store, McpListing("github", tools, home), prune=prune)
        message = str(refused.value)
        assert DIFFERS[transport] in message and "work-secret" not in message and "home-secret" not in message
        assert "another account" in message and "(--provider NAME)" in message, message
        assert "rotated" in message and "(--provider github)" in message, message
    assert _recorded(dsn, store.catalog) == [("github", [])]
    assert "work-secret" in _secrets(dsn, store.catalog)["github"]
    sync_listing(store, McpListing("github", tools, home), provider="github_home")
    assert [r[0] for r in _recorded(dsn, store.catalog)] == ["github", "github_home"]
    assert work.key() != home.key()
    sync_listing(store, McpListing("github", tools, work), prune=True)  # the same upstream again: no conflict
    assert "work-secret" in _secrets(dsn, store.catalog)["github"]


@pytest.mark.parametrize("transport", ACCOUNT_TRANSPORTS)
def test_a_rotated_secret_is_recorded_when_the_sync_names_its_provider(
    dsn: str, store: ToolStore, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A literal secret rotated for the same account (ghp_old to ghp_new): a sync naming the provider records the new
    value over the old, with its tools unchanged, and leaves another account's upstream alone; another variable or
    header name (or query parameter) is still another upstream, refused even under a named provider."""
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    sync_listing(store, McpListing("github", tools, _account(transport, "old-secret")))
    sync_listing(store, McpListing("github", tools, _account(transport, "home-secret")), provider="github_home")
    with caplog.at_level("INFO", logger="toolstore"):
        report = sync_listing(store, McpListing("github", tools, _account(transport, "new-secret")), provider="github")
    assert (report.unchanged, report.inserted, report.updated) == (1, [], [])
    secrets = _secrets(dsn, store.catalog)
    assert "new-secret" in secrets["github"] and "old-secret" not in secrets["github"]
    assert "home-secret" in secrets["github_home"]
    logged = [r.getMessage() for r in caplog.records if "new values" in r.getMessage()]
    assert logged and DIFFERS[transport] in logged[0] and "-secret" not in logged[0], logged
    sync_listing(store, McpListing("github", tools, _account(transport, "new-secret")))  # as recorded: no conflict

    renamed = _account(transport, "new-secret", name="GH_TOKEN" if transport == "stdio" else "X-Token")
    with pytest.raises(McpSyncError, match="another MCP server.*--replace-upstream"):
        sync_listing(store, McpListing("github", tools, renamed), provider="github")
    assert "new-secret" in _secrets(dsn, store.catalog)["github"]


def test_header_names_are_one_in_any_case(dsn: str, store: ToolStore) -> None:
    """HTTP header names are case-insensitive: ``authorization`` is the upstream's ``Authorization``, so the same value
    is the same upstream (one gateway session), another is its rotated secret (recorded under the named provider,
    refused as another account's without), never another server; a header given twice in two cases is refused, and so
    is a placeholder written ``[REDACTED]``."""
    from toolstore import InvalidInputError
    from toolstore._mcp_sync import fetch_http

    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    url = "https://mcp.example.com/mcp"

    def upstream(name: str, value: str) -> Upstream:
        return Upstream("http", url=url, headers={name: value})

    sync_listing(store, McpListing("github", tools, upstream("Authorization", "Bearer old-secret")))
    lower = upstream("authorization", "Bearer old-secret")
    assert lower.key() == upstream("Authorization", "Bearer old-secret").key()
    sync_listing(store, McpListing("github", tools, lower), prune=True)  # the same upstream: no conflict
    rotated = upstream("AUTHORIZATION", "Bearer new-secret")
    with pytest.raises(McpSyncError, match=r"from this MCP server .*\(headers authorization differ; values not shown"):
        sync_listing(store, McpListing("github", tools, rotated))
    sync_listing(store, McpListing("github", tools, rotated), provider="github")
    assert "new-secret" in _secrets(dsn, store.catalog)["github"]
    twice = Upstream("http", url=url, headers={"Authorization": "Bearer a", "authorization": "Bearer b"})
    for refused in (
        lambda: sync_listing(store, McpListing("github", tools, twice), provider="github"),
        lambda: fetch_http(url, headers=twice.headers),
    ):
        with pytest.raises(InvalidInputError, match="'Authorization', 'authorization' are one header"):
            refused()
    with pytest.raises(InvalidInputError, match="header 'Authorization' is 'Bearer \\[REDACTED\\]': a placeholder"):
        sync_listing(
            store, McpListing("github", tools, upstream("Authorization", "Bearer [REDACTED]")), provider="github"
        )
    assert "new-secret" in _secrets(dsn, store.catalog)["github"]


@pytest.mark.parametrize(
    ("flag", "shown"),
    [
        (["--token", "{}"], "--token [redacted]"),
        (["--api-key={}"], "--api-key=[redacted]"),
        (["--GitHub_Token", "{}"], "--GitHub_Token [redacted]"),
        (["--db-password={}"], "--db-password=[redacted]"),
        (["--accessToken", "{}"], "--accessToken [redacted]"),
        (["--clientSecret={}"], "--clientSecret=[redacted]"),
    ],
    ids=["token", "api-key=", "github-token", "db-password=", "accessToken", "clientSecret="],
)
def test_a_secret_flags_value_is_rotated_like_an_env_value_and_never_described(
    dsn: str, store: ToolStore, flag: list[str], shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The value of a well-known secret flag in a stdio upstream's arguments (``--token X``, ``--api-key=X``, a longer
    name ending so, in any case, in camelCase too) is held like an env value: another one is the same server with a
    rotated secret (recorded under the named provider, refused without, naming the flag and no value), it is redacted
    wherever the upstream is described, and another value of any other argument is still another server."""

    def account(secret: str, org: str = "acme") -> Upstream:
        args = (*(a.format(secret) for a in flag), "--org", org)
        return Upstream("stdio", command="github-mcp", args=args)

    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    sync_listing(store, McpListing("github", tools, account("old-secret")))
    assert account("old-secret").describe() == f"stdio: github-mcp {shown} --org acme"
    name = flag[0].partition("=")[0]
    with pytest.raises(McpSyncError) as refused:
        sync_listing(store, McpListing("github", tools, account("new-secret")))
    message = str(refused.value)
    assert f"from this MCP server (stdio: github-mcp {shown} --org acme) with other values" in message, message
    assert f"(the values of {name} differ; values not shown)" in message and "-secret" not in message, message
    with caplog.at_level("INFO", logger="toolstore"):
        sync_listing(store, McpListing("github", tools, account("new-secret")), provider="github")
    assert "new-secret" in _secrets(dsn, store.catalog)["github"]
    logged = [r.getMessage() for r in caplog.records if "new values" in r.getMessage()]
    assert logged and f"the values of {name} differ" in logged[0] and "-secret" not in logged[0], logged
    with pytest.raises(McpSyncError, match="another MCP server.*--replace-upstream"):
        sync_listing(store, McpListing("github", tools, account("new-secret", org="other")), provider="github")
    for no in ("--no-password", "--noPassword"):  # a flag that takes no value: no secret after it
        not_secret = [Upstream("stdio", command="psql-mcp", args=(no, db)) for db in ("app", "other")]
        assert not_secret[0].identity() != not_secret[1].identity()


def test_a_secret_flag_written_either_way_is_one_upstream(dsn: str, store: ToolStore) -> None:
    """``--token X`` and ``--token=X``, the flag's name in any case (``--API-KEY=X``, ``--api-key=X``), are one
    upstream: the same value written another way is no conflict, and is recorded as now given (the server is started
    with its arguments as written); another value is a rotation (recorded under the named provider, refused without,
    naming the flag), never another server to be replaced."""
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]

    def sync(*args: str, provider: str | None = None) -> None:
        upstream = Upstream("stdio", command="github-mcp", args=(*args, "--org", "acme"))
        sync_listing(store, McpListing("github", tools, upstream), provider=provider)

    sync("--token", "ghp_old")
    for written in (["--token=ghp_old"], ["--TOKEN", "ghp_old"]):  # not even named: the same upstream
        sync(*written)
        assert _recorded(dsn, store.catalog) == [("github", [*written, "--org", "acme"])]
    with pytest.raises(McpSyncError, match=r"with other values \(the values of --TOKEN differ; values not shown\)"):
        sync("--token=ghp_new")
    sync("--token=ghp_new", provider="github")
    assert _recorded(dsn, store.catalog) == [("github", ["--token=ghp_new", "--org", "acme"])]
    sync("--API-KEY=key_old", provider="keyed")
    sync("--api-key", "key_new", provider="keyed")
    assert _recorded(dsn, store.catalog)[1] == ("keyed", ["--api-key", "key_new", "--org", "acme"])


def test_a_secret_flag_with_underscores_dashes_or_neither_is_one_flag(dsn: str, store: ToolStore) -> None:
    """``--api_key X``, ``--api-key X`` and ``--apiKey=X`` are one secret flag, as its redaction reads them: the same
    value so written is the same upstream, recorded as now given (the server is started with its arguments as written),
    and another value is a rotation naming the flag, never another server."""
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]

    def sync(*args: str, provider: str | None = None, server: str = "keyed") -> None:
        upstream = Upstream("stdio", command=f"{server}-mcp", args=(*args, "--org", "acme"))
        sync_listing(store, McpListing(server, tools, upstream), provider=provider)

    sync("--api_key", "key_old")
    for written in (["--api-key", "key_old"], ["--apiKey=key_old"]):  # not even named: the same upstream
        sync(*written)
        assert _recorded(dsn, store.catalog) == [("keyed", [*written, "--org", "acme"])]
    with pytest.raises(McpSyncError, match=r"with other values \(the values of --apiKey differ; values not shown\)"):
        sync("--API_KEY", "key_new")
    sync("--API_KEY", "key_new", provider="keyed")
    assert _recorded(dsn, store.catalog) == [("keyed", ["--API_KEY", "key_new", "--org", "acme"])]
    sync("--client-secret", "s_old", server="oauth")  # the message names the flag as the recorded upstream writes it
    with pytest.raises(McpSyncError, match=r"with other values \(the values of --client-secret differ; values not"):
        sync("--client_secret=s_new", server="oauth")


@pytest.mark.parametrize(
    ("placeholder", "what"),
    [
        (Upstream("stdio", command="github-mcp", env={"GITHUB_TOKEN": "..."}), "env variable 'GITHUB_TOKEN'"),
        (Upstream("http", url="https://mcp.example.com/", headers={"Authorization": "..."}), "header 'Authorization'"),
        (Upstream("http", url="https://mcp.example.com/mcp?org=acme&token=..."), "the URL's query parameter 'token'"),
        (Upstream("http", url="https://me:...@mcp.example.com/mcp"), "the URL's password"),
        (
            Upstream("http", url="https://mcp.example.com/", headers={"Authorization": "Bearer ..."}),
            "header 'Authorization'",
        ),
        (Upstream("stdio", command="pg-mcp", args=("--dsn", "postgresql://u:[redacted]@db/app")), "argument #2"),
        (Upstream("stdio", command="github-mcp", args=("--org", "acme", "--token=...")), "argument #3"),
    ],
    ids=["env", "header", "query", "credentials", "scheme", "redacted-argument", "secret-flag"],
)
def test_a_value_written_as_a_placeholder_is_refused_not_recorded(
    dsn: str, store: ToolStore, placeholder: Upstream, what: str
) -> None:
    """A value that is literally ``...`` (alone or after a scheme word), or holds ``[redacted]`` (copied from a message
    or log line that hid the secret), is refused at sync time, naming where it stands: under the named provider it
    would be recorded over the real secret as a rotation. Refused before the server is reached, by the CLI too."""
    from toolstore import InvalidInputError
    from toolstore._mcp_sync import fetch_http

    def fill(value: str) -> str:
        return value.replace("...", "ghp_real").replace("[redacted]", "ghp_real")

    real = dataclasses.replace(
        placeholder,
        env={name: fill(value) for name, value in placeholder.env.items()},
        headers={name: fill(value) for name, value in placeholder.headers.items()},
        url=placeholder.url and fill(placeholder.url),
        args=tuple(fill(a) for a in placeholder.args),
    )
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    sync_listing(store, McpListing("github", tools, real))
    refused = f"{re.escape(what)} is '[^']*': a placeholder, not a value"
    with pytest.raises(InvalidInputError, match=refused):
        sync_listing(store, McpListing("github", tools, placeholder), provider="github")
    assert "ghp_real" in _secrets(dsn, store.catalog)["github"]
    with pytest.raises(InvalidInputError, match=refused):  # not McpSyncError: no server is started or asked
        if placeholder.transport == "stdio":
            fetch_stdio("no-such-mcp-server", placeholder.args, env=placeholder.env)
        else:
            fetch_http(placeholder.url or "", headers=placeholder.headers)
    if placeholder.env:
        args = ["--dsn", dsn, "--embedder", "hashing", "--catalog", "cli", "sync", "mcp", "--provider", "github"]
        ran = CliRunner().invoke(main_cli, [*args, "--env", "GITHUB_TOKEN=...", "--", "no-such-mcp-server"])
        assert isinstance(ran.exception, InvalidInputError) and re.search(refused, str(ran.exception)), ran.output


def test_a_url_that_differs_only_in_its_query_or_credentials_is_said_to(store: ToolStore) -> None:
    """The description of an HTTP upstream leaves out the URL's credentials and query (they may hold a token): when
    only those differ, the refusal says which part differs, never its value, and not that some unnamed headers do."""
    tools = [{"name": "search", "description": "Search issues", "inputSchema": {"type": "object"}}]
    sync_listing(
        store, McpListing("github", tools, Upstream("http", url="https://mcp.example.com/mcp?token=work-secret"))
    )
    for url, differs in [
        ("https://mcp.example.com/mcp?token=home-secret", "(the URLs differ in their query; values not shown)"),
        ("https://me:home-secret@mcp.example.com/mcp?token=work-secret", "; the URLs differ in their credentials)"),
    ]:
        with pytest.raises(McpSyncError) as refused:
            sync_listing(store, McpListing("github", tools, Upstream("http", url=url)))
        message = str(refused.value)
        assert differs in message and "-secret" not in message and "headers  differ" not in message, message
    work = Upstream("http", url="https://mcp.example.com/mcp?token=a", headers={"Authorization": "Bearer a"})
    home = Upstream("http", url="https://me:b@mcp.example.com/mcp?token=b", headers={"Authorization": "Bearer b"})
    assert work.differences(home) == "headers Authorization differ; the URLs differ in their credentials and query"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_sync(store: ToolStore) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, *server("web"), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("the streamable-HTTP MCP server did not start")
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        store.upsert([Tool(id="web.search", name="search", provider="web", description="My own web search")])
        with pytest.raises(McpSyncError, match=r"'web.search' \(imported by hand\).*--adopt"):
            sync_mcp_http(store, url, headers={"X-Test": "1"})
        report = sync_mcp_http(store, url, headers={"X-Test": "1"}, adopt=True)
        assert sorted(report.inserted) == ["web.get_forecast", "web.list_alerts"] and report.updated == ["web.search"]
        again = sync_mcp_http(store, url, headers={"X-Test": "1"}, prune=True)
        assert (again.unchanged, again.embedded, again.removed) == (3, 0, [])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def cli(dsn: str, *args: str) -> Any:
    """Run the CLI in-process (click's runner); JSON output because stdout is not a terminal."""
    result = CliRunner().invoke(main_cli, ["--dsn", dsn, "--embedder", "hashing", "--catalog", "cli", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_cli_sync_expand_and_export(dsn: str, tmp_path: Path) -> None:
    out = cli(dsn, "sync", "mcp", "--provider", "wx", "--", sys.executable, *server("weather"))
    assert (out["inserted"], out["provider"], out["server"]) == (3, "wx", "weather")
    fewer = ["--", sys.executable, *server("weather", "fewer")]  # another command line: replaces the first, as said
    args = ["--dsn", dsn, "--embedder", "hashing", "--catalog", "cli", "sync", "mcp", "--provider", "wx", "--prune"]
    refused = CliRunner().invoke(main_cli, [*args, *fewer])
    assert isinstance(refused.exception, McpSyncError) and "--replace-upstream" in str(refused.exception)
    out = cli(dsn, "sync", "mcp", "--provider", "wx", "--prune", "--replace-upstream", *fewer)
    assert (out["unchanged"], out["removed"], out["embedded"]) == (2, 1, 0)
    out = cli(dsn, "expand", "--offline")
    assert (out["tools"], out["updated"], out["llm_calls"]) == (2, 2, 0)
    exported = tmp_path / "catalog.json"
    cli(dsn, "export", "--format", "anthropic", "--with-metadata", "-o", str(exported))
    tools = parse_tools(json.loads(exported.read_text()))
    assert [t.id for t in tools] == ["wx.get_forecast", "wx.search"]
    assert all(t.provider == "wx" and "\n" in t.expansion for t in tools)


def test_cli_sync_records_a_rotated_env_secret_under_a_named_provider(dsn: str) -> None:
    """`sync mcp --env TOKEN=old` then `--env TOKEN=new`: refused while the provider is only the server's name (it may
    be another account), the message saying what to pass; recorded once `--provider` names it."""
    command = ["--", sys.executable, *server("weather")]
    cli(dsn, "sync", "mcp", "--env", "TOKEN=old-secret", *command)
    args = ["--dsn", dsn, "--embedder", "hashing", "--catalog", "cli", "sync", "mcp", "--env", "TOKEN=new-secret"]
    refused = CliRunner().invoke(main_cli, [*args, *command])
    message = str(refused.exception)
    assert isinstance(refused.exception, McpSyncError) and "(--provider weather)" in message, message
    out = cli(dsn, "sync", "mcp", "--provider", "weather", "--env", "TOKEN=new-secret", *command)
    assert (out["unchanged"], out["inserted"]) == (3, 0)
    assert "new-secret" in _secrets(dsn, "cli")["weather"]


def test_cli_sync_of_a_program_that_is_no_mcp_server_prints_lines_not_tracebacks(dsn: str) -> None:
    program = ["--", sys.executable, "-c", "print('hello'); import time; time.sleep(1)"]
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore.cli", "--dsn", dsn, "--embedder", "hashing", "sync", "mcp", *program],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[-1].startswith("error: MCP server") and len(lines) <= 3, lines  # the SDK's own report, one line


#: What tests/mcp_server.py --chatty is handed and writes to its stderr: an env value given as a ${VAR} reference,
#: one given literally (neither looks like a credential), and a secret flag's value.
CHATTY_SECRETS = ("plain-S3cret-value", "literal-s3cret-2", "sk-live-abc123XYZ")
CHATTY_ENV = {"CHATTY_PROFILE": "${TOOLSTORE_TEST_SECRET}", "CHATTY_OTHER": CHATTY_SECRETS[1], "CHATTY_DEBUG": "1"}
CHATTY_ARGS = ("--chatty", "--api-key", CHATTY_SECRETS[2])


def chatty_lines(stderr: str, args: Sequence[str]) -> list[str]:
    """The lines of ``stderr`` that tests/mcp_server.py ``args`` wrote (their prefix cut), after checking that no
    value toolstore handed it is in ``stderr``, and that they came in order, each line whole, the last one too."""
    assert not [s for s in CHATTY_SECRETS if s in stderr], stderr[:2000]
    prefix = f"[{Upstream('stdio', command=sys.executable, args=tuple(args)).describe()}] "
    lines = [line.removeprefix(prefix) for line in stderr.splitlines() if line.startswith(prefix)]
    assert "--api-key [redacted]" in prefix and lines[:5] == [
        f"started as {' '.join(args)}".replace(CHATTY_SECRETS[2], "[redacted]"),
        "CHATTY_DEBUG is 1",  # too short to be taken for a secret
        "CHATTY_OTHER is [redacted]",
        "CHATTY_PROFILE is [redacted]",
        "bad bytes \ufffd\ufffd end",
    ], lines[:5]
    assert lines[5] == "x" * 4000 + " [line cut: 200000 bytes]"
    assert lines[6:5006] == [f"noise {i}" for i in range(5000)]
    return lines[5006:]


def test_a_stdio_servers_stderr_is_shown_line_by_line_redacted_and_named(dsn: str) -> None:
    """What a stdio server wrote to its stderr went to toolstore's stderr as written, so a server logging its command
    line or env at its start put the secrets toolstore handed it in toolstore's logs; each line now comes prefixed with
    the upstream's description, the values of its env (${VAR} expanded) and of its secret flags hidden wherever they
    appear, what looks like a credential redacted, bytes that are not UTF-8 replaced, a long line cut, and every line
    shown (the last one, without its newline, at exit) while the server keeps writing more than a pipe holds."""
    env = [f"--env={name}={value}" for name, value in CHATTY_ENV.items()]
    args = [*server("chatty"), *CHATTY_ARGS]
    proc = subprocess.run(
        [sys.executable, "-m", "toolstore.cli", "--dsn", dsn, "--embedder", "hashing", "-c", "chatty", "sync", "mcp"]
        + [*env, "--", sys.executable, *args],
        capture_output=True,
        text=True,
        errors="replace",  # what the server wrote as it was (before), bytes that are not UTF-8 too
        timeout=120,
        env={**os.environ, "TOOLSTORE_TEST_SECRET": CHATTY_SECRETS[0]},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["inserted"] == 4  # with key_suffix: it has an --api-key
    assert chatty_lines(proc.stderr, args) == ["bye"]


# -- expansions -------------------------------------------------------------------------------------------


CATALOG = [
    Tool(id="acme.frobnicate", name="frobnicate", provider="acme", description="Run the frobnicator on a widget"),
    Tool(
        id="acme.list_widgets",
        name="listWidgets",
        provider="acme",
        description="List every widget in stock",
        parameters={"type": "object", "properties": {"warehouse_id": {"type": "string", "description": "Which depot"}}},
    ),
    Tool(id="mail.send_email", name="send_email", provider="mail", description="Send an email to a recipient"),
    Tool(id="cal.create_event", name="create_event", provider="cal", description="Create a calendar event"),
    Tool(id="notes.add_note", name="add_note", provider="notes", description="Write a note"),
    Tool(id="bare", name="bare"),
]
PHRASES = {"acme.frobnicate": ["reticulate the splines", "spline reticulation"]}


def chat_handler(messages: list[dict[str, Any]], model: str) -> str:
    tool_id = re.search(r"\(id ([^)]+)\)", messages[-1]["content"]).group(1)  # type: ignore[union-attr]
    return json.dumps(PHRASES.get(tool_id, [f"phrase for {tool_id}", "another user request"]))


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(chat_handler=chat_handler) as server:
        yield server


def client_for(fake: FakeOpenAI) -> Any:
    return openai.OpenAI(api_key=fake.api_key, base_url=fake.base_url, max_retries=0)


def chat_calls(fake: FakeOpenAI) -> int:
    return len(fake.requests_to("/chat/completions"))


def run_expand(store: ToolStore, fake: FakeOpenAI, **kwargs: Any) -> Any:
    return expand(store, client=client_for(fake), model="fake-chat", concurrency=1, progress=False, **kwargs)


def test_llm_expansion_is_stored_indexed_and_rerun_only_for_changed_tools(store: ToolStore, fake: FakeOpenAI) -> None:
    store.upsert(CATALOG)
    lexical = {"name": 1.0, "description": 1.0, "expansion": 1.0, "dense": 0.0, "intent": 0.0}
    assert "acme.frobnicate" not in store.route("reticulate splines", k=3, weights=lexical).ids

    report = run_expand(store, fake)
    assert (report.generated, len(report.updated), chat_calls(fake)) == (6, 6, 6)
    frob = store.get("acme.frobnicate")
    assert frob.expansion.splitlines()[:3] == ["reticulate the splines", "spline reticulation", "frobnicate"]
    assert expansion_record(frob)["model"] == "fake-chat"  # type: ignore[index]
    assert store.route("reticulate splines", k=3, weights=lexical).ids[0] == "acme.frobnicate"
    assert store.route("reticulate splines", k=3).ids[0] == "acme.frobnicate"

    again = run_expand(store, fake)
    assert (again.generated, again.updated, again.unchanged, chat_calls(fake)) == (0, [], 6, 6)

    store.upsert([dataclasses.replace(frob, description="Run the frobnicator on a gadget")])
    third = run_expand(store, fake)
    assert (third.generated, third.updated, chat_calls(fake)) == (1, ["acme.frobnicate"], 7)

    store.upsert([Tool(id="mail.send_email", name="send_email", provider="mail", expansion="my own words")])
    fourth = run_expand(store, fake)
    assert (fourth.generated, fourth.handwritten) == (0, 1)
    assert store.get("mail.send_email").expansion == "my own words"


def test_expansion_is_resumable_after_a_failure(store: ToolStore, fake: FakeOpenAI) -> None:
    store.upsert(CATALOG)
    fake.pass_next(3)
    fake.fail_next(500)
    with pytest.raises(ExpansionError, match="failed"):
        run_expand(store, fake, batch_size=2)
    done = {t.id for t in store.tools() if t.expansion}
    assert done == {"acme.frobnicate", "acme.list_widgets"}  # the first batch was committed
    report = run_expand(store, fake, batch_size=2)
    assert report.generated == 4 and chat_calls(fake) == 4 + 4
    assert all(expansion_record(t) and expansion_record(t)["llm"] for t in store.tools())  # type: ignore[index]


def test_a_failed_expansion_keeps_no_credential_in_its_error() -> None:
    from types import SimpleNamespace

    from toolstore._phrases import llm_phrases

    def create(**_: Any) -> Any:
        raise RuntimeError("401 for https://llm.example/v1/chat?api_key=sk-live-0123456789abcdef")

    client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    with pytest.raises(ExpansionError, match="failed: RuntimeError: 401") as failed:
        llm_phrases(client, "m", CATALOG[0])
    assert "sk-live" not in str(failed.value)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("notaurl", "notaurl"),
        ("localhost:8080/v1", "localhost:8080/v1"),
        ("ftp://llm.example/v1", "ftp://llm.example"),
        ("https://host:x/v1", "https://host:x"),
    ],
)
def test_a_base_url_that_is_no_http_url_is_refused_up_front(url: str, shown: str) -> None:
    """`toolstore expand --base-url notaurl` was accepted (sync mcp --url checks its scheme) and the SDK failed at the
    first model call; the option refuses it as a usage error naming itself, before the store is opened, and the
    library's make_client and OpenAIEmbedder name their base_url."""
    args = ["--dsn", "postgresql:///none?host=/nonexistent", "expand", "--base-url", url]
    result = CliRunner().invoke(main_cli, args)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for '--base-url': {shown!r} is not an http:// or https:// URL" in result.output
    with pytest.raises(InvalidInputError, match=f"^base_url must be an http:// or https:// URL, got {shown!r}$"):
        make_client(base_url=url)
    reembed = ["--dsn", "postgresql:///none?host=/nonexistent", "reembed", "--model", "openai/m", "--base-url", url]
    result = CliRunner().invoke(main_cli, reembed)  # a usage error as expand's, not the library's (exit 1)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert f"Invalid value for '--base-url': {shown!r} is not an http:// or https:// URL" in result.output
    with pytest.raises(InvalidInputError, match="^OpenAIEmbedder base_url must be an http:// or https:// URL"):
        OpenAIEmbedder(api_key="k", base_url=url)


def test_a_base_url_whose_password_holds_a_slash_is_refused_without_showing_it() -> None:
    """'https://user:pa/ss@host/v1' (a password's '/' unescaped) was taken as a URL of host 'user' and port 'pa', and a
    failed request named its server 'https://[user:pa]': part of the password. It is refused, the password hidden."""
    url = "https://user:pa/ss@host/v1"
    args = ["--dsn", "postgresql:///none?host=/nonexistent", "expand", "--base-url", url]
    result = CliRunner().invoke(main_cli, args)
    assert result.exit_code == 2 and "is not an http:// or https:// URL" in result.output, result.output
    with pytest.raises(InvalidInputError) as refused:
        OpenAIEmbedder(api_key="k", base_url=url)
    assert "pa" not in result.output.replace("expand", "") and "pa/ss" not in str(refused.value), refused.value


@pytest.mark.parametrize("url", ["notaurl", "https://user:hunter2@host:notaport/v1"])
def test_openai_base_url_that_is_no_http_url_is_refused_up_front(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """$OPENAI_BASE_URL, which the SDK reads when given no base_url, was taken unchecked: `expand`, `reembed` and an
    OpenAIEmbedder failed only at the first request. It is checked where the base URL is taken, as --base-url is: an
    error naming the variable, its credentials redacted, before the store is opened. A base_url given, or an injected
    client, is not sent there, so the variable is not checked then."""
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    said = r"^\$OPENAI_BASE_URL must be an http:// or https:// URL, got "
    for call in (lambda: OpenAIEmbedder(api_key="k"), lambda: make_client(api_key="k")):
        with pytest.raises(InvalidInputError, match=said) as refused:
            call()
        assert "hunter2" not in str(refused.value), refused.value
    dsn = ["--dsn", "postgresql:///none?host=/nonexistent"]  # opening it would be a database error
    for args in (["expand"], ["reembed", "--model", "openai/m"], ["--embedder", "openai/m", "route", "q"]):
        result = CliRunner(env={"OPENAI_API_KEY": "k"}).invoke(main_cli, [*dsn, *args])
        assert isinstance(result.exception, InvalidInputError), (args, result.exception, result.output)
        assert re.match(said, str(result.exception)) and "hunter2" not in str(result.exception), result.exception
    assert OpenAIEmbedder(api_key="k", base_url="http://127.0.0.1:9/v1").cache_key.endswith(
        "#server=http://127.0.0.1:9/v1"
    )
    assert (
        OpenAIEmbedder(client=openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")).model
        == "openai/text-embedding-3-small"
    )
    assert make_client(api_key="k", base_url="http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1/"


def test_an_empty_openai_base_url_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty $OPENAI_BASE_URL (a script's unset variable) was OpenAI's server to the embedding cache's key but ''
    to the SDK, which then failed every request; it is unset, as toolstore reads its own variables: OpenAI's server."""
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    embedder = OpenAIEmbedder(api_key="k")
    assert embedder.cache_key == "openai/text-embedding-3-small"
    assert str(embedder._client.base_url) == "https://api.openai.com/v1/"
    assert str(make_client(api_key="k").base_url) == "https://api.openai.com/v1/"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("ftp://user:hunter2@llm.example/v1?key=hunter2", "ftp://llm.example"),
        ("https://user:hunter2@host:notaport/v1?key=hunter2", "https://host:notaport"),
        ("user:hunter2@host/v1?key=hunter2", "host/v1"),
    ],
)
def test_a_refused_url_is_quoted_by_its_scheme_and_server_only(url: str, shown: str) -> None:
    """A URL refused for its scheme or port was quoted whole but for a password (--base-url, an OpenAIEmbedder's or
    expand's base_url), or whole (sync mcp --url: 'ftp://u:pw@h/x?token=t' as given), though its path and query may
    hold a token; the error quotes its scheme and server only, or a text of no scheme without its credentials or query,
    wherever a URL is refused."""
    mcp = not url.startswith("https:")  # an MCP server's URL is refused for its scheme only
    refusals = [lambda: make_client(base_url=url), lambda: OpenAIEmbedder(api_key="k", base_url=url)]
    refusals += [lambda: fetch_http(url)] if mcp else []
    for refuse in refusals:
        with pytest.raises(InvalidInputError, match="http:// or https://") as refused:
            refuse()
        assert str(refused.value).endswith(f", got {shown!r}"), refused.value
    dsn = ["--dsn", "postgresql:///none?host=/nonexistent"]
    for args in (["expand", "--base-url", url], *([["sync", "mcp", "--url", url]] if mcp else [])):
        result = CliRunner().invoke(main_cli, [*dsn, *args])
        said = f"{result.output} {result.exception}"
        assert result.exit_code in (1, 2) and repr(shown) in said and "hunter2" not in said, said


def test_a_failed_model_call_names_its_server(fake: FakeOpenAI) -> None:
    """expand's model unreachable (or too slow) said 'APIConnectionError: Connection error.' without naming the server
    asked; it names the server's scheme, host and port, never the URL's credentials, path or query."""
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = f"http://user:sk-pw-0001@127.0.0.1:{port}/v1/secret-path?key=sk-query-0002"
    fake.stall_next(2.0)
    refused = make_client(base_url=unreachable, max_retries=0)
    slow = make_client(base_url=fake.base_url, api_key=fake.api_key, timeout=0.2, max_retries=0)
    for client, said in [
        (refused, f"APIConnectionError: Connection error. (server http://127.0.0.1:{port})"),
        (slow, f"APITimeoutError: Request timed out. (server {fake.base_url.removesuffix('/v1')})"),
    ]:
        with pytest.raises(ExpansionError) as failed:
            llm_phrases(client, "m", CATALOG[0])
        assert str(failed.value) == f"expansion of 'acme.frobnicate' failed: {said}"


def test_max_tools_caps_model_calls(store: ToolStore, fake: FakeOpenAI) -> None:
    store.upsert(CATALOG)
    report = run_expand(store, fake, max_tools=2)
    assert (report.generated, report.remaining, chat_calls(fake)) == (2, 4, 2)
    assert all(t.expansion for t in store.tools())  # the rest got offline phrases
    report = run_expand(store, fake)
    assert (report.generated, report.remaining, chat_calls(fake)) == (4, 0, 6)


def test_offline_expansion_is_never_empty_and_uses_intent_examples(store: ToolStore) -> None:
    store.upsert(CATALOG)
    store.add_examples([IntentExample("cal.create_event", "book a meeting with Dana on Friday")])
    report = expand(store, offline=True)
    assert len(report.updated) == 6 and report.generated == 0
    tools = {t.id: t for t in store.tools()}
    assert all(t.expansion.strip() for t in tools.values())
    assert tools["bare"].expansion == "bare"
    assert tools["acme.list_widgets"].expansion.splitlines()[:3] == ["list widgets", "warehouse id", "Which depot"]
    assert "book a meeting with Dana on Friday" in tools["cal.create_event"].expansion.splitlines()
    assert store.route("book a meeting with Dana", k=1, weights={"expansion": 1.0, "dense": 0.0}).ids == [
        "cal.create_event"
    ]

    assert expand(store, offline=True).updated == []
    store.add_examples([IntentExample("notes.add_note", "jot this down")])
    assert expand(store, offline=True).updated == ["notes.add_note"]


def test_offline_expansion_of_a_tool_with_many_examples_stays_within_the_limits(store: ToolStore) -> None:
    """600 examples of 240 characters are a valid tool; its offline expansion keeps what the field's caps hold."""
    from toolstore._phrases import MAX_EXPANSION_CHARS

    examples = tuple(f"example request number {i} " + "lorem ipsum dolor sit amet " * 8 for i in range(600))
    store.upsert([Tool(id="big", name="big_tool", description="a tool with many examples", examples=examples)])
    report = expand(store, offline=True, progress=False)
    assert report.updated == ["big"]
    expansion = store.get("big").expansion
    assert 0.9 * MAX_EXPANSION_CHARS < len(expansion) <= MAX_EXPANSION_CHARS
    assert expansion.splitlines()[:2] == ["big tool", examples[0][:300].strip()]


def test_resync_keeps_generated_expansions(
    store: ToolStore, fake: FakeOpenAI, listings: dict[tuple[str, str], McpListing]
) -> None:
    sync_listing(store, listings["weather", "base"])
    run_expand(store, fake)
    before = {t.id: t for t in store.tools()}
    report = sync_listing(store, listings["weather", "base"])
    assert (report.unchanged, report.embedded) == (3, 0)
    assert {t.id: t for t in store.tools()} == before
    report = sync_listing(store, listings["weather", "changed"])
    assert report.updated == ["weather.get_forecast"]
    assert store.get("weather.get_forecast").expansion == before["weather.get_forecast"].expansion
    assert run_expand(store, fake).generated == 1  # the stale expansion is regenerated


def test_reimport_keeps_generated_expansions(store: ToolStore, fake: FakeOpenAI) -> None:
    """A plain re-import of the same definitions (no expansion in them) keeps what ``expand`` wrote."""
    store.upsert(CATALOG)
    run_expand(store, fake)
    before = {t.id: t for t in store.tools()}
    assert all(t.expansion for t in before.values())
    report = store.upsert(CATALOG)
    assert (report.unchanged, report.embedded) == (len(CATALOG), 0)
    assert {t.id: t for t in store.tools()} == before


def test_a_stored_spec_that_is_not_an_object_does_not_break_later_writes(store: ToolStore) -> None:
    """A database written before such specs were refused may hold one: re-imports of that id still work."""
    store.upsert([Tool(id="a", name="a", description="alpha")])
    with store.connection() as conn:
        stored = "update tools set spec = '[1, 2]', spec_json = '[1, 2]' where catalog_id = %s and id = 'a'"
        conn.execute(stored, [store.info().id])
    assert expansion_record(store.get("a")) is None
    assert store.upsert([Tool(id="a", name="a", description="alpha beta")]).updated == ["a"]
    assert store.get("a").spec is None


def test_expand_skips_a_stored_tool_a_write_refuses_now_and_says_so(
    store: ToolStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A row written before upsert checked parameters (b35503d) may hold non-object ones; expand rewrote every tool
    through upsert, so that one tool failed the whole run ("tool #1 ('a.b'): parameters must be a JSON schema ...").
    Expand leaves that tool alone, writes the others, and warns once naming it and saying to import it again."""
    store.upsert([Tool(id="a.b", name="ab", description="alpha"), Tool(id="c.d", name="cd", description="gamma")])
    with store.connection() as conn:
        stored = (
            'update tools set parameters = \'{"type": "string"}\', parameters_json = \'{"type": "string"}\''
            " where catalog_id = %s and id = 'a.b'"
        )
        conn.execute(stored, [store.info().id])
    with caplog.at_level("WARNING", logger="toolstore"):
        report = expand(store, offline=True, progress=False)
    assert (report.updated, report.skipped) == (["c.d"], 1)
    assert store.get("c.d").expansion and not store.get("a.b").expansion
    warnings = [r.getMessage() for r in caplog.records if "expand skipped" in r.getMessage()]
    assert len(warnings) == 1 and "'a.b': parameters must be" in warnings[0] and "import them again" in warnings[0]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('["book a flight", "reserve plane tickets"]', ["book a flight", "reserve plane tickets"]),
        ('```json\n["book a flight", "Book a flight"]\n```', ["book a flight"]),
        ('{"phrases": ["cancel my order"]}', ["cancel my order"]),
        (
            'Here are some phrases:\n1. check the weather\n- is it raining\n* "forecast for tomorrow"',
            ["check the weather", "is it raining", "forecast for tomorrow"],
        ),
        ('Sure! ["find a restaurant", "see https://x.y", "' + "word " * 30 + '", "ok", 42]', ["find a restaurant"]),
        ("", []),
        ("I'm sorry, I cannot help with that.", []),
        ("[" * 5000 + '"book a flight"' + "]" * 5000 + "\nbook a flight", ["book a flight"]),  # was a RecursionError
        # nesting no list of phrases has is read as lines on every Python: json.loads read 150 levels, and 1,200 on
        # 3.12 and 5,000 on 3.13, as arrays without a phrase (where 3.11 gave up, a RecursionError, and read lines)
        ("[" * 1200 + '"book a flight"' + "]" * 1200 + "\nbook a flight", ["book a flight"]),
        ("[" * 150 + '"book a flight"' + "]" * 150 + "\nbook a flight", ["book a flight"]),
    ],
)
def test_parse_phrases(reply: str, expected: list[str]) -> None:
    assert parse_phrases(reply) == expected


def test_offline_phrases_without_anything_but_a_name() -> None:
    assert offline_phrases(Tool(id="x", name="getHTTPStatus")) == ["get http status"]


# -- export -------------------------------------------------------------------------------------------------


ROUND_TRIP = [
    Tool(
        id="gh.create_issue",
        name="create_issue",
        provider="gh",
        title="Create issue",
        description="Open an issue",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
        categories=("dev",),
        tags=("write",),
        keywords=("bug",),
        examples=("file a bug",),
        expansion="report a problem",
        avoid_when="read-only questions",
        always_on=True,
    ),
    Tool(id="custom-id", name="search", provider="docs", description="Search documents"),
    Tool(id="ping", name="ping"),
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_round_trip(dsn: str, fmt: str) -> None:
    def strip(tools: list[Tool]) -> list[Tool]:
        return [dataclasses.replace(t, spec=None) for t in tools]

    with ToolStore(dsn, embedder=HashingEmbedder(64), catalog="source") as source:
        source.upsert(ROUND_TRIP)
        exported = json.loads(json.dumps(export_catalog(source.tools(), fmt, with_metadata=True)))  # type: ignore[arg-type]
        with ToolStore(dsn, embedder=HashingEmbedder(64), catalog=f"copy-{fmt}") as copy:
            copy.upsert(parse_tools(exported))
            assert strip(copy.tools()) == strip(source.tools())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"max_tools": -1}, "max_tools must be None or an integer from 0 up, got -1"),
        ({"max_tools": 2.5}, "max_tools must be None or an integer from 0 up, got 2.5"),
        ({"batch_size": 0}, "batch_size must be an integer from 1 up, got 0"),
        ({"concurrency": 0}, "concurrency must be an integer from 1 up, got 0"),
        ({"concurrency": "4"}, "concurrency must be an integer from 1 up, got '4'"),
        ({"concurrency": True}, "concurrency must be an integer from 1 up, got True"),
    ],
)
def test_expand_refuses_counts_out_of_range_naming_them_before_anything_is_written(
    store: ToolStore, options: dict[str, Any], said: str
) -> None:
    """expand() took max_tools=-1 as 0, batch_size=0 and concurrency=0 as 1 without a word (the CLI's options refuse
    them), and concurrency='4' ended in a TypeError out of max(); each is an InvalidInputError naming the parameter and
    its range, before anything is read or written."""
    store.upsert(CATALOG)
    before = [t.expansion for t in store.tools()]
    with pytest.raises(InvalidInputError, match=f"^{re.escape(said)}$"):
        expand(store, offline=True, progress=False, **options)
    assert [t.expansion for t in store.tools()] == before
