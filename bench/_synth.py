"""Synthetic tool catalogs grown from the public benchmark data in /work/shared/bench.

Seal-Tools' 4k camelCase tools give the structure (verb + object words, description, parameter schema,
category); MetaTool's plugin names and Gorilla's hubs give providers; descriptions of all three sets give
extra sentences; train.jsonl requests become intent examples and queries.jsonl requests become benchmark
queries, each rewritten for the generated tool by substituting its verb and object words.

Generation is sequential with one seeded RNG per tool index, so the first n tools of a larger catalog
are exactly the catalog of size n (vectors embedded once serve every size).
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from toolstore import IntentExample, Tool

GENERATOR_VERSION = 1
DATA = Path("/work/shared/bench")
EXAMPLES_PER_TOOL = 3

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
_TEMPLATES = (
    "I need to {v} the {o}.",
    "Can you {v} {o} for me?",
    "{v} {o} please",
    "help me {v} a {o}",
    "How do I {v} my {o}?",
    "Is there a way to {v} the {o} automatically?",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_FRAME = re.compile(r"^(then|finally|additionally|also|after that|lastly|next)[, ]+", re.IGNORECASE)


@dataclass
class Seed:
    """One Seal-Tools tool split into the parts the generator recombines."""

    verb: str
    objects: list[str]
    description: str
    parameters: dict[str, Any] | None
    categories: tuple[str, ...]
    train: list[str] = field(default_factory=list)  # request sentences about this tool (train.jsonl)
    test: list[str] = field(default_factory=list)  # request sentences about this tool (queries.jsonl)
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Query:
    text: str
    target: str | None  # the generated tool the request was written for (None: free text)


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _words(name: str) -> list[str]:
    return [w.lower() for w in _CAMEL.sub(" ", re.sub(r"[_\-.]+", " ", name)).split()]


def _sentences(text: str) -> list[str]:
    return [_FRAME.sub("", s).strip() for s in _SENTENCE.split(text) if len(s.split()) >= 4]


def _best_sentence(query: str, seed: Seed) -> str:
    """The sentence of a (multi-tool) request that talks about ``seed``."""
    parts = _sentences(query) or [query]
    keys = {w[:5] for w in seed.objects}
    return max(parts, key=lambda s: sum(w.lower()[:5] in keys for w in _WORD.findall(s)))


@dataclass
class Vocabulary:
    seeds: list[Seed]
    by_verb: dict[str, list[int]]
    providers: list[str]
    extra_sentences: list[str]
    free_queries: list[str]  # MetaTool and Gorilla requests, used verbatim
    order: list[int]  # the seeds in a fixed shuffled order: small catalogs mix every domain


@cache
def vocabulary() -> Vocabulary:
    seal = _read(DATA / "seal_tools" / "tools.jsonl")
    seeds: list[Seed] = []
    index: dict[str, int] = {}
    for t in seal:
        words = _words(t["name"])
        if len(words) < 2 or not t["description"]:
            continue
        cats = tuple(c.strip() for c in (t["category"] or "").split("/") if c.strip())
        index[t["id"]] = len(seeds)
        seeds.append(Seed(words[0], words[1:], t["description"].strip(), t["parameters"], cats))
    for split, attr in (("train", "train"), ("queries", "test")):
        for q in _read(DATA / "seal_tools" / f"{split}.jsonl"):
            for tool_id in q["relevant"]:
                if tool_id in index:
                    seed = seeds[index[tool_id]]
                    getattr(seed, attr).append(_best_sentence(q["query"], seed))
    by_verb: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(seeds):
        by_verb[s.verb].append(i)
    meta = _read(DATA / "metatool" / "tools.jsonl")
    torch = _read(DATA / "gorilla_torch" / "tools.jsonl")
    providers = sorted({t["id"].lower() for t in meta if re.fullmatch(r"[a-z0-9_]{3,30}", t["id"].lower())})
    providers += sorted({t["provider"].lower() for t in torch if t["provider"]})
    providers += sorted({c.lower().replace(" ", "_") for s in seeds for c in s.categories[:1]})[:300]
    extra = [s for t in meta + torch for s in _sentences(t["description"]) if 5 <= len(s.split()) <= 30]
    free = [q["query"] for d in ("metatool", "gorilla_torch") for q in _read(DATA / d / "queries.jsonl")]
    order = list(range(len(seeds)))
    random.Random(GENERATOR_VERSION).shuffle(order)
    return Vocabulary(seeds, dict(by_verb), providers, extra, free, order)


def _pattern(seed: Seed) -> re.Pattern[str]:
    """Matches the seed's object words (by prefix, so plurals match too) and its verb."""
    if seed.pattern is None:
        keys = "|".join(f"({re.escape(w[: max(4, len(w) - 2)])})" for w in seed.objects)
        seed.pattern = re.compile(rf"\b(?:{keys})[\w'-]{{0,4}}\b|\b({re.escape(seed.verb)})\b", re.IGNORECASE)
    return seed.pattern


