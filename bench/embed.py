"""Benchmark the local embedder: shipped int8 model vs the fp32 export, in one run.

    PYTHONPATH=. python bench/embed.py [--docs 10000] [--queries 200] [--model-dir DIR ...] [--against DIR]

Prints, per model and thread count: load time, per-query latency (median and p95 over short requests, one text at
a time) and batch throughput (docs per wall-clock and per CPU second over short tool-like texts, ``embed_many``);
then ``embed_many``'s docs/s with the texts taken shortest first, 4 at a time (what ``LocalEmbedder`` does),
against batches of 64 in the given order (what it did before), on ``--bench-texts`` (a tools.jsonl) or the
synthetic docs; then the installed size of the runtime dependencies. The fp32 model is not shipped:
``scripts/build_local_model.py`` writes it to ``bench/out/minilm-fp32.onnx``; without it only the int8 model is
measured. ``--model-dir`` adds candidate models exported by ``scripts/build_candidate_model.py`` (``--embedder
local:DIR``) or ``scripts/build_static_model.py`` (``--embedder static:DIR``: one thread, no onnxruntime), each with
its size on disk. ``--against DIR`` only compares the shipped model with the one in ``DIR`` (an earlier release's
``model.onnx`` and ``tokenizer.json``, say), alternating them text by text and batch by batch (one thread).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from toolstore._embedders.base import Embedder
from toolstore._embedders.local import MODEL_DIR, LocalEmbedder
from toolstore._embedders.static import StaticEmbedder
from toolstore._formats.files import load_tools_file
from toolstore._text import dense_text

FP32_MODEL = Path(__file__).resolve().parent / "out" / "minilm-fp32.onnx"
RUNTIME_DEPS = ("onnxruntime", "tokenizers", "numpy")

VERBS = ["get", "list", "create", "update", "delete", "search", "send", "fetch", "cancel", "schedule", "export"]
NOUNS = ["invoice", "user", "calendar event", "email", "ticket", "deployment", "file", "order", "report", "flight"]
PLACES = ["in the CRM", "on GitHub", "in Slack", "in the warehouse", "for a customer", "in the current workspace"]
REQUESTS = [
    "what's the weather in {city} tomorrow",
    "email {name} that the meeting moved",
    "book a flight to {city} next week",
    "refund order {n}",
    "open a ticket about the login page",
    "scale the api to {n} pods",
    "translate hello into {lang}",
    "show me the invoices of {name}",
]
CITIES = ["Paris", "Tokyo", "Lagos", "Lima", "Oslo", "Denver"]
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka"]
LANGS = ["Spanish", "German", "Japanese", "Swahili"]


def short_requests(count: int, rng: random.Random) -> list[str]:
    """``count`` short user requests (5-10 words)."""
    return [
        rng.choice(REQUESTS).format(
            city=rng.choice(CITIES), name=rng.choice(NAMES), n=rng.randint(2, 9999), lang=rng.choice(LANGS)
        )
        for _ in range(count)
    ]


def tool_texts(count: int, rng: random.Random) -> list[str]:
    """``count`` short tool descriptions (name and one sentence, 10-20 words)."""
    texts = []
    for i in range(count):
        verb, noun, place = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(PLACES)
        name = f"{verb}_{noun.replace(' ', '_')}_{i}"
        texts.append(f"{name}: {verb.capitalize()} a {noun} {place}, with optional filters and a result limit.")
    return texts


def fp32_dir(tmp: Path) -> Path | None:
    """A model directory holding the fp32 export and the shipped tokenizer, or None if the export is absent."""
    if not FP32_MODEL.is_file():
        return None
    (tmp / "model.onnx").symlink_to(FP32_MODEL)
    (tmp / "tokenizer.json").symlink_to(MODEL_DIR / "tokenizer.json")
    return tmp


def measure(model_dir: Path, threads: int, queries: list[str], docs: list[str]) -> dict[str, float]:
    """Load time (s), query latency median/p95 (ms) and batch throughput for one model and thread count.

    Throughput is given per wall-clock second and per CPU second of this process (the latter is less sensitive
    to other processes competing for the cores; with one thread the two match on an idle machine).
    """
    embedder = model(model_dir, threads)
    start = time.perf_counter()
    embedder.embed("warm up")
    load = time.perf_counter() - start
    for text in queries[:10]:
        embedder.embed(text)
    latencies = []
    for text in queries:
        start = time.perf_counter()
        embedder.embed(text)
        latencies.append(time.perf_counter() - start)
    start, cpu_start = time.perf_counter(), time.process_time()
    embedder.embed_many(docs)
    throughput = len(docs) / (time.perf_counter() - start)
    cpu_throughput = len(docs) / (time.process_time() - cpu_start)
    ms = np.array(latencies) * 1000
    return {
        "load_s": load,
        "median_ms": float(np.median(ms)),
        "p95_ms": float(np.percentile(ms, 95)),
        "docs_s": throughput,
        "docs_cpu_s": cpu_throughput,
    }


def side_by_side(other_dir: Path, queries: list[str], docs: list[str], rounds: int = 3) -> None:
    """The shipped model against ``other_dir``'s, one thread, alternated on the same texts: per-query latency
    (each query embedded by both, in alternating order), then ``embed_many`` over ``docs`` in alternating rounds."""
    models = {"shipped": LocalEmbedder(threads=1), "other": LocalEmbedder(threads=1, model_dir=other_dir)}
    for embedder in models.values():
        for text in queries[:10]:
            embedder.embed(text)
    ms: dict[str, list[float]] = {name: [] for name in models}
    for i, text in enumerate(queries):
        for name in list(models)[:: 1 if i % 2 else -1]:
            start = time.perf_counter()
            models[name].embed(text)
            ms[name].append((time.perf_counter() - start) * 1000)
    rates: dict[str, list[float]] = {name: [] for name in models}
    for i in range(rounds):
        for name in list(models)[:: 1 if i % 2 else -1]:
            start = time.perf_counter()
            models[name].embed_many(docs)
            rates[name].append(len(docs) / (time.perf_counter() - start))
    ratio = float(np.median(np.array(ms["shipped"]) / np.array(ms["other"])))
    print(f"{len(queries)} queries one at a time, alternated; {len(docs)} docs with embed_many, {rounds} rounds each")
    for name, path in (("shipped", MODEL_DIR), ("other", other_dir)):
        print(
            f"{name:<8} {directory_size(path.resolve()) / 1e6:>5.0f} MB  query median {np.median(ms[name]):.2f} ms, "
            f"p95 {np.percentile(ms[name], 95):.2f} ms; {np.median(rates[name]):.0f} docs/s  ({path})"
        )
    print(f"shipped / other, per query (median): {ratio:.2f}")


def model(model_dir: Path, threads: int) -> Embedder:
    """The model in ``model_dir``: static (``embeddings.npy``) or onnxruntime with ``threads`` intra-op threads."""
    if (model_dir / "embeddings.npy").is_file():
        return StaticEmbedder(model_dir)
    return LocalEmbedder(threads=threads, model_dir=model_dir)


def given_order_throughput(threads: int, docs: list[str]) -> tuple[float, float]:
    """Docs/s of the base class's ``embed_many`` on the shipped model in batches of 64 in the given order, each
    padded to its longest text (what ``LocalEmbedder`` did before it took the texts shortest first, 4 at a time),
    and the lowest cosine of those vectors to ``LocalEmbedder.embed_many``'s."""
    embedder = LocalEmbedder(threads=threads, batch_size=64)
    embedder.embed("warm up")
    start = time.perf_counter()
    vectors = Embedder.embed_many(embedder, docs)
    rate = len(docs) / (time.perf_counter() - start)
    return rate, float((vectors * LocalEmbedder(threads=threads).embed_many(docs)).sum(axis=1).min())


