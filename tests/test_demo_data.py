"""Sanity checks for the bundled demo catalog (toolstore/demo). Pure Python: no database."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "toolstore" / "demo"
TOOLS_PATH = DEMO / "tools.jsonl"
EXAMPLES_PATH = DEMO / "examples.jsonl"
REQUESTS_PATH = DEMO / "requests.txt"

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
TOOL_KEYS = {"id", "name", "description", "provider", "parameters", "category"}
OPTIONAL_TOOL_KEYS = {"x-toolstore"}
X_KEYS = {"title", "keywords", "examples", "always_on"}
JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
CORE_TOOLS = {"core.ask_user", "core.final_answer"}


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            assert line.strip(), f"{path.name}:{lineno} is blank"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:  # pragma: no cover - failure path
                raise AssertionError(f"{path.name}:{lineno} is not valid JSON: {exc}") from exc
            assert isinstance(row, dict), f"{path.name}:{lineno} is not a JSON object"
            rows.append(row)
    return rows


def _tools() -> list[dict]:
    return _read_jsonl(TOOLS_PATH)


def _examples() -> list[dict]:
    return _read_jsonl(EXAMPLES_PATH)


def _requests() -> list[str]:
    return REQUESTS_PATH.read_text(encoding="utf-8").splitlines()


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


# ------------------------------------------------------------------ tools


def test_tools_parse_and_have_expected_keys():
    for t in _tools():
        keys = set(t)
        assert TOOL_KEYS <= keys, f"{t.get('id')}: missing {TOOL_KEYS - keys}"
        assert keys <= TOOL_KEYS | OPTIONAL_TOOL_KEYS, f"{t['id']}: unexpected {keys - TOOL_KEYS - OPTIONAL_TOOL_KEYS}"
        for k in ("id", "name", "description", "provider", "category"):
            assert isinstance(t[k], str) and t[k].strip(), f"{t['id']}: {k} must be a non-empty string"
        assert SNAKE.match(t["name"]), f"{t['id']}: name is not snake_case"
        assert SNAKE.match(t["provider"]), f"{t['id']}: provider is not snake_case"
        assert t["id"] == f"{t['provider']}.{t['name']}", f"{t['id']}: id must be provider.name"


def test_catalog_size_and_providers():
    tools = _tools()
    providers = {t["provider"] for t in tools}
    assert len(tools) >= 110
    assert len(providers) >= 13
    for required in ("slack", "gmail", "google_calendar", "github", "stripe", "web", "weather", "aws", "core"):
        assert required in providers, f"missing provider {required}"
    for alternatives in (
        ("jira", "linear"),
        ("salesforce", "hubspot"),
        ("google_drive", "dropbox"),
        ("notion", "confluence"),
    ):
        assert providers & set(alternatives), f"need one of {alternatives}"


def test_ids_unique():
    ids = [t["id"] for t in _tools()]
    dupes = [i for i, c in Counter(ids).items() if c > 1]
    assert not dupes, f"duplicate ids: {dupes}"


def test_same_name_under_several_providers():
    """Near-neighbours are deliberate: the same bare name must occur under 2+ providers."""
    by_name = Counter(t["name"] for t in _tools())
    assert by_name["create_issue"] >= 2
    assert any(c >= 2 for n, c in by_name.items() if n != "create_issue")


def _check_schema(tool_id: str, where: str, schema: dict) -> None:
    assert isinstance(schema, dict), f"{tool_id}: {where} is not an object"
    typ = schema.get("type")
    assert typ in JSON_TYPES, f"{tool_id}: {where} has bad type {typ!r}"
    if "enum" in schema:
        enum = schema["enum"]
        assert isinstance(enum, list) and enum, f"{tool_id}: {where} enum must be a non-empty list"
        assert len(enum) == len({json.dumps(v) for v in enum}), f"{tool_id}: {where} enum has duplicates"
    if typ == "array":
        assert isinstance(schema.get("items"), dict), f"{tool_id}: {where} array needs items"
        _check_schema(tool_id, f"{where}[]", schema["items"])
    if typ == "object":
        for name, sub in (schema.get("properties") or {}).items():
            _check_schema(tool_id, f"{where}.{name}", sub)


def test_parameters_are_json_schema_objects():
    for t in _tools():
        params = t["parameters"]
        assert isinstance(params, dict), t["id"]
        assert params.get("type") == "object", f"{t['id']}: parameters.type must be 'object'"
        props = params.get("properties")
        assert isinstance(props, dict), f"{t['id']}: parameters.properties must be an object"
        required = params.get("required", [])
        assert isinstance(required, list), f"{t['id']}: required must be a list"
        assert len(required) == len(set(required)), f"{t['id']}: duplicate required entries"
        for r in required:
            assert r in props, f"{t['id']}: required {r!r} not in properties"
        for pname, pschema in props.items():
            assert SNAKE.match(pname), f"{t['id']}: parameter {pname!r} is not snake_case"
            assert isinstance(pschema, dict) and pschema.get("description"), f"{t['id']}.{pname}: needs a description"
            _check_schema(t["id"], pname, pschema)


def test_x_toolstore_shape():
    tools = _tools()
    with_x = 0
    for t in tools:
        x = t.get("x-toolstore")
        if x is None:
            continue
        with_x += 1
        assert isinstance(x, dict), t["id"]
        assert set(x) <= X_KEYS, f"{t['id']}: unexpected x-toolstore keys {set(x) - X_KEYS}"
        if "title" in x:
            assert isinstance(x["title"], str) and x["title"].strip()
        if "keywords" in x:
            assert isinstance(x["keywords"], list) and all(isinstance(k, str) and k for k in x["keywords"])
        if "examples" in x:
            assert isinstance(x["examples"], list) and 2 <= len(x["examples"]) <= 3, t["id"]
            assert all(isinstance(e, str) and e.strip() for e in x["examples"])
        if "always_on" in x:
            assert isinstance(x["always_on"], bool)
    assert with_x >= len(tools) // 2, "most tools should carry x-toolstore metadata"


def test_exactly_core_tools_always_on():
    tools = _tools()
    always_on = {t["id"] for t in tools if (t.get("x-toolstore") or {}).get("always_on") is True}
    core = {t["id"] for t in tools if t["provider"] == "core"}
    assert core == CORE_TOOLS
    assert always_on == core


# ------------------------------------------------------------------ examples


def test_examples_shape_and_ids_exist():
    tool_ids = {t["id"] for t in _tools()}
    examples = _examples()
    assert len(examples) >= 330
    qids = [e["qid"] for e in examples]
    assert len(qids) == len(set(qids)), "duplicate qids"
    for e in examples:
        assert set(e) == {"qid", "query", "relevant", "acceptable"}, e
        assert re.match(r"^demo_\d{4,}$", e["qid"]), e["qid"]
        assert isinstance(e["query"], str) and e["query"].strip(), e["qid"]
        assert isinstance(e["relevant"], list) and e["relevant"], e["qid"]
        assert isinstance(e["acceptable"], list), e["qid"]
        for tid in e["relevant"] + e["acceptable"]:
            assert tid in tool_ids, f"{e['qid']}: unknown tool id {tid!r}"
        assert not set(e["relevant"]) & set(e["acceptable"]), f"{e['qid']}: id both relevant and acceptable"


def test_example_coverage():
    per_tool = Counter(tid for e in _examples() for tid in e["relevant"])
    covered = [tid for tid, c in per_tool.items() if c >= 3]
    assert len(covered) >= 90, f"only {len(covered)} tools have >= 3 examples"


def test_example_queries_unique_and_not_copied_from_metadata():
    tools = _tools()
    queries = [_norm(e["query"]) for e in _examples()]
    dupes = [q for q, c in Counter(queries).items() if c > 1]
    assert not dupes, f"duplicate queries: {dupes}"
    descriptions = {_norm(t["description"]) for t in tools}
    x_examples = {_norm(x) for t in tools for x in (t.get("x-toolstore") or {}).get("examples", [])}
    assert not set(queries) & descriptions, "examples must not copy descriptions"
    assert not set(queries) & x_examples, "examples must not repeat x-toolstore examples"


# ------------------------------------------------------------------ requests


def test_requests_file():
    lines = _requests()
    assert len(lines) == 8
    assert all(line.strip() for line in lines), "requests.txt has blank lines"
    assert len({_norm(line) for line in lines}) == 8


def test_requests_not_verbatim_in_examples():
    queries = {_norm(e["query"]) for e in _examples()}
    x_examples = {_norm(x) for t in _tools() for x in (t.get("x-toolstore") or {}).get("examples", [])}
    for line in _requests():
        assert _norm(line) not in queries, f"request appears verbatim in examples.jsonl: {line!r}"
        assert _norm(line) not in x_examples, f"request appears verbatim in x-toolstore examples: {line!r}"
