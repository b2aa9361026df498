"""An independent description of toolstore's tables (SQLAlchemy), which the migrations must reproduce.

The migrations are the source of truth and toolstore itself never uses this: ``test_migrations`` runs alembic's
``compare_metadata`` between a migrated database and these tables and expects no difference, so a migration that
changes a table without the change being written down here too fails. Per-catalog HNSW indexes are created at run
time and are not here.
"""

from __future__ import annotations

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOUBLE_PRECISION, JSON, JSONB, REAL, TIMESTAMP, TSVECTOR

metadata = MetaData()


def _timestamps() -> list[Column]:
    return [
        Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
        Column("updated_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    ]


catalogs = Table(
    "catalogs",
    metadata,
    Column("id", Integer, Identity(always=True), primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("embed_model", Text),
    Column("embed_dim", Integer),
    Column("settings", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    *_timestamps(),
    Column("version", BigInteger, nullable=False, server_default=text("1")),
    CheckConstraint("embed_dim > 0"),
)

tools = Table(
    "tools",
    metadata,
    Column("pk", BigInteger, Identity(always=True), nullable=False),
    Column("catalog_id", Integer, ForeignKey("catalogs.id", ondelete="CASCADE"), nullable=False),
    Column("id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("title", Text),
    Column("provider", Text),
    Column("description", Text, nullable=False, server_default=""),
    Column("parameters", JSONB),
    Column("categories", ARRAY(Text), nullable=False, server_default="{}"),
    Column("tags", ARRAY(Text), nullable=False, server_default="{}"),
    Column("keywords", ARRAY(Text), nullable=False, server_default="{}"),
    Column("examples", ARRAY(Text), nullable=False, server_default="{}"),
    Column("expansion", Text, nullable=False, server_default=""),
    Column("avoid_when", Text, nullable=False, server_default=""),
    Column("always_on", Boolean, nullable=False, server_default=text("false")),
    Column("spec", JSONB),
    Column("parameters_json", JSON),
    Column("spec_json", JSON),
    Column("content_hash", Text, nullable=False),
    Column("name_doc", Text, nullable=False, server_default=""),
    Column("description_doc", Text, nullable=False, server_default=""),
    Column("expansion_doc", Text, nullable=False, server_default=""),
    Column("upstream", Text),  # the MCP upstream (its provider) that synced the tool; null: imported
    Column("name_tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, name_doc)", persisted=True)),
    Column("description_tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, description_doc)", persisted=True)),
    Column("expansion_tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, expansion_doc)", persisted=True)),
    Column("avoid_tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, avoid_when)", persisted=True)),
    *_timestamps(),
    PrimaryKeyConstraint("catalog_id", "pk", name="tools_pkey"),
    UniqueConstraint("catalog_id", "id", name="tools_catalog_id_id_key"),
    Index("tools_always_on_idx", "catalog_id", postgresql_where=text("always_on")),
    Index("tools_avoid_idx", "catalog_id", postgresql_where=text("avoid_when <> ''::text")),
    Index("tools_lower_id_idx", "catalog_id", func.lower(text("id"))),
    Index("tools_lower_name_idx", "catalog_id", func.lower(text("name"))),
    Index("tools_call_name_idx", "catalog_id", func.call_key(text("name"))),
    Index("tools_call_id_idx", "catalog_id", func.call_key(text("id"))),
    Index("tools_filter_idx", "catalog_id", "provider", postgresql_include=["pk", "id", "categories", "tags"]),
    Index("tools_categories_idx", "categories", postgresql_using="gin"),
    Index("tools_tags_idx", "tags", postgresql_using="gin"),
)

# The BM25 statistics are derived data kept by triggers: no foreign keys (migration 0007).
postings = Table(
    "postings",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("field", SmallInteger, nullable=False),
    Column("lexeme", Text, nullable=False),
    Column("tool_pk", BigInteger, nullable=False),
    Column("tf", Integer, nullable=False),
    Column("dl", Integer, nullable=False),
    Column("impact", REAL, Computed("bm25_impact(field, tf, dl)", persisted=True), nullable=False),
    PrimaryKeyConstraint("catalog_id", "field", "lexeme", "impact", "tool_pk", name="postings_pkey"),
)

lexeme_stats = Table(
    "lexeme_stats",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("field", SmallInteger, nullable=False),
    Column("lexeme", Text, nullable=False),
    Column("df", Integer, nullable=False),
    PrimaryKeyConstraint("catalog_id", "field", "lexeme", name="lexeme_stats_pkey"),
)

field_stats = Table(
    "field_stats",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("field", SmallInteger, nullable=False),
    Column("n", Integer, nullable=False),
    Column("total_len", BigInteger, nullable=False),
    PrimaryKeyConstraint("catalog_id", "field", name="field_stats_pkey"),
)

tool_vectors = Table(
    "tool_vectors",
    metadata,
    Column("tool_pk", BigInteger, nullable=False),
    Column("catalog_id", Integer, nullable=False),
    Column("embedding", Vector(), nullable=False),
    PrimaryKeyConstraint("catalog_id", "tool_pk", name="tool_vectors_pkey"),
    ForeignKeyConstraint(
        ["catalog_id", "tool_pk"], ["tools.catalog_id", "tools.pk"], ondelete="CASCADE", name="tool_vectors_tool_fkey"
    ),
)

intent_examples = Table(
    "intent_examples",
    metadata,
    Column("pk", BigInteger, Identity(always=True), nullable=False),
    Column("catalog_id", Integer, nullable=False),
    Column("tool_pk", BigInteger, nullable=False),
    Column("query", Text, nullable=False),
    Column("embedding", Vector()),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("catalog_id", "pk", name="intent_examples_pkey"),
    UniqueConstraint("catalog_id", "tool_pk", "query", name="intent_examples_tool_query_key"),
    ForeignKeyConstraint(
        ["catalog_id", "tool_pk"],
        ["tools.catalog_id", "tools.pk"],
        ondelete="CASCADE",
        name="intent_examples_tool_fkey",
    ),
)

embedding_cache = Table(
    "embedding_cache",
    metadata,
    Column("model", Text, nullable=False),
    Column("text_sha256", LargeBinary, nullable=False),
    Column("embedding", Vector(), nullable=False),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("model", "text_sha256", name="embedding_cache_pkey"),
)

mcp_upstreams = Table(
    "mcp_upstreams",
    metadata,
    Column("catalog_id", Integer, ForeignKey("catalogs.id", ondelete="CASCADE"), nullable=False),
    Column("provider", Text, nullable=False),
    Column("transport", Text, nullable=False),
    Column("command", Text),
    Column("args", ARRAY(Text), nullable=False, server_default="{}"),
    Column("env", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("url", Text),
    Column("headers", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("updated_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("catalog_id", "provider", name="mcp_upstreams_pkey"),
    CheckConstraint("transport in ('stdio', 'http')"),
    CheckConstraint(
        "(transport = 'stdio' and command is not null) or (transport = 'http' and url is not null)",
        name="mcp_upstreams_target_check",
    ),
)

catalog_grants = Table(
    "catalog_grants",
    metadata,
    Column("catalog_id", Integer, ForeignKey("catalogs.id", ondelete="CASCADE"), nullable=False),
    Column("role", Text, nullable=False),
    Column("can_write", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("catalog_id", "role", name="catalog_grants_pkey"),
)

tenant_roles = Table(
    "tenant_roles",
    metadata,
    Column("role", Text, nullable=False),
    Column("can_write", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("role", name="tenant_roles_pkey"),
)

sessions = Table(
    "sessions",
    metadata,
    Column("catalog_id", Integer, ForeignKey("catalogs.id", ondelete="CASCADE"), nullable=False),
    Column("session_id", Text, nullable=False),
    Column("last_seq", BigInteger, nullable=False, server_default=text("0")),
    *_timestamps(),
    Column("last_call_id", Text),  # unused since migration 0024 (the previous release's, for a rolling upgrade)
    Column("seen_calls", ARRAY(BigInteger), nullable=False, server_default="{}"),
    Column("reported_calls", ARRAY(BigInteger), nullable=False, server_default="{}"),
    PrimaryKeyConstraint("catalog_id", "session_id", name="sessions_pkey"),
)

session_calls = Table(
    "session_calls",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("tool_id", Text, nullable=False),
    Column("ok", Boolean, nullable=False, server_default=text("true")),
    Column("called_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    Column("call_id", Text),
    PrimaryKeyConstraint("catalog_id", "session_id", "seq", name="session_calls_pkey"),
    UniqueConstraint("catalog_id", "session_id", "call_id", name="session_calls_call_id_key"),
    ForeignKeyConstraint(
        ["catalog_id", "session_id"],
        ["sessions.catalog_id", "sessions.session_id"],
        name="session_calls_session_fkey",
        ondelete="CASCADE",
    ),
    CheckConstraint("seq > 0"),
    Index("session_calls_called_at_idx", "catalog_id", "called_at"),
)

session_seen_calls = Table(
    "session_seen_calls",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("call_hash", BigInteger, nullable=False),
    Column("called_at", TIMESTAMP(timezone=True), nullable=False),
    PrimaryKeyConstraint("catalog_id", "session_id", "seq", name="session_seen_calls_pkey"),
    ForeignKeyConstraint(
        ["catalog_id", "session_id"],
        ["sessions.catalog_id", "sessions.session_id"],
        name="session_seen_calls_session_fkey",
        ondelete="CASCADE",
    ),
    CheckConstraint("seq > 0"),
    Index("session_seen_calls_hash_idx", "catalog_id", "session_id", "call_hash"),
)

tool_transitions = Table(
    "tool_transitions",
    metadata,
    Column("catalog_id", Integer, ForeignKey("catalogs.id", ondelete="CASCADE"), nullable=False),
    Column("prev_tool", Text, nullable=False),
    Column("next_tool", Text, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("catalog_id", "prev_tool", "next_tool", name="tool_transitions_pkey"),
    CheckConstraint("n >= 0"),
)

anchors = Table(
    "anchors",
    metadata,
    Column("catalog_id", Integer, nullable=False),
    Column("pk", BigInteger, Identity(always=True), nullable=False),
    Column("tool_pk", BigInteger, nullable=False),
    Column("pattern", Text, nullable=False),
    Column("boost", DOUBLE_PRECISION, nullable=False),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("catalog_id", "pk", name="anchors_pkey"),
    UniqueConstraint("catalog_id", "tool_pk", "pattern", name="anchors_tool_pattern_key"),
    ForeignKeyConstraint(
        ["catalog_id", "tool_pk"], ["tools.catalog_id", "tools.pk"], ondelete="CASCADE", name="anchors_tool_fkey"
    ),
    CheckConstraint("char_length(pattern) between 1 and 500"),
    CheckConstraint("boost between -10 and 10 and boost <> 0"),
)