def directory_size(path: Path) -> int:
    """Total bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def package_dirs(name: str) -> Iterator[Path]:
    """The installed directories of package ``name``: the package itself and its bundled ``<name>.libs``."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return
    for location in spec.submodule_search_locations:
        path = Path(location)
        yield path
        libs = path.parent / f"{name}.libs"
        if libs.is_dir():
            yield libs


def main() -> None:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200, help="short requests embedded one at a time")
    parser.add_argument("--docs", type=int, default=10_000, help="tool-like texts embedded in batches")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op thread counts to measure")
    parser.add_argument("--model-dir", type=Path, action="append", default=[], help="a candidate model directory")
    parser.add_argument("--bench-texts", type=Path, help="tools.jsonl: order measured on its dense texts")
    parser.add_argument("--against", type=Path, help="only compare the shipped model with this model directory")
    args = parser.parse_args()

    rng = random.Random(7)
    queries, docs = short_requests(args.queries, rng), tool_texts(args.docs, rng)
    if args.against:
        mixed = [dense_text(t) for t in load_tools_file(args.bench_texts)] if args.bench_texts else docs
        side_by_side(args.against, queries, random.Random(7).sample(mixed, min(args.docs, len(mixed))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        models = {"int8 (shipped)": MODEL_DIR, "fp32": fp32_dir(Path(tmp))}
        models.update({model(d, 1).model.partition("/")[2]: d for d in args.model_dir})
        if models["fp32"] is None:
            print(f"fp32 model absent ({FP32_MODEL}): run scripts/build_local_model.py to write it; int8 only.\n")
        print(f"{len(queries)} queries one at a time, {len(docs)} docs with embed_many\n")
        print(
            f"{'model':<18} {'MB':>6} {'threads':>7} {'load s':>7} {'median ms':>10} {'p95 ms':>8} "
            f"{'docs/s':>8} {'docs/cpu-s':>10}"
        )
        for label, model_dir in models.items():
            if model_dir is None:
                continue
            for threads in args.threads:
                r = measure(model_dir, threads, queries, docs)
                size = directory_size(model_dir.resolve()) if label != "fp32" else FP32_MODEL.stat().st_size
                print(
                    f"{label:<18} {size / 1e6:>6.0f} {threads:>7} {r['load_s']:>7.2f} {r['median_ms']:>10.2f} "
                    f"{r['p95_ms']:>8.2f} {r['docs_s']:>8.0f} {r['docs_cpu_s']:>10.0f}",
                    flush=True,
                )

    mixed = [dense_text(t) for t in load_tools_file(args.bench_texts)] if args.bench_texts else docs
    sample = random.Random(7).sample(mixed, min(2000, len(mixed)))
    print(f"\nshipped model, {len(sample)} texts (mean {np.mean([len(t) for t in sample]):.0f} chars): embed_many")
    for threads in args.threads:
        ours = measure(MODEL_DIR, threads, queries[:10], sample)["docs_s"]
        given, cosine = given_order_throughput(threads, sample)
        print(
            f"threads {threads}: shortest first, 4 at a time {ours:.0f} docs/s; 64 at a time in the given order "
            f"{given:.0f} docs/s ({ours / given:.2f}x; min cosine between the two {cosine:.4f})",
            flush=True,
        )

    print(f"\n{'installed size':<16} {'MB':>8}")
    total = 0
    for name in RUNTIME_DEPS:
        size = sum(directory_size(path) for path in package_dirs(name))
        total += size
        print(f"{name:<16} {size / 1e6:>8.1f}")
    model_size = directory_size(MODEL_DIR)
    print(f"{'model files':<16} {model_size / 1e6:>8.1f}")
    print(f"{'total':<16} {(total + model_size) / 1e6:>8.1f}")


if __name__ == "__main__":
    main()