def _substitute(text: str, seed: Seed, verb: str, objects: list[str]) -> str:
    """``text`` (about ``seed``) rewritten for a tool doing ``verb`` to ``objects``."""
    extra = " ".join(objects[len(seed.objects) :])
    placed = False

    def replace(m: re.Match[str]) -> str:
        nonlocal placed
        k = (m.lastindex or 1) - 1
        if k == len(seed.objects):
            return verb
        word = objects[k] if k < len(objects) else ""
        if not placed and extra:  # the first mention carries any extra object words of the new tool
            placed = True
            return f"{extra} {word}".strip()
        return word

    return re.sub(r"  +", " ", _pattern(seed).sub(replace, text))


def _camel(words: list[str]) -> str:
    return words[0] + "".join(w.capitalize() for w in words[1:])


def _tool(i: int, vocab: Vocabulary, taken: set[str]) -> tuple[Tool, Seed, list[str]]:
    rng = random.Random(f"tool-{GENERATOR_VERSION}-{i}")
    seed = vocab.seeds[vocab.order[i]] if i < len(vocab.seeds) else rng.choice(vocab.seeds)
    verb = seed.verb if rng.random() < 0.6 else rng.choice(list(vocab.by_verb))
    objects = list(seed.objects)
    if i >= len(vocab.seeds) or rng.random() < 0.3:  # grow the vocabulary: a modifier from another tool
        objects = [rng.choice(rng.choice(vocab.seeds).objects), *objects]
    provider = rng.choice(vocab.providers)
    words = [verb, *objects]
    style = rng.random()
    name = _camel(words) if style < 0.6 else "_".join(words) if style < 0.9 else ".".join(words)
    tool_id = f"{provider}.{name}"
    suffix = 2
    while tool_id.lower() in taken:
        tool_id = f"{provider}.{name}_v{suffix}"
        suffix += 1
    taken.add(tool_id.lower())
    description = _substitute(seed.description, seed, verb, objects)
    if rng.random() < 0.4:
        description += " " + rng.choice(vocab.extra_sentences)
    params_seed = seed if rng.random() < 0.5 else vocab.seeds[rng.choice(vocab.by_verb.get(verb, [0]))]
    phrases = _phrases(rng, vocab, seed, verb, objects, 2 + EXAMPLES_PER_TOOL)
    tool = Tool(
        id=tool_id,
        name=name,
        description=description,
        provider=provider,
        parameters=params_seed.parameters,
        categories=seed.categories,
        keywords=tuple(rng.sample(objects, min(2, len(objects)))),
        expansion="; ".join(phrases[EXAMPLES_PER_TOOL:]) if rng.random() < 0.4 else "",
    )
    return tool, seed, phrases[:EXAMPLES_PER_TOOL]


