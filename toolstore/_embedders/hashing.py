"""A deterministic hashing embedder: the test double. It is lexical, not semantic."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from .._errors import InvalidInputError
from .base import Embedder, check_width, normalise

_WORD = re.compile(r"[a-z0-9]+")


def check_dim(dim: int) -> int:
    """``dim`` when the hashing embedder takes it (at least 8, at most a pgvector column's width; the embedder factory
    checks a spec's ``hashing-DIM`` with this before building one); else InvalidInputError saying why."""
    if dim < 8:
        raise InvalidInputError(f"the hashing embedder's dimension must be at least 8, got {dim}")
    return check_width(dim, "the hashing embedder's dimension")


class HashingEmbedder(Embedder):
    """Feature hashing of lower-cased words and word bigrams into ``dim`` buckets.

    Same text, same vector, on every machine; no model, no network. Use it in tests,
    never to claim semantic retrieval.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = check_dim(dim)
        self.model = f"hashing-{dim}"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for feature in words + [a + " " + b for a, b in zip(words, words[1:])]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, bucket] += sign
        return normalise(out)
