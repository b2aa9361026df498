"""Read tool definitions from ``.json``, ``.jsonl`` and (OpenAPI only) ``.yaml`` / ``.yml`` files, all or nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .._errors import InvalidInputError, InvalidToolError
from .._input import json_lines, parse_json, plain_problem, read_json
from .._models import Tool
from .._textfile import path_name, read_text_file
from .build import tool_label
from .openapi import METHODS
from .parse import Located, Skipped, check_namespaces, check_skipped, check_unique, parse_located

JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")
YAML_SUFFIXES = (".yaml", ".yml")


def load_tools_file(path: str | os.PathLike[str], *, provider: str | None = None) -> list[Tool]:
    """Parse every tool in a ``.json`` or ``.jsonl`` file (see :func:`parse_tools` for formats).

    A ``.json`` file holds one JSON value of any supported shape; a ``.jsonl`` file holds one
    JSON value per line (blank lines are skipped), each of any supported shape; a ``.yaml`` / ``.yml`` file
    holds one OpenAPI 3.x document; a file named without a suffix (a pipe: ``<(curl ...)``) is one of them by its
    text. ``provider`` is the default provider, as for :func:`parse_tools`.

    Raises :class:`InvalidToolError` naming the file, the line (for JSONL) and the tool when any
    definition is invalid, the JSON is malformed (NaN and Infinity included), two tools share an id, a namespace is
    given twice differently, the file holds no tools (or only built-in ones, which are otherwise skipped with a
    warning: see :func:`parse_tools`), or it cannot be read, is neither a regular file nor a pipe or is over the size
    limit; nothing is returned on error.
    """
    name = path_name(path, "tools file")
    suffix = Path(path).suffix.lower()
    if suffix not in ("", *JSON_SUFFIXES, *JSONL_SUFFIXES, *YAML_SUFFIXES):
        raise InvalidToolError(f"{name}: unsupported file type {suffix!r}; expected .json, .jsonl or .yaml")
    text = _read_text(path, name)  # the path as given: a Stdin is read once, from stdin, not as a file named so
    guessed, suffix = not suffix, suffix or _suffix_of(text)
    skipped: list[Skipped] = []
    if suffix in JSONL_SUFFIXES:
        located = _parse_jsonl(text, name, provider, skipped)
    elif suffix in YAML_SUFFIXES:
        located = _parse_yaml(text, name, provider, skipped, guessed=guessed)
    else:
        located = _parse_json(text, name, provider, skipped)
    check_skipped(located, skipped, name)
    if not located:
        raise InvalidToolError(f"{name}: no tools found")
    check_unique(located, name)
    check_namespaces(located, name)
    return [tool for tool, _ in located]


def _read_text(path: str | os.PathLike[str], name: str) -> str:
    try:
        text = read_text_file(path, "tools file")
    except InvalidInputError as exc:
        raise InvalidToolError(str(exc)) from None
    if not text.strip():
        raise InvalidToolError(f"{name}: file is empty")
    return text


def _suffix_of(text: str) -> str:
    """The suffix of a name without one (a pipe: ``<(curl ...)`` is /dev/fd/63, ``/dev/stdin``), by its text: JSON
    lines when its first line is a JSON value and more lines follow, else a JSON document when it starts as one (a
    malformed one said by the JSON reader, where it breaks), else YAML."""
    first, _, rest = text.lstrip().partition("\n")
    if first[:1] not in ("{", "["):
        return YAML_SUFFIXES[0]
    if rest.strip():
        try:
            parse_json(first)
        except ValueError:
            return JSON_SUFFIXES[0]
        return JSONL_SUFFIXES[0]
    return JSON_SUFFIXES[0]


def _parse_json(text: str, name: str, provider: str | None, skipped: list[Skipped]) -> list[Located]:
    data = read_json(text, name, error=InvalidToolError)
    try:
        return parse_located(data, provider=provider, skipped=skipped)
    except InvalidToolError as exc:
        raise InvalidToolError(f"{name}: {exc}") from None


def _parse_jsonl(text: str, name: str, provider: str | None, skipped: list[Skipped]) -> list[Located]:
    located: list[Located] = []
    for lineno, where, data in json_lines(text, name, error=InvalidToolError):
        line_skipped: list[Skipped] = []
        try:
            tools = parse_located(data, provider=provider, skipped=line_skipped)
        except InvalidToolError as exc:
            raise InvalidToolError(f"{where}: {exc}") from None
        located.extend((tool, f"line {lineno} ({label})") for tool, label in tools)
        skipped.extend((f"line {lineno} ({label})", kind) for label, kind in line_skipped)
    return located


def _no_document(name: str, text: str, why: str) -> InvalidToolError:
    """The error of a text named without a suffix (a pipe) that is no tools file at all, such as the page ``curl -s``
    wrote for a URL that failed: it says what the text was read as, where YAML's error alone said "YAML files must
    hold an OpenAPI 3.x document" of a text nobody meant as YAML."""
    start = text.strip().splitlines()[0]
    shown = f"{start[:60]!r}{'...' if len(start) > 60 else ''}"
    return InvalidToolError(
        f"{name}: neither JSON (it does not start with {{ or [), JSON lines nor an OpenAPI document (YAML with an "
        f"'openapi' key), as a name without a suffix is read by its text ({why}); it starts {shown}"
    )


