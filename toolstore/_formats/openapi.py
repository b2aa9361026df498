"""OpenAPI 3.0 / 3.1 documents: one :class:`Draft` per operation.

Path, query and header parameters and the JSON request body are merged into one object
schema; local ``$ref``s (``#/...``) are resolved, a recursive reference becomes an open schema; a malformed
schema (a ``$ref`` to a non-object, ``required`` not a list, an expansion too deep or too large) is a ValueError.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from .._errors import InvalidToolError
from .._input import MAX_JSON_DEPTH, MAX_NAME_CHARS
from .build import META_KEY, Draft, tool_label
from .checks import shown, type_name

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_PARAM_LOCATIONS = ("path", "query", "header")
#: The most values (objects, lists, scalars) one schema may expand to.
MAX_EXPANDED_VALUES = 100_000
#: The most values every schema of a document may expand to together: this many, or :data:`DOCUMENT_EXPANSION` times
#: the values of the document itself when that is more. A schema within :data:`MAX_EXPANDED_VALUES` that each of many
#: operations (or parameters) refers to would otherwise make a file of kilobytes gigabytes of tools.
MAX_DOCUMENT_EXPANDED_VALUES = 1_000_000
DOCUMENT_EXPANSION = 10


def is_openapi(data: dict[str, Any]) -> bool:
    """True when ``data`` looks like an OpenAPI or Swagger document."""
    return "openapi" in data or "swagger" in data


def openapi_drafts(doc: dict[str, Any], loc: str) -> list[tuple[Draft, str]]:
    """One ``(draft, location)`` per operation of ``doc``, in document order.

    Raises ValueError for documents that are not OpenAPI 3.x or whose structure is broken,
    InvalidToolError (naming the operation) for a broken operation.
    """
    version = doc.get("openapi")
    if "swagger" in doc and version is None:
        raise ValueError("Swagger 2.0 documents are not supported; convert to OpenAPI 3 first")
    if not isinstance(version, str) or not version.startswith("3."):
        raise ValueError(f"unsupported OpenAPI version {shown(version)} (expected 3.0 or 3.1)")
    paths = doc.get("paths", {})
    if not isinstance(paths, dict):
        raise ValueError(f"OpenAPI paths must be a JSON object, got {type_name(paths)}")
    info = doc.get("info")
    title = info.get("title") if isinstance(info, dict) else None
    doc_provider = slug(title) if isinstance(title, str) else None
    resolver = _Resolver(doc)
    drafts = []
    for path, item in paths.items():
        item = resolver.resolve(item)
        if not isinstance(item, dict):
            raise ValueError(f"OpenAPI path {path!r:.80} must be a JSON object, got {type_name(item)}")
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            where = f"{loc} ({method.upper()} {path if len(path) <= 200 else path[:200] + '...'})".strip()
            if not isinstance(op, dict):
                raise ValueError(f"operation {where} must be a JSON object, got {type_name(op)}")
            try:
                draft = _operation_draft(resolver, path, method, item, op)
            except ValueError as exc:
                raise InvalidToolError(f"{tool_label(where, op.get('operationId'))}: {exc}") from None
            draft.doc_provider = doc_provider
            drafts.append((draft, where))
    return drafts


def slug(text: str) -> str | None:
    """``"Petclinic API"`` -> ``"petclinic_api"``: lower case, runs of anything but ``[a-z0-9_-]`` as one ``_``
    (None when nothing is left). Provider namespaces of OpenAPI tools, so ids hold no spaces."""
    return re.sub(r"[^a-z0-9_-]+", "_", text.lower()).strip("_") or None


#: Hex digits of the hash that ends an operation's name too long for a tool's (:func:`operation_name`).
NAME_HASH_DIGITS = 12


def operation_name(method: str, path: str) -> str:
    """The name of an operation without ``operationId``: ``get /pets/{petId}`` -> ``get_pets_petId``. One past
    :data:`~.._input.MAX_NAME_CHARS` (a path of about 124 characters) keeps its head and ends in ``_`` and
    :data:`NAME_HASH_DIGITS` hex digits of the SHA-256 of ``"get /pets/{petId}"``: the same at every import, and
    another for every operation (method and path)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{method}/{path}").strip("_")
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(f"{method.lower()} {path}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[: MAX_NAME_CHARS - NAME_HASH_DIGITS - 1].rstrip('_')}_{digest[:NAME_HASH_DIGITS]}"


def _operation_draft(resolver: _Resolver, path: str, method: str, item: dict[str, Any], op: dict[str, Any]) -> Draft:
    name = op.get("operationId") or operation_name(method, path)
    if isinstance(name, str) and re.search(r"[^A-Za-z0-9_.-]", name):  # "add pet" -> "add_pet"; spec keeps it
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or operation_name(method, path)
    text = [op.get(key) for key in ("summary", "description")]
    parts = [t.strip() for t in text if isinstance(t, str) and t.strip()]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    return Draft(
        name=name,
        description="\n\n".join(parts),
        parameters=_operation_schema(resolver, item, op),
        categories=op.get("tags", ()),
        meta=op.get(META_KEY),
        spec={"method": method, "path": path, "operation": op},
    )


def _operation_schema(resolver: _Resolver, item: dict[str, Any], op: dict[str, Any]) -> dict[str, Any] | None:
    """Path-item parameters, then operation parameters (same name+in wins), then the body."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in _as_list(item.get("parameters")) + _as_list(op.get("parameters")):
        param = resolver.resolve(raw)
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            raise ValueError(f"OpenAPI parameter must be an object with a name, got {shown(raw)}")
        merged[(param["name"], str(param.get("in")))] = param
    properties: dict[str, Any] = {}
    required: list[str] = []
    for (name, where), param in merged.items():
        if where not in _PARAM_LOCATIONS:
            continue
        properties[name] = _parameter_schema(resolver, param)
        if param.get("required") or where == "path":
            required.append(name)
    _merge_body(resolver, op.get("requestBody"), properties, required)
    if not properties:
        return None
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(dict.fromkeys(required))
    return schema


def _parameter_schema(resolver: _Resolver, param: dict[str, Any]) -> dict[str, Any]:
    schema = param.get("schema")
    if schema is None and isinstance(param.get("content"), dict):
        media = next(iter(param["content"].values()), None)
        schema = media.get("schema") if isinstance(media, dict) else None
    result = resolver.expand(schema) if isinstance(schema, dict) else {}
    if not isinstance(result, dict):  # a $ref to a boolean schema
        result = {} if result else {"not": {}}
    if isinstance(param.get("description"), str) and "description" not in result:
        result["description"] = param["description"]
    return result


def _merge_body(resolver: _Resolver, body: object, properties: dict[str, Any], required: list[str]) -> None:
    """Add a JSON request body's properties (or one ``body`` property) to the schema."""
    body = resolver.resolve(body)
    if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
        return
    media = _json_media(body["content"])
    if media is None or not isinstance(media.get("schema"), dict):
        return
    schema = resolver.expand(media["schema"])
    if not isinstance(schema, dict):  # a $ref to a boolean schema: no properties to name
        return
    if schema.get("type", "object") == "object" and isinstance(schema.get("properties"), dict):
        names = schema.get("required", [])
        if not isinstance(names, list):
            raise ValueError(f"request body schema's required must be a list of names, got {type_name(names)}")
        properties.update(schema["properties"])
        required.extend(r for r in names if isinstance(r, str))
        return
    if isinstance(body.get("description"), str) and "description" not in schema:
        schema["description"] = body["description"]
    properties["body"] = schema
    if body.get("required"):
        required.append("body")


def _json_media(content: dict[str, Any]) -> dict[str, Any] | None:
    for media_type, media in content.items():
        base = media_type.split(";")[0].strip().lower()
        if (base == "application/json" or base.endswith("+json")) and isinstance(media, dict):
            return media
    return None


def _as_list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


class _Resolver:
    """Resolves local ``$ref``s of one document; a reference to itself is cut off.

    An expanded schema is nested at most :data:`MAX_JSON_DEPTH` levels (what a tool's parameters may hold), goes
    through at most as many ``$ref``s on one path, and holds at most :data:`MAX_EXPANDED_VALUES` values (references
    repeated in a diamond would grow it exponentially); past any of these it is a ValueError, never a RecursionError.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.values = 0
        self.total = 0  # of every expansion of the document
        self.budget = MAX_DOCUMENT_EXPANDED_VALUES  # raised once, when reached, to DOCUMENT_EXPANSION x its values
        self.counted = False

    def lookup(self, ref: str) -> Any:
        if not ref.startswith("#/") and ref != "#":
            raise ValueError(f"only local $refs (#/...) are supported, got {ref!r:.80}")
        node: Any = self.doc
        for token in ref[2:].split("/") if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise ValueError(f"$ref {ref!r:.80} does not resolve")
        return node

    def resolve(self, node: object, seen: tuple[str, ...] = ()) -> Any:
        """Follow ``$ref``s at the top of ``node`` only (for parameters, bodies, path items)."""
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise ValueError(f"$ref {ref!r:.80} refers to itself")
            seen += (ref,)
            node = self.lookup(ref)
        return node

    def expand(self, node: Any) -> Any:
        """A deep copy of a schema with every ``$ref`` replaced by its target (within the bounds above)."""
        self.values = 0
        return self._expand(node, (), 0)

    def _expand(self, node: Any, stack: tuple[str, ...], depth: int) -> Any:
        self.values += 1
        self.total += 1
        if self.values > MAX_EXPANDED_VALUES:
            raise ValueError(f"schema expands to more than {MAX_EXPANDED_VALUES:,} values (its $refs repeat too often)")
        if self.total > self.budget:
            self._over_budget()
        if isinstance(node, (list, dict)) and depth >= MAX_JSON_DEPTH:
            raise ValueError(f"schema is nested deeper than {MAX_JSON_DEPTH} levels once its $refs are expanded")
        if isinstance(node, list):
            return [self._expand(item, stack, depth + 1) for item in node]
        if not isinstance(node, dict):
            return copy.deepcopy(node)
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                return {"description": f"recursive reference to {ref}"}
            if len(stack) >= MAX_JSON_DEPTH:
                raise ValueError(f"schema goes through more than {MAX_JSON_DEPTH} $refs (up to {ref!r:.80})")
            found = self.lookup(ref)
            if not isinstance(found, (bool, dict)):
                kind = type_name(found)
                raise ValueError(f"$ref {ref!r:.80} must point to a schema (an object or a boolean), got {kind}")
            siblings = {k: self._expand(v, stack, depth + 1) for k, v in node.items() if k != "$ref"}
            target = found if isinstance(found, bool) else self._expand(found, stack + (ref,), depth)
            if isinstance(target, bool):  # a boolean schema (OpenAPI 3.1), or a $ref to one: true allows anything,
                return siblings if target and siblings else target  # false nothing
            return {**target, **siblings}
        return {key: self._expand(value, stack, depth + 1) for key, value in node.items()}

    def _over_budget(self) -> None:
        """The document's expansions reached their budget: raise it to :data:`DOCUMENT_EXPANSION` times the document's
        own values (counted once, only for a document that gets this far), else ValueError."""
        if not self.counted:
            self.counted = True
            self.budget = max(self.budget, DOCUMENT_EXPANSION * _count_values(self.doc))
        if self.total > self.budget:
            raise ValueError(
                f"the document's schemas expand to more than {self.budget:,} values in all (the most is "
                f"{MAX_DOCUMENT_EXPANDED_VALUES:,}, or {DOCUMENT_EXPANSION} times the document's own values): its "
                "$refs repeat too often across its operations"
            )


def _count_values(doc: Any) -> int:
    """The values (objects, lists, scalars) of a decoded document; iterative."""
    stack, count = [doc], 0
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
