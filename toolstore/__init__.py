"""toolstore: Postgres as the tool router for AI agents.

Import everything from here; the underscored modules are private.
"""

from ._abstain import DEFAULT_ABSTAIN, EXAMPLES_ABSTAIN, RANK_ABSTAIN, AbstainModel, Abstention
from ._agents import ResolvedCall, UnknownCall
from ._async_store import AsyncToolStore
from ._embedders.base import Embedder
from ._embedders.hashing import HashingEmbedder
from ._embedders.local import LocalEmbedder
from ._embedders.openai import OpenAIEmbedder
from ._embedders.static import StaticEmbedder
from ._errors import (
    DatabaseError,
    EmbedderError,
    EmbedderUnavailableError,
    ExpansionError,
    InvalidInputError,
    InvalidToolError,
    InvalidTypeError,
    McpSyncError,
    ModelMismatchError,
    SchemaAccessError,
    StatementTimeoutError,
    StoreClosedError,
    ToolstoreError,
    TransactionPoolingError,
    UnknownCatalogError,
    UnknownToolError,
    UnmatchedFilterError,
)
from ._examples import load_examples
from ._formats import export_catalog, load_tools_file, parse_tools, render, to_anthropic, to_mcp, to_openai
from ._fusion import SIGNALS, Fusion
from ._messages import Conversation, ToolCall, Turn, read_messages
from ._metrics import Judgement, LabelledSession, SessionTurn, load_judgements, load_sessions
from ._migrate import migrate
from ._models import Anchor, CatalogInfo, ImportReport, IntentExample, LoggedCall, SessionCall, Tool
from ._request import RouteCall
from ._result import RoutedTool, RouteResult, Signals
from ._store import ToolStore
from ._tune import TuneReport

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ABSTAIN",
    "EXAMPLES_ABSTAIN",
    "RANK_ABSTAIN",
    "SIGNALS",
    "AbstainModel",
    "Abstention",
    "Anchor",
    "AsyncToolStore",
    "CatalogInfo",
    "Conversation",
    "DatabaseError",
    "Embedder",
    "EmbedderError",
    "EmbedderUnavailableError",
    "ExpansionError",
    "Fusion",
    "HashingEmbedder",
    "ImportReport",
    "IntentExample",
    "InvalidInputError",
    "InvalidToolError",
    "InvalidTypeError",
    "Judgement",
    "LabelledSession",
    "LocalEmbedder",
    "LoggedCall",
    "McpSyncError",
    "ModelMismatchError",
    "OpenAIEmbedder",
    "ResolvedCall",
    "RouteCall",
    "RouteResult",
    "RoutedTool",
    "SchemaAccessError",
    "SessionCall",
    "SessionTurn",
    "Signals",
    "StatementTimeoutError",
    "StaticEmbedder",
    "StoreClosedError",
    "Tool",
    "ToolCall",
    "ToolStore",
    "ToolstoreError",
    "TransactionPoolingError",
    "TuneReport",
    "Turn",
    "UnknownCall",
    "UnknownCatalogError",
    "UnknownToolError",
    "UnmatchedFilterError",
    "export_catalog",
    "load_examples",
    "load_judgements",
    "load_sessions",
    "load_tools_file",
    "migrate",
    "parse_tools",
    "read_messages",
    "render",
    "to_anthropic",
    "to_mcp",
    "to_openai",
]

# Public names say they come from `toolstore` (reprs, tracebacks, docs), as httpx does for its private modules.
for _name in __all__:
    if callable(globals()[_name]):
        globals()[_name].__module__ = __name__
del _name
