"""A short run of bench/soak.py (routers, writers, racing re-imports and session loggers together; every invariant
checked after)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"
#: The work the soak must have done (it runs past its seconds until it has, on a loaded machine): routes, racing
#: re-imports, session calls logged and pruned, tools written with their examples, a catalog dropped, all at once with
#: the other writers.
WANTED = {"route": 51, "re-import --prune": 1, "record calls": 11, "prune sessions": 1}
WANTED |= {"upsert with examples": 2, "drop catalog": 1}


def test_a_short_soak_has_no_errors_and_keeps_every_invariant(server_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    env = {**os.environ, "TOOLSTORE_DSN": server_dsn}
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", "10", "--tools", "600", "--json", str(out)]
        + [f"--at-least={name}={n}" for name, n in WANTED.items()],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(out.read_text())
    assert proc.returncode == 0, result
    assert result["errors"] == {} and all(result["statistics_exact"].values()) and not result["invalid_indexes"]
    assert all(result["transitions_exact"].values())
    assert all(result["ok"].get(name, 0) >= n for name, n in WANTED.items()), result["ok"]
