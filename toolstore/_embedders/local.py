"""The default embedder: all-MiniLM-L6-v2 run locally with onnxruntime (no torch, no network).

The model files ship in ``toolstore/_embedders/minilm/`` (int8 ONNX graph with mean pooling and normalisation
inside, ``tokenizer.json`` truncating at 256 tokens); ``scripts/build_local_model.py`` regenerates them, and
:data:`MODEL_BUILD` (which the embedding cache's key names) must then be set to the build it prints.
onnxruntime and tokenizers are imported, and the model loaded, on first use, so importing this module is cheap.

Any other model exported the same way (``scripts/build_candidate_model.py``) runs through the same class: its
directory holds ``model.onnx``, ``tokenizer.json`` and ``embedder.json`` (``{"model": "local/NAME", "dim": D,
"max_tokens": T}``, optionally ``"batch_size": B`` for a model whose vectors must not depend on their batch), and
``--embedder local:DIR`` selects it.
"""

from __future__ import annotations

import filecmp
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import EmbedderError, InvalidInputError
from .._input import read_json
from .._observe import logger
from .._progress import report
from .._textfile import read_text_file
from .base import Embedder, check_width, normalise

MODEL_DIR = Path(__file__).resolve().parent / "minilm"
MODEL_FILES = ("model.onnx", "tokenizer.json")
MAX_TOKENS = 256
#: The shipped model's build: the first 12 hex digits of the sha256 of its ``model.onnx`` then ``tokenizer.json``
#: (a test holds it to the files; rebuilding them changes it). Its cache key names it, so that vectors another build
#: cached (6e0b0fd quantized the MatMuls: cosine ~.9987 to the earlier build's) are never read in its stead.
MODEL_BUILD = "14884125f66f"
#: In a model directory other than the shipped one: the identifier a catalog records, the dimension, the truncation.
CONFIG_FILE = "embedder.json"

#: Texts per onnxruntime run. Taken shortest first, batches of 4 embedded the most texts per second on tool texts
#: (65/s; 70 one at a time, 45 in batches of 64) and on short requests (162/s; 135 and 123) with one thread.
DEFAULT_BATCH_SIZE = 4

