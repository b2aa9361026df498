"""The data toolstore stores: tools, intent examples, catalogs, and what an import changed.

Annotations here are evaluated (no ``from __future__ import annotations``) so ``typing.get_type_hints`` works on
these classes after ``toolstore`` re-exports them under its own name.
"""

import hashlib
import json
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from ._errors import ModelMismatchError

#: The version of toolstore's JSON documents (the CLI's JSON output, ``find_tools``' answer): first field of each,
#: bumped when a field changes meaning or goes away.
JSON_VERSION = 1


@dataclass(frozen=True)
class Tool:
    """One callable tool, normalised from whatever format it was imported from.

    ``id`` is unique within a catalog; importers namespace it (``provider.name``) so that
    two servers offering a tool of the same ``name`` do not collide.
    """

    id: str
    name: str
    description: str = ""
    title: str | None = None
    provider: str | None = None
    parameters: dict[str, Any] | None = None
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    expansion: str = ""
    avoid_when: str = ""
    always_on: bool = False
    spec: dict[str, Any] | None = None

    def content_hash(self) -> str:
        """sha256 over every field, so an unchanged tool is recognised on re-import.

        Key order counts (a schema whose properties were reordered is a changed tool): models read schemas in order.
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict() would deep-copy
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class IntentExample:
    """A labelled user request: ``query`` should route to ``tool_id``."""

    tool_id: str
    query: str


@dataclass(frozen=True)
class SessionCall:
    """One tool call for a session's log: the tool (its id, or a name a model called it by), whether it succeeded,
    when it was made (None: now; a datetime with a time zone, at most ``_input.MAX_CLOCK_SKEW`` after the database's
    time) and the provider's call id (a call id already logged in the session is skipped)."""

    tool: str
    ok: bool = True
    at: datetime | None = None
    call_id: str | None = None


@dataclass(frozen=True)
class LoggedCall:
    """A call as the session log holds it: its position in the session (from 1) and the tool's id."""

    seq: int
    tool_id: str
    ok: bool
    at: datetime
    call_id: str | None = None


@dataclass(frozen=True)
class CatalogInfo:
    """A catalog's row: id, name, embedding model and dimension (None before the first vector), settings
    (the tuned fusion), the tool and example counts when asked for, and the row's version (it goes up with every
    change of model or settings; route() checks it to know its cached copy is current)."""

    id: int
    name: str
    embed_model: str | None
    embed_dim: int | None
    settings: dict[str, Any]
    n_tools: int = 0
    n_examples: int = 0
    version: int = 0

    def require_model(self, model: str) -> None:
        """Raise ModelMismatchError when the catalog is embedded with another model than ``model``."""
        if self.embed_model is not None and self.embed_model != model:
            raise ModelMismatchError(
                f"catalog {self.name!r} is embedded with {self.embed_model!r} but the embedder is {model!r}; "
                "use the same model or switch the catalog with `toolstore reembed --model ...`"
            )

    def require_dim(self, dim: int) -> None:
        """Raise ModelMismatchError when the catalog's vectors are of another width than ``dim``, its embedder's now
        (the same model name served at another dimension: a compatible server restarted so)."""
        if self.embed_dim is not None and self.embed_dim != dim:
            raise ModelMismatchError(
                f"catalog {self.name!r} is embedded with {self.embed_model!r} at {self.embed_dim} dimensions but the "
                f"embedder now returns {dim} (its server serves the model at another dimension?); switch the catalog "
                f"to them with `toolstore reembed --model {self.embed_model}`"
            )


@dataclass
class ImportReport:
    """What an import changed."""

    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    #: Tools given a vector the embedder computed: of the new and changed ones, and of any other tool of the catalog
    #: that had no vector.
    embedded: int = 0
    #: Tools given a vector from the embedding cache (a text of the model embedded before, by any catalog's write: a
    #: re-import of an export, a catalog's tools imported into another): nothing computed for them.
    cached: int = 0
    #: Changed tools of an embedded catalog written without an embedder: their old vectors were deleted, and they
    #: get new ones from the next upsert that has the catalog's embedder.
    unembedded: int = 0
    #: Intent examples added in the same transaction as the tools (``upsert(..., examples=...)``).
    examples: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "inserted": len(self.inserted),
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "removed": len(self.removed),
            "embedded": self.embedded,
            "cached": self.cached,
            "unembedded": self.unembedded,
            "examples": self.examples,
        }


@dataclass(frozen=True)
class Anchor:
    """A routing rule of a catalog: a request that ``pattern`` (a Postgres regular expression, case-insensitive)
    matches adds ``boost`` to tool ``tool``'s fused score (negative: lowers it). ``id`` is given by the store."""

    pattern: str
    tool: str
    boost: float = 1.0
    id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "pattern": self.pattern, "tool": self.tool, "boost": self.boost}