def _yaml_kind(data: object) -> str:
    """What a YAML document that is no mapping is, in YAML's words: "a string", "a list", "null" (Python's "str",
    "NoneType" said nothing to a user)."""
    if data is None:
        return "null"
    kinds = ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"), (list, "a list"))
    return next((said for kind, said in kinds if isinstance(data, kind)), f"a YAML {type(data).__name__}")


def _parse_yaml(
    text: str, name: str, provider: str | None, skipped: list[Skipped], *, guessed: bool = False
) -> list[Located]:
    """``guessed``: the name has no suffix, and the text was taken for YAML as it is no JSON (:func:`_no_document`)."""
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader without aliases: a few lines of anchors can expand to gigabytes (billion laughs)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, "YAML aliases are not accepted", event.start_mark)
            return super().compose_node(parent, index)

    try:
        data = yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise InvalidToolError(f"{name}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if guessed:
            raise _no_document(name, text, f"as YAML,{where}: {problem}") from None
        raise InvalidToolError(f"{name}{where}: invalid YAML: {problem}") from None
    except (ValueError, KeyError) as exc:  # a scalar YAML resolves but Python cannot build: a date 2025-13-45, a
        # 5,000-digit int, !!bool maybe (a KeyError)
        raise InvalidToolError(f"{name}: invalid YAML: a value that cannot be read ({plain_problem(exc)})") from None
    if not isinstance(data, dict) or not ("openapi" in data or "swagger" in data):
        kind = "a mapping without an 'openapi' key" if isinstance(data, dict) else _yaml_kind(data)
        if guessed:
            raise _no_document(name, text, f"as YAML, {kind}")
        raise InvalidToolError(
            f"{name}: not an OpenAPI document ({kind}); YAML files must hold an OpenAPI 3.x document"
        )
    found = _not_json(data)
    if found is not None:
        raise InvalidToolError(f"{name}: {_where(data, found[0])} is {found[1]}")
    # YAML has what JSON has not (integer keys such as response codes, dates): make it the JSON an OpenAPI file means.
    try:
        data = parse_json(json.dumps(data, default=str))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidToolError(f"{name}: YAML that has no JSON equivalent: {plain_problem(exc)}") from None
    try:
        return parse_located(data, provider=provider, skipped=skipped)
    except InvalidToolError as exc:
        raise InvalidToolError(f"{name}: {exc}") from None


#: YAML values of a type JSON has no equivalent for (SafeLoader builds them), and how to write them instead: a
#: string would be ``str(value)``, Python's spelling, silently.
_NOT_JSON = (
    (bytes, "a YAML binary (!!binary), which JSON has no equivalent of: give it as a base64 string"),
    ((set, frozenset), "a YAML set (!!set), which JSON has no equivalent of: give it as a list"),
)


def _not_json(data: object) -> tuple[list[object], str] | None:
    """Where the first value of ``data`` of a type JSON has no equivalent for is (:data:`_NOT_JSON`), and what it is;
    None: none. Walked without recursion (the document's depth is checked later)."""
    stack: list[tuple[object, list[object]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        for kind, said in _NOT_JSON:
            if isinstance(value, kind):
                return path, said
        if isinstance(value, dict):
            stack.extend((item, [*path, key]) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, [*path, i]) for i, item in reversed(list(enumerate(value))))
    return None


def _where(data: dict[str, Any], path: list[object]) -> str:
    """A value's place in an OpenAPI document: the tool (its operation) and the field in it, when it is in one;
    else the path from the document's top."""
    paths = data.get("paths")
    in_operation = len(path) > 3 and path[0] == "paths" and path[2] in METHODS and isinstance(paths, dict)
    rest = path[3:] if in_operation else path
    field = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in rest).lstrip(".")
    if not in_operation:
        return field
    op = paths[path[1]][path[2]]  # type: ignore[index]
    route = str(path[1]) if len(str(path[1])) <= 200 else f"{str(path[1])[:200]}..."
    name = op.get("operationId") if isinstance(op, dict) else None
    return f"{tool_label(f'({str(path[2]).upper()} {route})', name)}: {field}"
