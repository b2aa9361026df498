"""The built wheel carries migrations/ and sql/ and works from a fresh virtual environment."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys, toolstore
    from toolstore import HashingEmbedder, Tool, ToolStore, migrate
    assert "site-packages" in toolstore.__file__, toolstore.__file__
    migrate(sys.argv[1])
    with ToolStore(sys.argv[1], embedder=HashingEmbedder(32), catalog="wheel") as store:
        store.upsert([Tool(id="a", name="send_email", description="Send an email"),
                      Tool(id="b", name="get_weather", description="Weather forecast for a city")])
        print(store.route("what is the weather forecast", k=1).ids[0])
    """
)


def test_wheel_installs_and_routes(dsn: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next(dist.glob("toolstore-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "toolstore/migrations/env.py" in names
    assert any(n.startswith("toolstore/migrations/versions/0002") for n in names)
    assert "toolstore/sql/route.sql" in names and "toolstore/sql/catalog.sql" in names
    assert "toolstore/demo/tools.jsonl" in names
    assert "toolstore/py.typed" in names
    assert "toolstore/cli/__main__.py" in names
    assert "toolstore/_embedders/minilm/model.onnx" in names and "toolstore/_embedders/minilm/LICENSE" in names
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Dependencies come from the test environment (no second download); toolstore itself from the wheel.
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True, timeout=300)
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, "-c", SCRIPT, dsn], capture_output=True, text=True, cwd=tmp_path, env=clean_env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "b"
