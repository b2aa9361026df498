"""Embedders by name: the same strings a catalog records as its model."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from .._errors import InvalidInputError
from .base import Embedder
from .hashing import HashingEmbedder, check_dim
from .local import CONFIG_FILE, MODEL_FILES, LocalEmbedder, shipped_key
from .openai import OpenAIEmbedder
from .openai_limits import check_model
from .static import MODEL_FILES as STATIC_FILES
from .static import StaticEmbedder

#: The specs of an embedding model (what ``reembed --model`` takes), and of every embedder (``--embedder``).
MODEL_SPECS = "local | local:DIR | static:DIR | hashing[-DIM] | openai/MODEL[@DIMENSIONS]"
SPECS = f"{MODEL_SPECS} | none"


@dataclass(frozen=True)
class Spec:
    """An embedder spec's parts (:func:`parse_spec`): its ``kind`` (``none``, ``local``, ``static``, ``hashing``,
    ``openai``), a model directory as given (``local:DIR``, ``static:DIR``; empty for the shipped model), an OpenAI
    ``model``, and a hashing or OpenAI ``dim``."""

    kind: str
    directory: str = ""
    model: str = ""
    dim: int | None = None


def parse_spec(spec: str, expected: str = SPECS) -> Spec:
    """The parts of ``spec``, checked for all that the string alone shows, before any model is looked for or built:
    a known kind, a directory after ``local:`` and ``static:``, a dimension the hashing embedder or OpenAI's takes,
    a model after ``openai/``; InvalidInputError naming the spec (or its part) otherwise, an unknown one with the
    specs ``expected``. Whether a model directory holds a model is for :func:`make_embedder` to find."""
    if spec == "none" or spec in ("local", "local/all-MiniLM-L6-v2"):
        return Spec(spec.partition("/")[0])
    kind, colon, directory = spec.partition(":")
    if colon and kind in ("local", "static"):
        if not directory.strip():
            raise InvalidInputError(f"embedder {spec!r}: no model directory after '{kind}:'")
        return Spec(kind, directory=directory)
    if spec == "hashing" or spec.startswith("hashing-"):
        dim = spec.partition("-")[2] if spec != "hashing" else "256"
        if not (dim.isascii() and dim.isdigit()):  # str.isdigit() takes '²', which int() refuses
            raise InvalidInputError(f"embedder {spec!r}: the hashing dimension must be a number")
        return Spec("hashing", dim=check_dim(int(dim)))
    if spec.startswith("openai/"):
        model, at, dims = spec[len("openai/") :].partition("@")
        if at and not (dims.isascii() and dims.isdigit()):
            raise InvalidInputError(f"embedder {spec!r}: dimensions after '@' must be a number")
        dimensions = int(dims) if at else None
        check_model(model, dimensions)
        return Spec("openai", model=model, dim=dimensions)
    raise InvalidInputError(f"unknown embedder {spec!r}; expected {expected}")


def check_spec(spec: str, expected: str = SPECS) -> str:
    """``spec`` when :func:`parse_spec` takes it (a command line's ``--embedder``, checked as it is read)."""
    parse_spec(spec, expected)
    return spec


def make_embedder(spec: str, *, base_url: str | None = None, api_key: str | None = None) -> Embedder | None:
    """``local`` (shipped MiniLM), ``local:DIR`` (a model exported by ``scripts/build_candidate_model.py``),
    ``static:DIR`` (a static model written by ``scripts/build_static_model.py``), ``hashing-256`` (test double),
    ``openai/text-embedding-3-small@512``, ``none``: :func:`parse_spec`'s refusal, or a model directory's that lacks
    its model, as InvalidInputError."""
    parsed = parse_spec(spec)
    if parsed.kind == "none":
        return None
    if parsed.kind == "local" and not parsed.directory:
        return LocalEmbedder()
    if parsed.kind == "local":
        return LocalEmbedder(
            model_dir=_model_dir(spec, parsed.directory, MODEL_FILES, "scripts/build_candidate_model.py")
        )
    if parsed.kind == "static":
        return StaticEmbedder(_model_dir(spec, parsed.directory, STATIC_FILES, "scripts/build_static_model.py"))
    if parsed.kind == "hashing":
        return HashingEmbedder(parsed.dim or 256)
    return OpenAIEmbedder(model=parsed.model, dimensions=parsed.dim, base_url=base_url, api_key=api_key)


def _model_dir(spec: str, given: str, files: tuple[str, ...], script: str) -> Path:
    """The directory ``given`` by a ``KIND:DIR`` spec, holding ``files`` and ``embedder.json``; InvalidInputError
    naming what it lacks and the script that writes them."""
    directory = Path(given).expanduser()
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
