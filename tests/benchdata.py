"""Where the shared public benchmarks are: ``$TOOLSTORE_BENCH``, else ``../shared/bench`` beside this checkout
(as bench/quality.sh finds them)."""

from __future__ import annotations

import os
from pathlib import Path

BENCH = Path(os.environ.get("TOOLSTORE_BENCH") or Path(__file__).resolve().parents[2] / "shared" / "bench")
