"""Fuzz the command line with bad files and bad arguments; count raw tracebacks (target: 0).

    python bench/fuzz_inputs.py [--files 1000] [--seed 1]

Mutates valid documents of every import format (benchmark rows, OpenAI, Anthropic, MCP, OpenAPI JSON and YAML) at
random: truncation, byte flips, invalid UTF-8, lone surrogates, NUL, NaN/Infinity, huge integers and strings, deep
nesting, YAML aliases, type swaps, duplicate ids. Each goes through `toolstore import` (in process, the real `main`,
against a scratch database), then some `route` calls with hostile arguments; then the conversation inputs the same
way: mutated session files through `sessions import`, mutated message lists (OpenAI and Anthropic) through
`route --messages`, hostile session ids, `--turns` and `sessions prune` / `retention` arguments. An outcome is `ok`
(exit 0), `refused` (exit 1, one line on stderr), `usage` (exit 2, click's usage error ending in one 'Error:' line) or
`raw` (anything else: a traceback, another exit code, an error of more than one line). Database: $TOOLSTORE_DSN's
server, else the embedded one under $TOOLSTORE_HOME.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent)]

from toolstore import migrate
from toolstore.cli.main import main as cli_main

SEEDS: dict[str, Any] = {
    "bench.jsonl": [
        {
            "id": "a.send",
            "name": "send",
            "description": "Send a message",
            "provider": "a",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
            "category": "x",
        }
    ],
    "openai.json": {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ]
    },
    "anthropic.json": [{"name": "search", "description": "Search", "input_schema": {"type": "object"}}],
    "mcp.json": {
        "tools": [
            {
                "name": "read_file",
                "title": "Read",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True},
            }
        ]
    },
    "openapi.json": {
        "openapi": "3.0.0",
        "info": {"title": "Pets", "version": "1"},
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List pets",
                    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                }
            }
        },
    },
}

#: Conversation inputs: a session file (bfcl_sessions rows) and message lists, all naming a.send of SEEDS.
CONVERSATION: dict[str, Any] = {
    "sessions.jsonl": [{"sid": "s1", "turns": [{"query": "send it", "relevant": ["a.send"], "calls": ["a.send"]}]}],
    "openai-messages.json": [
        {"role": "user", "content": "send a message to bob"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "send", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sent"},
        {"role": "user", "content": "and again to alice"},
    ],
    "anthropic-messages.json": [
        {"role": "user", "content": [{"type": "text", "text": "send a message"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "send", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": True}]},
        {"role": "user", "content": "try once more"},
    ],
}


def mutate(rng: random.Random, text: str) -> bytes:
    kind = rng.randrange(14)
    raw = text.encode()
    if kind == 0:
        return raw[: rng.randrange(len(raw))]
    if kind == 1:
        data = bytearray(raw)
        for _ in range(rng.randint(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == 2:
        return raw.replace(b'"', b'"\xff\xfe', 1)
    if kind == 3:
        return text.replace('"', '"\\ud800', 1).encode()
    if kind == 4:
        return text.replace('"', '"\\u0000', 1).encode()
    if kind == 5:
        return text.replace('"type"', '"default": NaN, "x": Infinity, "type"', 1).encode()
    if kind == 6:
        return text.replace('"type"', f'"maximum": {"9" * rng.choice([10, 400, 5000])}, "type"', 1).encode()
    if kind == 7:
        return text.replace(
            '"description": "', '"description": "' + "w " * rng.choice([10**4, 10**5, 10**6]), 1
        ).encode()
    if kind == 8:
        depth = rng.choice([50, 200, 5000, 200_000])
        return text.replace('{"type"', "[" * depth + "]" * depth + ', {"type"', 1).encode()
    if kind == 9:
        return text.replace(
            '"name": "', '"name": ' + rng.choice(["null", "1", "[]", "{}", "true", '"' + "n" * 500]) + ', "_": "', 1
        ).encode()
    if kind == 10:  # duplicate the first tool (duplicate ids)
        return (text + "\n" + text).encode()
    if kind == 11:
        return text.replace('"', '"' + rng.choice(["\t", "\x01", "\u2028", "\U0001f600"]), 1).encode()
    if kind == 12:
        return rng.choice([b"", b" ", b"null", b"[]", b"{}", b"[[[]]]", b"\xef\xbb\xbf{}", b"42"])
    return json.dumps(json.loads(text) if rng.random() < 0.5 else {"tools": [json.loads(text)] * 3}).encode()


def yaml_cases() -> list[bytes]:
    return [
        b"openapi: 3.0.0\na: &a [1, 2]\nb: [*a, *a]\n",
        b"openapi: 3.0.0\nx: .nan\npaths: {}\n",
        b"openapi: 3.0.0\nx: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        b"- just\n- a list\n",
        b"openapi: [\n",
        b"openapi: 3.0.0\npaths: {'/x': {get: {operationId: 'a b c'}}}\n",
    ]


def run(args: list[str]) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        old = sys.argv
        sys.argv = ["toolstore", *args]
        try:
            cli_main()
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # noqa: BLE001 - exactly what this script counts
            return "raw", f"{type(exc).__name__}: {exc}"[:200]
        finally:
            sys.argv = old
    lines = err.getvalue().strip().splitlines()
    if code in (0, None):
        return "ok", ""
    if code == 1 and len(lines) == 1 and "Traceback" not in err.getvalue():
        return "refused", lines[0][:120]
    if code == 2 and lines and lines[-1].startswith("Error: ") and "Traceback" not in err.getvalue():
        return "usage", lines[-1][:120]  # click's usage error: the usage line, a hint and one 'Error:' line
    return "raw", f"exit {code}: {err.getvalue()[:200]}"


def serialise(name: str, document: Any) -> str:
    return "\n".join(json.dumps(r) for r in document) if name.endswith("jsonl") else json.dumps(document)


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text(serialise(path.name, rows))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    if os.environ.get("TOOLSTORE_DSN"):
        admin = os.environ["TOOLSTORE_DSN"]
    else:
        os.environ.setdefault("TOOLSTORE_HOME", str(BENCH / "out" / "home"))
        from toolstore._embedded import embedded_dsn

        admin = embedded_dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("drop database if exists toolstore_fuzz with (force)")
        conn.execute(sql.SQL("create database {}").format(sql.Identifier("toolstore_fuzz")))
    dsn = make_conninfo(admin, dbname="toolstore_fuzz")
    migrate(dsn)
    base = ["--dsn", dsn, "--embedder", "hashing", "--json"]
    outcomes: Counter[str] = Counter()
    raw: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        cases: list[tuple[str, bytes]] = []
        for _ in range(options.files):
            name = rng.choice(sorted(SEEDS))
            cases.append((name, mutate(rng, serialise(name, SEEDS[name]))))
        cases += [("openapi.yaml", c) for c in yaml_cases()]
        for i, (name, content) in enumerate(cases):
            path = Path(tmp) / f"{i}-{name}"
            path.write_bytes(content)
            outcome, detail = run([*base, "-c", f"fuzz{i % 7}", "import", str(path)])
            outcomes[f"import {outcome}"] += 1
            if outcome == "raw":
                raw.append(f"{name}: {detail}")
        hostile = ["", " ", "\x00", "x" * 30_000, "\udcff", "send email", "a" * 19_999]
        for i in range(200):
            args = [*base, "-c", f"fuzz{i % 7}", "route", rng.choice(hostile)]
            if rng.random() < 0.5:
                args += ["-k", str(rng.choice([-1, 0, 1, 5, 10**9, 10**30]))]
            if rng.random() < 0.5:
                args += ["--weights", rng.choice(["dense=1e308", "name=nan", "x=1", "dense=-1", "name=0,dense=0"])]
            if rng.random() < 0.3:
                args += ["--allow", rng.choice(["a\x00", "\udcff", "*", "x" * 400])]
            outcome, detail = run(args)
            outcomes[f"route {outcome}"] += 1
            if outcome == "raw":
                raw.append(f"route {args[len(base) :]!r:.80}: {detail}")
        run([*base, "-c", "conv", "import", str(write(Path(tmp) / "seed.jsonl", SEEDS["bench.jsonl"]))])
        for i in range(options.files // 3):
            name = rng.choice(sorted(CONVERSATION))
            path = Path(tmp) / f"conv{i}-{name}"
            path.write_bytes(mutate(rng, serialise(name, CONVERSATION[name])))
            if name == "sessions.jsonl":
                args = [*base, "-c", "conv", "sessions", "import", str(path)]
            else:
                args = [*base, "-c", "conv", "route", "--messages", str(path)]
                if rng.random() < 0.3:
                    args += ["--turns", str(rng.choice([-1, 0, 1, 10**9]))]
            outcome, detail = run(args)
            outcomes[f"conversation {outcome}"] += 1
            if outcome == "raw":
                raw.append(f"{name}: {detail}")
        hostile_ids = ["", "\x00", "x" * 300, "\udcff", "s1"]
        for _ in range(100):
            choice = rng.random()
            if choice < 0.4:
                args = [*base, "-c", "conv", "route", "send", "--session", rng.choice(hostile_ids)]
            elif choice < 0.7:
                value = rng.choice(["", "soon", "-1d", "1e400d", "99999999999d", "nan", "1.5h", "30d"])
                args = [*base, "-c", "conv", "sessions", "prune", "--older-than", value]
            else:
                value = rng.choice(["0", "-5", "1.5", "nan", "inf", "none", "1e400", "10"])
                limit = rng.choice(["--max-calls", "--max-age-days"])
                args = [*base, "-c", "conv", "sessions", "retention", limit, value]
            outcome, detail = run(args)
            outcomes[f"session args {outcome}"] += 1
            if outcome == "raw":
                raw.append(f"{args[len(base) :]!r:.80}: {detail}")
    print(json.dumps({"outcomes": dict(sorted(outcomes.items())), "raw": raw[:20], "n_raw": len(raw)}, indent=2))
    sys.exit(1 if raw else 0)


if __name__ == "__main__":
    main()
