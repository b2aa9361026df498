"""The shipped local embedder against vectors computed with sentence-transformers (tests/data/minilm_reference.npz)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from toolstore import EmbedderError, InvalidInputError, LocalEmbedder, StaticEmbedder, Tool, ToolStore
from toolstore._embedders.base import Embedder
from toolstore._embedders.factory import make_embedder
from toolstore._embedders.local import DEFAULT_BATCH_SIZE

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"
MIN_COSINE = 0.99


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(REFERENCE, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def texts(reference: dict[str, np.ndarray], key: str) -> list[str]:
    return [str(text) for text in reference[key]]


def test_matches_reference_vectors(embedder: LocalEmbedder, reference: dict[str, np.ndarray]) -> None:
    vectors = embedder.embed_many(texts(reference, "texts"))
    cosines = (vectors * reference["vectors"]).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= MIN_COSINE, f"cosine {cosines[worst]:.4f} for {texts(reference, 'texts')[worst]!r}"


def test_same_top1_neighbour_as_reference(embedder: LocalEmbedder, reference: dict[str, np.ndarray]) -> None:
    queries = embedder.embed_many(texts(reference, "queries"))
    documents = embedder.embed_many(texts(reference, "documents"))
    expected = (reference["query_vectors"] @ reference["document_vectors"].T).argmax(axis=1)
    assert (queries @ documents.T).argmax(axis=1).tolist() == expected.tolist()
    assert expected.tolist() == list(range(len(expected)))  # the reference itself finds each intended document


def test_output_shape_dtype_and_norm(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_batch(["send an email", "weather in Oslo", ""])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed("x").shape == (384,)
    assert embedder.embed_many([]).shape == (0, 384)


def test_empty_and_blank_texts(embedder: LocalEmbedder) -> None:
    for text in ("", " ", "\n"):
        vector = embedder.embed(text)
        assert np.isfinite(vector).all()
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_batch_matches_single(embedder: LocalEmbedder, reference: dict[str, np.ndarray]) -> None:
    sample = texts(reference, "texts")[:20]
    batched = embedder.embed_batch(sample)
    single = np.stack([embedder.embed(text) for text in sample])
    # int8 activations are quantized per batch, so batch and single differ slightly; both match the reference.
    assert (batched * single).sum(axis=1).min() >= 0.995


def test_order_preserved_with_mixed_lengths(reference: dict[str, np.ndarray]) -> None:
    embedder = LocalEmbedder(batch_size=4)  # several length-sorted chunks inside one call
    sample = texts(reference, "texts")
    mixed = sample[::-1] + sample[:5]
    vectors = embedder.embed_batch(mixed)
    expected = {text: vec for text, vec in zip(sample, reference["vectors"])}
    cosines = [float(vec @ expected[text]) for text, vec in zip(mixed, vectors)]
    assert min(cosines) >= MIN_COSINE


def test_long_text_is_truncated_like_reference(embedder: LocalEmbedder, reference: dict[str, np.ndarray]) -> None:
    all_texts = texts(reference, "texts")
    longest = max(range(len(all_texts)), key=lambda i: len(all_texts[i]))
    long_text = all_texts[longest]
    assert len(long_text.split()) > 256
    vector = embedder.embed(long_text)
    assert float(vector @ reference["vectors"][longest]) >= MIN_COSINE
    # Only the first 256 tokens count: appending more text changes nothing.
    assert float(vector @ embedder.embed(long_text + " completely different words")) > 0.9999


def test_missing_model_files_raise(tmp_path: Path) -> None:
    embedder = LocalEmbedder(model_dir=tmp_path)  # constructing is lazy and fine
    with pytest.raises(EmbedderError, match="model.onnx"):
        embedder.embed("hello")


def test_identity() -> None:
    embedder = LocalEmbedder(threads=2, batch_size=8)
    assert embedder.model == "local/all-MiniLM-L6-v2"
    assert embedder.dim == 384
    assert embedder.batch_size == 8
    with pytest.raises(InvalidInputError, match="LocalEmbedder threads must be at least 1, got 0"):
        LocalEmbedder(threads=0)
    with pytest.raises(InvalidInputError, match="LocalEmbedder batch_size must be at least 1, got 0"):
        LocalEmbedder(batch_size=0)


def exported_copy(tmp_path: Path, config: object) -> Path:
    """A model directory as scripts/build_candidate_model.py writes it, here the shipped model under another name."""
    from toolstore._embedders.local import MODEL_DIR, MODEL_FILES

    for name in MODEL_FILES:
        (tmp_path / name).symlink_to(MODEL_DIR / name)
    (tmp_path / "embedder.json").write_text(json.dumps(config))
    return tmp_path


def test_a_model_directorys_name_cannot_make_its_cache_key_another_embedders(tmp_path: Path) -> None:
    """'#' separates an embedding cache key's parts: a model directory named 'local/all-MiniLM-L6-v2#build=B' at 128
    tokens had the key of the shipped model given max_tokens=128 (each handed the other's cached vectors), and a
    cache prune deleted its entries while catalogs recorded it but none the shipped model. Such a name is refused."""
    from toolstore._embedders.local import shipped_key

    config = {"model": shipped_key(), "dim": 384, "max_tokens": 128}
    with pytest.raises(InvalidInputError, match=r"embedder\.json: 'model' must not hold '#'"):
        LocalEmbedder(model_dir=exported_copy(tmp_path, config))


def test_a_model_directory_without_embedder_json_must_hold_the_shipped_model(tmp_path: Path) -> None:
    """A model directory without embedder.json is taken for the shipped model and reads and writes the embedding cache
    under its key: another model there (one of 384 dimensions too, as bge-small) was handed the shipped model's cached
    vectors. Its files must be the shipped ones, byte for byte (a copy or a link); else it is refused, naming the file
    and embedder.json. Missing files are still the first embed's error (test_missing_model_files_raise)."""
    from toolstore._embedders.local import MODEL_DIR, MODEL_FILES, shipped_key

    same = tmp_path / "same"
    same.mkdir()
    for name in MODEL_FILES:
        (same / name).write_bytes((MODEL_DIR / name).read_bytes())
    assert LocalEmbedder(model_dir=same).cache_key == LocalEmbedder().cache_key == shipped_key()
    for name in MODEL_FILES:
        other = tmp_path / name.replace(".", "-")
        other.mkdir()
        for each in MODEL_FILES:
            (other / each).symlink_to(MODEL_DIR / each)
        (other / name).unlink()
        data = bytearray((MODEL_DIR / name).read_bytes())
        data[-2] ^= 1  # another model's file of the same size
        (other / name).write_bytes(bytes(data))
        with pytest.raises(InvalidInputError, match=rf"{other}.*no embedder\.json.*its {name} is not the shipped"):
            LocalEmbedder(model_dir=other)


def test_local_dir_spec_runs_an_exported_model_under_its_own_name(
    tmp_path: Path, reference: dict[str, np.ndarray]
) -> None:
    directory = exported_copy(tmp_path, {"model": "local/minilm-copy", "dim": 384, "max_tokens": 8})
    copy = make_embedder(f"local:{directory}")
    assert isinstance(copy, LocalEmbedder)
    assert (copy.model, copy.dim, copy.max_tokens) == ("local/minilm-copy", 384, 8)
    sample = texts(reference, "texts")[:3]
    short = copy.embed_many(sample)
    # max_tokens applies: 8 tokens are not the shipped model's 256, so long texts embed differently ...
    assert float(short[2] @ reference["vectors"][2]) < 0.99
    # ... and the first 8 tokens are all that count.
    assert float(copy.embed(sample[2]) @ copy.embed(sample[2] + " and then much more text")) > 0.9999


def test_a_model_directory_can_set_its_batch_size(tmp_path: Path) -> None:
    """A model whose vectors must not depend on the texts batched with it records ``batch_size`` 1; an explicit
    ``batch_size`` still wins, and without either the default applies."""
    config = {"model": "local/minilm-copy", "dim": 384, "max_tokens": 256, "batch_size": 1}
    directory = exported_copy(tmp_path, config)
    assert LocalEmbedder(model_dir=directory).batch_size == 1
    assert LocalEmbedder(model_dir=directory, batch_size=16).batch_size == 16
    assert LocalEmbedder().batch_size == DEFAULT_BATCH_SIZE
    single, batched = LocalEmbedder(model_dir=directory), LocalEmbedder(batch_size=64)
    texts_ = ["a", "send the weekly invoice summary to the finance team and copy the accountant", "?"]
    for text, vector in zip(texts_, single.embed_many(texts_)):
        np.testing.assert_allclose(vector, single.embed(text), atol=1e-6)  # as if embedded alone
    assert batched.embed_many(texts_).shape == (3, 384)


def test_local_dir_spec_names_what_is_missing_or_malformed(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"lacks model\.onnx, tokenizer\.json, embedder\.json"):
        make_embedder(f"local:{tmp_path}")
    for config, problem in (
        ({"model": "all-mpnet", "dim": 768, "max_tokens": 384}, "'model' must be"),
        ({"model": "local/x", "dim": "768", "max_tokens": 384}, "'dim' must be a positive integer"),
        ({"model": "local/x", "dim": 768}, "'max_tokens' must be a positive integer"),
        ({"model": "local/x", "dim": 20_000, "max_tokens": 9}, r"'dim' must be at most 16,000 \(a pgvector column's\)"),
        ({"model": "local/x", "dim": 768, "max_tokens": 9, "batch_size": 0}, "'batch_size' must be a positive integer"),
        ({"model": "local/x", "dim": 768, "max_tokens": 9, "batch_size": "4"}, "'batch_size' must be a positive"),
        ([], "'model' must be"),
    ):
        directory = tmp_path / str(abs(hash(str(config))))
        directory.mkdir()
        with pytest.raises(InvalidInputError, match=problem):
            make_embedder(f"local:{exported_copy(directory, config)}")
    (directory / "embedder.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"embedder\.json line 1, column 2: invalid JSON: Expecting property"):
        LocalEmbedder(model_dir=directory)


def test_an_embedder_json_that_is_no_json_is_said_as_every_file_is(tmp_path: Path) -> None:
    """embedder.json is read as every file is (_textfile.read_text_file, read_json): nesting too deep was a
    RecursionError out of json.loads, NaN was taken, and invalid UTF-8 was no JSON error naming its line and column."""
    config = tmp_path / "embedder.json"
    for content, problem in (
        (b"[" * 100_000, r"embedder\.json: invalid JSON: nested deeper than 100 levels"),
        (b'{"model": "local/x", "dim": 384, "max_tokens": 9, "batch_size": NaN}', r"json: invalid JSON: NaN"),
        (b'{"model": "local/\xff"}', r"embedder\.json line 1, column 18: not valid UTF-8"),
    ):
        config.write_bytes(content)
        with pytest.raises(InvalidInputError, match=problem):
            LocalEmbedder(model_dir=tmp_path)
        with pytest.raises(InvalidInputError, match=problem):
            StaticEmbedder(tmp_path)


def test_texts_over_the_token_limit_are_counted_in_one_warning(
    embedder: LocalEmbedder, caplog: pytest.LogCaptureFixture, dsn: str
) -> None:
    """The model reads 256 tokens of a text: embedding many texts (an import) warns once how many were cut, naming
    the limit; route time (embed_queries) does not warn."""
    long = "search the customer records by name and email " * 40  # 320 words: over 256 tokens
    within = "word " * 254  # 254 tokens and the two special ones: exactly the limit, not cut
    with caplog.at_level("WARNING", logger="toolstore"):
        embedder.embed_many([long, "short", long + "!", within])
        embedder.embed_queries([long, long + "?"])
    assert [r.getMessage() for r in caplog.records] == [
        "LocalEmbedder: 2 of 4 texts were over the limit of local/all-MiniLM-L6-v2, 256 tokens, and were embedded "
        "from their first 256 tokens only"
    ]
    caplog.clear()
    tools = [Tool(id=f"t{i}", name=f"t{i}", description=f"{i} {long}") for i in range(3)] + [Tool(id="s", name="s")]
    with ToolStore(dsn, embedder=embedder, catalog="cut") as store, caplog.at_level("WARNING", logger="toolstore"):
        store.upsert(tools)
        store.route(long, k=2)
    assert [r.getMessage()[:34] for r in caplog.records] == ["LocalEmbedder: 3 of 4 texts were o"]


class CountingTokenizer:
    """A tokenizer that counts the texts it encodes."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.encoded = tokenizer, 0

    def encode_batch(self, texts: list[str]) -> Any:
        self.encoded += len(texts)
        return self.tokenizer.encode_batch(texts)


def test_embedding_many_texts_tokenizes_each_once(caplog: pytest.LogCaptureFixture) -> None:
    """The warning's count of texts over the limit comes from the tokenization the embedding needs, not from a
    second pass over every text (1.26 s of a 10k-tool import); the vectors are those of the texts' batches embedded
    shortest first, as before (a run's activation scale depends on its batch)."""
    long = "search the customer records by name and email " * 40
    texts = [long, "short", long + "!", "word " * 254, "send an email", long + "?", "a"]
    embedder = LocalEmbedder()
    embedder._load()
    tokenizer = embedder._tokenizer = CountingTokenizer(embedder._tokenizer)
    with caplog.at_level("WARNING", logger="toolstore"):
        vectors = embedder.embed_many(texts)
    assert tokenizer.encoded == len(texts)
    assert [r.getMessage()[:34] for r in caplog.records] == ["LocalEmbedder: 3 of 7 texts were o"]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batched = Embedder.embed_many(embedder, [texts[i] for i in order])  # embed_batch on each batch
    np.testing.assert_array_equal(vectors[order], batched)
