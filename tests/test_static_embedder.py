"""Static embedders (``static:DIR``) on a small model written here: a WordPiece tokenizer and a random table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from toolstore import EmbedderError, HashingEmbedder, InvalidInputError, ModelMismatchError, StaticEmbedder, ToolStore
from toolstore._embedders.factory import make_embedder

from catalog_gen import generated_tools

VOCAB = ["[UNK]", "[CLS]", "[SEP]", "send", "email", "weather", "paris", "report", "##s", "the"]
DIM = 8


def write_model(directory: Path, *, rows: int = len(VOCAB), dim: int = DIM, model: str = "static/tiny") -> np.ndarray:
    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    table = np.random.default_rng(7).normal(size=(rows, dim)).astype(np.float32)
    np.save(directory / "embeddings.npy", table)
    (directory / "embedder.json").write_text(json.dumps({"model": model, "dim": dim, "max_tokens": 3}))
    return table


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def test_a_text_is_the_normalised_mean_of_its_known_tokens(tmp_path: Path) -> None:
    table = write_model(tmp_path)
    embedder = make_embedder(f"static:{tmp_path}")
    assert isinstance(embedder, StaticEmbedder) and embedder.model == "static/tiny" and embedder.dim == DIM
    send, email, report, plural = (VOCAB.index(w) for w in ("send", "email", "report", "##s"))
    vectors = embedder.embed_batch(["Send EMAIL", "send xyzzy email", "reports", "xyzzy", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (5, DIM)
    np.testing.assert_allclose(vectors[0], unit(table[[send, email]].mean(axis=0)), rtol=1e-6)
    np.testing.assert_allclose(vectors[1], vectors[0], rtol=1e-6)  # the unknown word is left out
    np.testing.assert_allclose(vectors[2], unit(table[[report, plural]].mean(axis=0)), rtol=1e-6)
    assert not vectors[3].any() and not vectors[4].any()  # nothing known: the zero vector
    # at most max_tokens (3) tokens: the fourth word does not count
    np.testing.assert_allclose(
        embedder.embed("send email paris weather"),
        unit(table[[send, email, VOCAB.index("paris")]].mean(axis=0)),
        rtol=1e-6,
    )
    np.testing.assert_array_equal(embedder.embed_many(["send email"] * 600)[599], vectors[0])


def test_bad_model_directories_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="lacks embeddings.npy"):
        make_embedder(f"static:{tmp_path}")
    write_model(tmp_path / "wrong", model="local/tiny")
    with pytest.raises(InvalidInputError, match="'static/"):
        make_embedder(f"static:{tmp_path / 'wrong'}")
    write_model(tmp_path / "short", rows=4)
    with pytest.raises(EmbedderError, match=r"has shape \(4, 8\)"):
        StaticEmbedder(tmp_path / "short").embed("send")


def test_a_catalog_routes_with_a_static_model(dsn: str, tmp_path: Path) -> None:
    write_model(tmp_path)
    tools = generated_tools(30)
    with ToolStore(dsn, embedder=StaticEmbedder(tmp_path), catalog="static") as store:
        store.upsert(tools)
        info = store.info()
        assert info.embed_model == "static/tiny" and info.embed_dim == DIM
        assert store.route("send the weekly report by email", k=5).tools
    with pytest.raises(ModelMismatchError, match="static/tiny"):  # another model cannot route on this catalog's vectors
        with ToolStore(dsn, embedder=HashingEmbedder(DIM), catalog="static") as store:
            store.route("send the report")
