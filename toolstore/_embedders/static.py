"""Static embedders (model2vec, e.g. potion-base-8M): a text's vector is the mean of its tokens' rows in one table.

No network and no neural network at run time: tokenize, look the tokens up, average, normalise, about 0.03 ms a
request against the local MiniLM's 6-7 ms, at some cost in quality (README, Embedders). A model directory
(``scripts/build_static_model.py`` writes one) holds ``embeddings.npy`` (vocabulary x dimensions),
``tokenizer.json`` and ``embedder.json`` (``{"model": "static/NAME", "dim": D, "max_tokens": T}``);
``--embedder static:DIR`` selects it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import EmbedderError
from .base import Embedder, normalise
from .local import CONFIG_FILE, read_config

MODEL_FILES = ("embeddings.npy", "tokenizer.json")


class StaticEmbedder(Embedder):
    """A model2vec-style static model from ``model_dir``: the mean of the text's token vectors (special tokens not
    added, unknown tokens left out, at most ``max_tokens`` tokens), L2-normalised; a text with no known token gets
    the zero vector."""

    batch_size = 256

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = Path(model_dir)
        self.model, self.dim, self.max_tokens, _ = read_config(self.model_dir / CONFIG_FILE, kind="static")
        self._table: np.ndarray | None = None
        self._tokenizer: Any = None
        self._unknown: int | None = None
        self._lock = threading.Lock()

    @property
    def cache_key(self) -> str:
        """The model and its ``max_tokens`` (see ``LocalEmbedder.cache_key``)."""
        return f"{self.model}#max_tokens={self.max_tokens}"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, rows L2-normalised, in the order of ``texts``."""
        table, tokenizer = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, encoding in enumerate(tokenizer.encode_batch([str(t) for t in texts], add_special_tokens=False)):
            ids = [i for i in encoding.ids if i != self._unknown][: self.max_tokens]
            if ids:
                out[row] = table[ids].mean(axis=0)
        return normalise(out)

    def _load(self) -> tuple[np.ndarray, Any]:
        if self._table is not None:
            return self._table, self._tokenizer
        with self._lock:
            if self._table is None:
                missing = [name for name in MODEL_FILES if not (self.model_dir / name).is_file()]
                if missing:
                    raise EmbedderError(
                        f"static embedder: missing model file(s) {', '.join(missing)} in {self.model_dir}; "
                        "write them with scripts/build_static_model.py"
                    )
                from tokenizers import Tokenizer

                try:
                    tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                    table = np.load(self.model_dir / "embeddings.npy", allow_pickle=False)
                except Exception as exc:
                    raise EmbedderError(f"static embedder: cannot load the model in {self.model_dir}: {exc}") from exc
                if table.ndim != 2 or table.shape[1] != self.dim or table.shape[0] < tokenizer.get_vocab_size():
                    raise EmbedderError(
                        f"static embedder: {self.model_dir / 'embeddings.npy'} has shape {table.shape}; expected "
                        f"({tokenizer.get_vocab_size()} tokens or more, {self.dim}) from tokenizer.json and "
                        f"{CONFIG_FILE}"
                    )
                tokenizer.no_padding()
                tokenizer.no_truncation()
                self._unknown = tokenizer.token_to_id("[UNK]")
                self._tokenizer = tokenizer
                self._table = table.astype(np.float32, copy=False)
        return self._table, self._tokenizer