def _phrases(rng: random.Random, vocab: Vocabulary, seed: Seed, verb: str, objects: list[str], n: int) -> list[str]:
    """``n`` distinct user requests for the tool, from train requests of its seed (or a same-verb tool)."""
    pool = [(seed, s) for s in seed.train]
    for _ in range(n):
        other = vocab.seeds[rng.choice(vocab.by_verb.get(seed.verb) or [0])]
        pool += [(other, s) for s in other.train[:2]]
    rng.shuffle(pool)
    pool += [(seed, t.format(v=seed.verb, o=" ".join(seed.objects))) for t in rng.sample(_TEMPLATES, len(_TEMPLATES))]
    out: list[str] = []
    for src, text in pool:
        phrase = _substitute(text, src, verb, objects)
        if phrase not in out:
            out.append(phrase)
        if len(out) == n:
            break
    while len(out) < n:
        out.append(f"please {verb} {' '.join(objects)} number {len(out)}")
    return out


@dataclass
class Catalog:
    tools: list[Tool]
    examples: list[IntentExample]
    seeds: list[Seed]


def catalog(n: int) -> Catalog:
    """The first ``n`` generated tools with their intent examples."""
    vocab = vocabulary()
    taken: set[str] = set()
    tools: list[Tool] = []
    examples: list[IntentExample] = []
    seeds: list[Seed] = []
    for i in range(n):
        tool, seed, phrases = _tool(i, vocab, taken)
        tools.append(tool)
        seeds.append(seed)
        examples += [IntentExample(tool.id, p) for p in phrases]
    return Catalog(tools, examples, seeds)


def queries(cat: Catalog, count: int, seed: int = 1) -> list[Query]:
    """Benchmark requests: queries.jsonl requests rewritten for a random tool (3 in 4), else free text."""
    rng = random.Random(f"queries-{GENERATOR_VERSION}-{seed}")
    vocab = vocabulary()
    out: list[Query] = []
    seen: set[str] = set()
    while len(out) < count:
        if rng.random() < 0.25:
            text = rng.choice(vocab.free_queries)
            if text not in seen:
                seen.add(text)
                out.append(Query(text, None))
            continue
        j = rng.randrange(len(cat.tools))
        tool, src = cat.tools[j], cat.seeds[j]
        texts = src.test or src.train
        if not texts:
            continue
        words = _words(tool.name)
        text = _substitute(rng.choice(texts), src, words[0], words[1:])
        if text not in seen:
            seen.add(text)
            out.append(Query(text, tool.id))
    return out


def sessions(cat: Catalog, count: int, seed: int = 1) -> list[tuple[str, list[str]]]:
    """Logged sessions for the session log: walks of 5 to 25 calls where each tool has 4 habitual successors among
    its neighbours in the catalog (taken 7 times in 10), so transition counts have structure, as real logs do."""
    rng = random.Random(f"sessions-{GENERATOR_VERSION}-{seed}")
    n = len(cat.tools)
    ids = [t.id for t in cat.tools]
    habit = [[ids[(i + rng.randint(-50, 50)) % n] for _ in range(4)] for i in range(n)]
    position = {t: i for i, t in enumerate(ids)}
    out = []
    for s in range(count):
        calls = [rng.choice(ids)]
        for _ in range(rng.randint(4, 24)):
            calls.append(rng.choice(habit[position[calls[-1]]]) if rng.random() < 0.7 else rng.choice(ids))
        out.append((f"bench-{s}", calls))
    return out


# -- vectors: embedded once per generator version, in chunks of CHUNK tools, reused by every size ----------

CHUNK = 10_000


def derived_chunk(full: Catalog, c: int, base_tools: Any, base_examples: Any) -> tuple[Any, Any]:
    """Vectors for chunk c >= 1 recombined from chunk 0's model vectors, when embedding them all is too slow.

    A tool gets its seed tool's vector (every seed has a tool in chunk 0) plus half another tool's vector (the
    recombined verb/modifier/provider) plus noise; its examples get the seed tool's example vectors plus the
    same half vector and noise. Same-seed tools end up at cosine ~0.7-0.8 of each other: clusters of
    near-duplicates, like a large catalog of overlapping tools.
    """
    import numpy as np

    first: dict[int, int] = {}
    for i, s in enumerate(full.seeds[:CHUNK]):
        first.setdefault(id(s), i)
    rng = np.random.default_rng(1000 + c)
    rows = range(c * CHUNK, min((c + 1) * CHUNK, len(full.tools)))
    seed_tool = np.array([first[id(full.seeds[i])] for i in rows])
    other = base_tools[rng.integers(0, CHUNK, len(seed_tool))]
    dim = base_tools.shape[1]

    def unit(v: Any) -> Any:
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    tools = unit(base_tools[seed_tool] + 0.5 * other + rng.normal(0, 0.02, (len(seed_tool), dim)))
    k = EXAMPLES_PER_TOOL
    ex_index = (seed_tool[:, None] * k + np.arange(k)[None, :]).ravel()
    examples = unit(
        base_examples[ex_index] + 0.5 * np.repeat(other, k, axis=0) + rng.normal(0, 0.02, (len(ex_index), dim))
    )
    return tools, examples


