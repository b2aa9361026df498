"""toolstore: Postgres as the tool router for AI agents.

Import everything from here; the underscored modules are private.
"""

from ._catalog import CatalogInfo, ImportReport
from ._embedders.base import Embedder
from ._embedders.hashing import HashingEmbedder
from ._errors import (
    DatabaseError,
    EmbedderError,
    InvalidInputError,
    InvalidToolError,
    ModelMismatchError,
    ToolstoreError,
    UnknownCatalogError,
    UnknownToolError,
)
from ._examples import load_examples
from ._formats import export_catalog, load_tools_file, parse_tools, render, to_anthropic, to_mcp, to_openai
from ._metrics import Judgement, load_judgements
from ._migrate import migrate
from ._models import IntentExample, RoutedTool, RouteResult, Signals, Tool
from ._store import ToolStore
from ._tune import TuneReport

__version__ = "0.1.0"

__all__ = [
    "CatalogInfo",
    "DatabaseError",
    "Embedder",
    "EmbedderError",
    "HashingEmbedder",
    "ImportReport",
    "IntentExample",
    "InvalidInputError",
    "InvalidToolError",
    "Judgement",
    "ModelMismatchError",
    "RouteResult",
    "RoutedTool",
    "Signals",
    "Tool",
    "ToolStore",
    "ToolstoreError",
    "TuneReport",
    "UnknownCatalogError",
    "UnknownToolError",
    "export_catalog",
    "load_examples",
    "load_judgements",
    "load_tools_file",
    "migrate",
    "parse_tools",
    "render",
    "to_anthropic",
    "to_mcp",
    "to_openai",
]
