"""The embedder interface: implement :meth:`Embedder.embed_batch`; batching and single texts derive from it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .._breaker import Breaker
from .._errors import InvalidInputError
from .._progress import report

#: The widest vector a pgvector column holds: every embedder's width is checked against it (:func:`check_width`).
MAX_DIM = 16_000


def check_width(dim: int, what: str) -> int:
    """``dim`` when a pgvector column can hold vectors that wide; else InvalidInputError naming ``what`` (the
    embedder's width, as its spec or file gives it), before anything is embedded or written."""
    if dim > MAX_DIM:
        raise InvalidInputError(f"{what} must be at most {MAX_DIM:,} (a pgvector column's), got {dim}")
    return dim


@dataclass(frozen=True)
class Embedded:
    """Vectors of texts, in order, and the indices of those cut in a way that is not the text's alone (``cut``: at
    route time OpenAI cuts every long text of a request another text of it made the model refuse), whose vectors
    route()'s in-process cache does not keep under the text."""

    vectors: np.ndarray
    cut: frozenset[int] = frozenset()


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    Subclasses set ``model`` (the identifier a catalog records, e.g. ``"local/all-MiniLM-L6-v2"``)
    and ``dim``, and implement :meth:`embed_batch`.
    """

    model: str
    dim: int
    batch_size: int = 64
    #: The circuit breaker in front of the embedder's server, shared by route()'s query vectors and its own requests
    #: (``OpenAIEmbedder``'s); None: route() keeps one per store.
    breaker: Breaker | None = None

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: returns an array of shape ``(len(texts), dim)``, dtype float32, rows L2-normalised."""

    @property
    def known_dim(self) -> int | None:
        """``dim`` when known without asking the model; None while an embedder that learns it from its first answer
        (``OpenAIEmbedder`` of a model it does not know) has not had one."""
        return self.dim

    @property
    def cache_key(self) -> str:
        """The name the embedding cache keeps this embedder's vectors under: its ``model``, or the model, ``#`` and
        whatever else decides a vector that the model name does not (a model directory's token limit, the shipped
        model's build: ``LocalEmbedder``; a server other than OpenAI's: ``OpenAIEmbedder``)."""
        return self.model

    def embed(self, text: str) -> np.ndarray:
        """Embed one text."""
        return self.embed_batch([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a request at route time. Like :meth:`embed`, but an embedder that can fail slowly (a remote API)
        fails fast instead: route() then answers lexically at once rather than wait for retries."""
        return self.embed(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed several texts at route time (a request's clauses), failing fast like :meth:`embed_query`; one call
        to the model where the embedder can batch (local, OpenAI), else :meth:`embed_query` per text."""
        return np.stack([self.embed_query(t) for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)

    def embed_queries_with_cuts(self, texts: Sequence[str]) -> Embedded:
        """:meth:`embed_queries`, saying which texts were cut in a way that is not the text's alone (none by default:
        an embedder that cuts a text at a fixed limit cuts it the same way every time)."""
        return Embedded(self.embed_queries(texts))

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """Embed any number of texts, ``batch_size`` at a time (progress reported per batch, see ``_progress``)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for chunk in batches(texts, self.batch_size):
            parts.append(self.embed_batch(chunk))
            report(sum(len(p) for p in parts), len(texts))
        return np.concatenate(parts)


def batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