def vectors_folder(cache: Path, embedder: Any) -> Path:
    """Where :func:`load_vectors` keeps an embedder's vectors: named by its ``cache_key``, not its model alone (the
    shipped local model's names its build: an earlier build's vectors are not read), made a safe file name."""
    return cache / f"vectors_v{GENERATOR_VERSION}_{re.sub(r'[^A-Za-z0-9._#=@-]', '_', embedder.cache_key)}"


def load_vectors(
    n: int, embedder: Any, cache: Path, log: Any = print, reverse: bool = False, derive: bool = False
) -> tuple[Any, Any]:
    """(tool vectors, example vectors) of ``catalog(n)`` in catalog order, from ``cache`` (filled as needed).

    Chunk c holds tools [c*CHUNK, (c+1)*CHUNK) and their examples, so every size shares the same vectors.
    ``derive``: chunks after the first are recombined from the first (``derived_chunk``), not embedded.
    """
    import time

    import numpy as np

    from toolstore._text import dense_text

    folder = vectors_folder(cache, embedder)
    folder.mkdir(parents=True, exist_ok=True)
    chunks = -(-n // CHUNK)
    paths = [folder / f"{'d' if derive and c else ''}{c:03d}.npz" for c in range(chunks)]
    missing = [c for c, p in enumerate(paths) if not p.exists()]
    if missing:
        full = catalog(chunks * CHUNK)
        for c in missing[::-1] if reverse else missing:
            lock = paths[c].with_suffix(".lock")
            try:  # several processes may fill one cache: each chunk is embedded by whoever locks it first
                lock.touch(exist_ok=False)
            except FileExistsError:
                continue
            tools = full.tools[c * CHUNK : (c + 1) * CHUNK]
            examples = full.examples[c * CHUNK * EXAMPLES_PER_TOOL : (c + 1) * CHUNK * EXAMPLES_PER_TOOL]
            if derive and c:
                while not paths[0].exists():  # chunk 0 is being embedded by another process
                    time.sleep(5)
                base = np.load(paths[0])
                log(f"deriving chunk {c} from chunk 0's {embedder.model} vectors")
                tv, ev = derived_chunk(full, c, base["tools"], base["examples"])
            else:
                log(f"embedding chunk {c}: {len(tools)} tools + {len(examples)} examples with {embedder.model}")
                tv = embedder.embed_many([dense_text(t) for t in tools])
                ev = embedder.embed_many([e.query for e in examples])
            tmp = paths[c].with_suffix(".tmp.npz")
            np.savez(tmp, tools=tv.astype(np.float32), examples=ev.astype(np.float32))
            tmp.rename(paths[c])
            lock.unlink()
    while not all(p.exists() for p in paths):  # chunks another process is embedding
        time.sleep(5)
    loaded = [np.load(p) for p in paths]
    tools_v = np.concatenate([z["tools"] for z in loaded])[:n]
    examples_v = np.concatenate([z["examples"] for z in loaded])[: n * EXAMPLES_PER_TOOL]
    return tools_v, examples_v


if __name__ == "__main__":  # python bench/_synth.py 100000: fill the vector cache ahead of a benchmark run
    import sys

    from toolstore import LocalEmbedder

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    out = Path(__file__).resolve().parent / "out"
    tv, ev = load_vectors(
        size, LocalEmbedder(), out, log=lambda m: print(m, flush=True), reverse="--reverse" in sys.argv
    )
    print(tv.shape, ev.shape)