# One intra-op thread by default: a short query takes a few ms either way, a second thread gains ~1.4x at best,
# and a router usually runs next to other work (web server, database) that the extra thread would compete with.
DEFAULT_THREADS = 1


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dims) on CPU through onnxruntime.

    ``threads`` sets onnxruntime's intra-op threads (default 1); ``batch_size`` how many texts one
    :meth:`embed_batch` call of :meth:`embed_many` gets (default: the model directory's, else
    :data:`DEFAULT_BATCH_SIZE`); ``model_dir`` a directory holding ``model.onnx`` and ``tokenizer.json`` instead of
    the shipped ones, and ``embedder.json`` when it is another model (its ``model`` name, ``dim``, ``max_tokens``
    and optionally ``batch_size``).
    """

    model = "local/all-MiniLM-L6-v2"
    dim = 384
    max_tokens = MAX_TOKENS

    def __init__(
        self, *, threads: int | None = None, batch_size: int | None = None, model_dir: Path | None = None
    ) -> None:
        if threads is not None and threads < 1:
            raise InvalidInputError(f"LocalEmbedder threads must be at least 1, got {threads}")
        if batch_size is not None and batch_size < 1:
            raise InvalidInputError(f"LocalEmbedder batch_size must be at least 1, got {batch_size}")
        self.threads = DEFAULT_THREADS if threads is None else threads
        self.model_dir = Path(model_dir) if model_dir is not None else MODEL_DIR
        own_batch = None
        self._configured = (self.model_dir / CONFIG_FILE).is_file()
        if self._configured:
            self.model, self.dim, self.max_tokens, own_batch = read_config(self.model_dir / CONFIG_FILE)
        elif self.model_dir != MODEL_DIR:
            _check_shipped(self.model_dir)
        self.batch_size = batch_size or own_batch or DEFAULT_BATCH_SIZE
        self._session: Any = None
        self._tokenizer: Any = None
        self._truncation: int | None = None  # the max_tokens the tokenizer was made with
        self._lock = threading.Lock()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """One batch: the local model has no slow failure to guard against."""
        return self.embed_batch(texts)

    def embed_many(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`Embedder.embed_many` (``batch_size`` texts a run, progress per batch), with the texts taken
        shortest first (by characters), so that each batch pads to about its own texts' length: with batches of 4,
        2.5x the texts per second of the earlier batches of 64 in the given order, on tool texts of mixed lengths
        (``bench/embed.py --bench-texts``).

        The model reads at most ``max_tokens`` tokens of a text: one warning per call (an import's, not a route's)
        says how many texts were cut, counted from the batches' own tokenization."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        cut = 0
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encodings = self._encode([texts[i] for i in chunk])
            cut += sum(1 for encoding in encodings if encoding.overflowing)
            out[chunk] = self._run(encodings)
            report(start + len(chunk), len(texts))
        if cut:
            logger.warning(
                "LocalEmbedder: %d of %d texts were over the limit of %s, %d tokens, and were embedded from their "
                "first %d tokens only",
                cut,
                len(texts),
                self.model,
                self.max_tokens,
                self.max_tokens,
            )
        return out

    @property
    def cache_key(self) -> str:
        """The model, ``#`` and what else decides its vectors. A model directory's model (``embedder.json``):
        ``MODEL#max_tokens=N``, the same model name with another limit cuts a long text elsewhere, or keeps whole a
        text that this limit cuts. The shipped model: ``MODEL#build=B`` (:data:`MODEL_BUILD`), and
        ``#max_tokens=N`` after it when given another ``max_tokens`` than its :data:`MAX_TOKENS`; a rebuild of its
        files moves every vector, so the vectors an earlier build cached (under the model alone, before the key named
        the build) are not read. A model directory naming its model as the shipped one is named so:
        ``MODEL#model_dir#max_tokens=N``, never the shipped model's key at that limit before the key named its build,
        whose vectors it would be handed (and which no embedder reads now: ``cache prune`` deletes them)."""
        if self._configured:
            own = "#model_dir" if self.model == LocalEmbedder.model else ""
            return f"{self.model}{own}#max_tokens={self.max_tokens}"
        key = shipped_key()
        return key if self.max_tokens == MAX_TOKENS else f"{key}#max_tokens={self.max_tokens}"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed one batch: ``(len(texts), dim)`` float32, rows L2-normalised, in the order of ``texts``.

        Texts are tokenized (truncated at ``max_tokens``), sorted by length and run in chunks of ``batch_size``
        padded to their longest text, so short texts do not pay for long ones.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(self._encode(texts))

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        """The tokenizer's encodings of ``texts``, truncated at ``max_tokens`` (``overflowing`` holds what was cut)."""
        return self._load()[1].encode_batch([str(text) for text in texts])

    def _run(self, encodings: Sequence[Any]) -> np.ndarray:
        """The vectors of ``encodings``, in their order: sorted by length and run in chunks of ``batch_size``."""
        session = self._load()[0]
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(encodings), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                length = len(encodings[i].ids)
                ids[row, :length] = encodings[i].ids
                mask[row, :length] = 1
            try:
                vectors = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            except Exception as exc:  # onnxruntime raises its own exception types
                raise EmbedderError(f"local embedder: onnxruntime failed: {exc}") from exc
            out[chunk] = vectors
        return normalise(out)

    def _load(self) -> tuple[Any, Any]:
        """The onnxruntime session and tokenizer, created on first call (thread-safe); the tokenizer made again when
        ``max_tokens`` changed since (it truncates at the limit the cache's key names)."""
        if self._session is not None and self._truncation == self.max_tokens:
            return self._session, self._tokenizer
        with self._lock:
            if self._session is None or self._truncation != self.max_tokens:
                limit = self.max_tokens
                self._tokenizer = self._load_tokenizer(limit)
                self._truncation = limit
                if self._session is None:
                    self._session = self._load_session()
        return self._session, self._tokenizer

    def _check_files(self) -> None:
        missing = [name for name in MODEL_FILES if not (self.model_dir / name).is_file()]
        if missing:
            raise EmbedderError(
                f"local embedder: missing model file(s) {', '.join(missing)} in {self.model_dir}; "
                "reinstall toolstore or regenerate them with scripts/build_local_model.py"
            )

    def _load_tokenizer(self, max_tokens: int) -> Any:
        self._check_files()
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        except Exception as exc:
            raise EmbedderError(f"local embedder: cannot read {self.model_dir / 'tokenizer.json'}: {exc}") from exc
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()  # embed_batch pads each length-sorted chunk itself
        return tokenizer

    def _load_session(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            return ort.InferenceSession(
                str(self.model_dir / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbedderError(f"local embedder: cannot load {self.model_dir / 'model.onnx'}: {exc}") from exc


def shipped_key() -> str:
    """The shipped model's cache key at its own ``max_tokens``: the model and its build."""
    return f"{LocalEmbedder.model}#build={MODEL_BUILD}"


def _check_shipped(directory: Path) -> None:
    """A model directory without ``embedder.json`` is the shipped model under its name and cache key, so its files must
    be the shipped ones, byte for byte: another model there would be handed the shipped model's cached vectors (and
    leave its own under that key). InvalidInputError naming the file that differs; a missing one is the first embed's
    error, as for the shipped directory."""
    for name in MODEL_FILES:
        path = directory / name
        if path.is_file() and not filecmp.cmp(path, MODEL_DIR / name, shallow=False):
            raise InvalidInputError(
                f"{directory} has no {CONFIG_FILE}, so it is taken for the shipped model {LocalEmbedder.model}, "
                f"but its {name} is not the shipped one: write {CONFIG_FILE} naming its model "
                '({"model": "local/NAME", "dim": D, "max_tokens": T}, as scripts/build_candidate_model.py does)'
            )


def read_config(path: Path, *, kind: str = "local") -> tuple[str, int, int, int | None]:
    """``(model, dim, max_tokens, batch_size or None)`` from a model directory's ``embedder.json``, whose model is
    named ``KIND/NAME``; InvalidInputError when malformed (read as every file is: ``FILE line N, column C: ...``)."""
    config = read_json(read_text_file(path, "model configuration"), str(path))
    model, dim, max_tokens = (
        config.get(key) if isinstance(config, dict) else None for key in ("model", "dim", "max_tokens")
    )
    if not (isinstance(model, str) and model.startswith(f"{kind}/") and len(model) > len(kind) + 1):
        raise InvalidInputError(f"{path}: 'model' must be a name like '{kind}/all-mpnet-base-v2', got {model!r}")
    if "#" in model:  # the cache key's separator: 'local/all-MiniLM-L6-v2#build=B' would read the shipped model's
        raise InvalidInputError(f"{path}: 'model' must not hold '#' (embedding cache keys use it), got {model!r}")
    width, tokens = _positive(path, "dim", dim), _positive(path, "max_tokens", max_tokens)
    # optional; config is a dict once 'model' was found in it
    batch_size = _positive(path, "batch_size", config["batch_size"]) if "batch_size" in config else None
    return model, check_width(width, f"{path}: 'dim'"), tokens, batch_size


def _positive(path: Path, key: str, value: object) -> int:
    """``value`` of ``key`` in the configuration at ``path``; InvalidInputError unless a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{path}: {key!r} must be a positive integer, got {value!r}")
    return value
