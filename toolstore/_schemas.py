"""A tool's parameter schema held to the JSON Schema meta-schema, as a write checks it (``_rows.check_tools``).

A schema that no JSON Schema reader takes (``{"type": "strnig"}``, ``{"properties": []}``, ``"required": "x"``) is
refused naming the path in the schema and what is wrong: OpenAI refuses such a tool's definition, and with it the whole
request it is in, so storing it would only move the failure to an agent's model call. The meta-schema is draft 7's
(the one OpenAPI 3.0 tools and most SDKs write to), or the draft a schema names in ``$schema``; draft 7 also reads
2020-12's keywords (``$defs``, ``prefixItems``) without refusing them.

One dialect is let through: the Python type names of the Berkeley Function Calling Leaderboard's tools (``"type":
"float"``, ``"dict"``, ...), which its own harness maps to JSON Schema's before a model sees them; a third of
``bfcl_sessions``' tools are written so. Such a schema is valid once those names are read as JSON Schema's, and
:func:`schema_problem` says that it uses them, which a write logs as a warning (it is stored as written: a definition
is faithful to its source).
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from typing import Any

import fastjsonschema
from jsonschema import Draft7Validator, validators
from jsonschema.exceptions import ValidationError, best_match

#: The Python type names BFCL's tools use for JSON Schema's types.
PYTHON_TYPES = {
    "float": "number",
    "int": "integer",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "bool": "boolean",
    "str": "string",
    "any": "string",
}
_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_DEFAULT = Draft7Validator(Draft7Validator.META_SCHEMA)


def schema_problem(schema: dict[str, Any]) -> tuple[str | None, bool]:
    """What is wrong with ``schema`` as a JSON Schema (``at properties.x.type: ...``; None: nothing), and whether it
    uses BFCL's Python type names (:data:`PYTHON_TYPES`). Answers are cached by the schema's JSON: an import checks
    each schema once more as it writes, and generated catalogs repeat theirs."""
    return _problem(json.dumps(schema, sort_keys=True, ensure_ascii=False))


@lru_cache(maxsize=4096)
def _problem(text: str) -> tuple[str | None, bool]:
    schema = json.loads(text)
    if "$schema" not in schema and _draft7_takes(schema):
        return None, False
    validator = _validator(schema)
    if validator.is_valid(schema):
        return None, False
    read = _json_types(schema)
    error = best_match(validator.iter_errors(read))
    if error is None:
        return None, True
    return _said(error), False


@cache
def _draft7() -> Any:
    """Draft 7's meta-schema compiled to Python by fastjsonschema (about 20 ms, at the first check)."""
    return fastjsonschema.compile(Draft7Validator.META_SCHEMA)


def _draft7_takes(schema: dict[str, Any]) -> bool:
    """Whether draft 7's meta-schema takes ``schema``, asked of :func:`_draft7`: about 7 times faster than jsonschema
    (a 10k-tool catalog's 3,413 distinct schemas: 0.05 against 0.37 s of CPU), which answers only what it refuses (and
    says why). It also checks the meta-schema's formats (a ``pattern`` that is no regular expression), which jsonschema
    does not: such a schema goes to jsonschema, whose answer stands."""
    try:
        _draft7()(schema)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def _validator(schema: dict[str, Any]) -> Draft7Validator:
    """The meta-schema's validator for the draft ``schema`` names in ``$schema`` (draft 7's when none, or an unknown
    one)."""
    if "$schema" not in schema:
        return _DEFAULT
    cls = validators.validator_for(schema, default=Draft7Validator)
    return cls(cls.META_SCHEMA)  # type: ignore[no-any-return]


def _json_types(value: Any) -> Any:
    """``value`` with each ``type`` keyword's Python type names (:data:`PYTHON_TYPES`) read as JSON Schema's."""
    if isinstance(value, list):
        return [_json_types(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _json_types(item) for key, item in value.items()}
    kind = value.get("type")
    if isinstance(kind, str):
        out["type"] = PYTHON_TYPES.get(kind, kind)
    elif isinstance(kind, list):
        out["type"] = [PYTHON_TYPES.get(k, k) if isinstance(k, str) else k for k in kind]
    return out


def _said(error: ValidationError) -> str:
    """The meta-schema's ``error`` as a refusal says it: where in the schema, and what is wrong there."""
    path = ".".join(str(part) for part in error.absolute_path)
    where = f"at {path}" if path else "at its top"
    if error.absolute_path and error.absolute_path[-1] == "type" and error.validator == "anyOf":
        return f"{where}: {error.instance!r:.80} is not a JSON Schema type ({', '.join(_JSON_TYPES)})"
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"{where}: {message}"
