"""Embedders by name: the same strings a catalog records as its model."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from .._errors import InvalidInputError
from .base import Embedder
from .hashing import HashingEmbedder
from .local import CONFIG_FILE, MODEL_FILES, LocalEmbedder, shipped_key
from .openai import OpenAIEmbedder
from .static import MODEL_FILES as STATIC_FILES
from .static import StaticEmbedder

SPECS = "local | local:DIR | static:DIR | hashing[-DIM] | openai/MODEL[@DIMENSIONS] | none"


def make_embedder(spec: str, *, base_url: str | None = None, api_key: str | None = None) -> Embedder | None:
    """``local`` (shipped MiniLM), ``local:DIR`` (a model exported by ``scripts/build_candidate_model.py``),
    ``static:DIR`` (a static model written by ``scripts/build_static_model.py``), ``hashing-256`` (test double),
    ``openai/text-embedding-3-small@512``, ``none``."""
    if spec == "none":
        return None
    if spec in ("local", "local/all-MiniLM-L6-v2"):
        return LocalEmbedder()
    if spec.startswith("local:"):
        return LocalEmbedder(model_dir=_model_dir(spec, MODEL_FILES, "scripts/build_candidate_model.py"))
    if spec.startswith("static:"):
        return StaticEmbedder(_model_dir(spec, STATIC_FILES, "scripts/build_static_model.py"))
    if spec == "hashing" or spec.startswith("hashing-"):
        dim = spec.partition("-")[2] or "256"
        if not (dim.isascii() and dim.isdigit()):  # str.isdigit() takes '²', which int() refuses
            raise InvalidInputError(f"embedder {spec!r}: the hashing dimension must be a number")
        return HashingEmbedder(int(dim))
    if spec.startswith("openai/"):
        model, _, dims = spec[len("openai/") :].partition("@")
        if dims and not (dims.isascii() and dims.isdigit()):
            raise InvalidInputError(f"embedder {spec!r}: dimensions after '@' must be a number")
        return OpenAIEmbedder(model=model, dimensions=int(dims) if dims else None, base_url=base_url, api_key=api_key)
    raise InvalidInputError(f"unknown embedder {spec!r}; expected {SPECS}")


def _model_dir(spec: str, files: tuple[str, ...], script: str) -> Path:
    """The directory of a ``KIND:DIR`` spec, holding ``files`` and ``embedder.json``; InvalidInputError naming what
    it lacks and the script that writes them."""
    directory = Path(spec.partition(":")[2]).expanduser()
    missing = [name for name in (*files, CONFIG_FILE) if not (directory / name).is_file()]
    if missing:
        raise InvalidInputError(
            f"embedder {spec!r}: {directory} lacks {', '.join(missing)}; write a model there with {script}"
        )
    return directory


def key_in_use(key: str, models: Collection[str]) -> bool:
    """Whether an embedder of one of ``models`` (the catalogs' recorded models) may read the embedding cache under
    ``key``: its ``cache_key`` is the model, ``#`` and what else decides its vectors (a model directory's
    ``max_tokens``, an OpenAI model's server, the shipped local model's build), or the model alone, but never for a
    local or static model (``local/NAME``, ``static/NAME``): a model directory's plain entries an earlier release
    wrote (which directory, which weights, which limit wrote them is unknown), or the shipped model's before its key
    named its build, as are its entries of another build than this release's, and at another ``max_tokens`` before
    its key named its build (``MODEL#max_tokens=N``: a model directory naming its model so keys
    ``MODEL#model_dir#max_tokens=N``): no embedder reads them."""
    if key.startswith(f"{LocalEmbedder.model}#build="):
        return key.partition("#max_tokens=")[0] == shipped_key() and LocalEmbedder.model in models
    if key.startswith(f"{LocalEmbedder.model}#max_tokens="):
        return False
    if any(key.startswith(f"{model}#") for model in models):
        return True
    return key in models and not key.startswith(("local/", "static/"))
