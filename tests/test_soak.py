"""A short run of bench/soak.py (routers, writers, racing re-imports and session loggers together; every invariant
checked after)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


def test_a_short_soak_has_no_errors_and_keeps_every_invariant(server_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    env = {**os.environ, "TOOLSTORE_DSN": server_dsn}
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--seconds", "10", "--tools", "600", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(out.read_text())
    assert proc.returncode == 0, result
    assert result["errors"] == {} and all(result["statistics_exact"].values()) and not result["invalid_indexes"]
    assert all(result["transitions_exact"].values())
    assert result["ok"]["route"] > 50 and result["ok"].get("re-import --prune", 0) >= 1
    assert result["ok"].get("record calls", 0) > 10 and result["ok"].get("prune sessions", 0) >= 1
