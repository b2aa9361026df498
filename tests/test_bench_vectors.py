"""The bench's on-disk vector cache (bench/_synth.py), keyed as the embedding cache is."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from toolstore import HashingEmbedder
from toolstore._text import dense_text

SYNTH = Path(__file__).resolve().parents[1] / "bench" / "_synth.py"


def synth(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/_synth.py as a module (the bench is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_synth", SYNTH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Rebuilt(HashingEmbedder):
    """The same model name as HashingEmbedder(16), other vectors and another cache key: as the shipped local model
    after a rebuild of its files."""

    @property
    def cache_key(self) -> str:
        return f"{self.model}#build=other"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return -super().embed_batch(texts)


def test_the_benchs_vectors_of_one_model_name_are_kept_apart_by_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/_synth.py's vector files were named by the model alone, so a benchmark after 6e0b0fd rebuilt the shipped
    model imported the earlier build's tool vectors and routed requests embedded by the new one. They are named by
    the embedder's cache key, which names the shipped model's build."""
    module = synth(monkeypatch)
    monkeypatch.setattr(module, "CHUNK", 8)
    before, after = HashingEmbedder(16), Rebuilt(16)
    assert before.model == after.model and before.cache_key != after.cache_key
    old_tools, _ = module.load_vectors(8, before, tmp_path, log=lambda *_: None)
    tools, examples = module.load_vectors(8, after, tmp_path, log=lambda *_: None)
    catalog = module.catalog(8)
    np.testing.assert_allclose(tools, after.embed_many([dense_text(t) for t in catalog.tools]), atol=1e-6)
    np.testing.assert_allclose(old_tools, -tools, atol=1e-6)
    assert examples.shape == (8 * module.EXAMPLES_PER_TOOL, 16)
