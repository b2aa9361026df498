"""Vector indexes are managed from Python, outside write transactions, and named with their dimension.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Dropping an index inside a write transaction locks the whole shared vector table (ACCESS EXCLUSIVE) until commit,
so a bulk import into one catalog stalled routes of every other catalog. toolstore now builds and drops a
catalog's HNSW indexes with CREATE/DROP INDEX CONCURRENTLY after (or before) its write transactions, which
plpgsql functions cannot do: ``ensure_vector_indexes`` and ``drop_vector_indexes`` go. Index names carry the
dimension (``tool_vectors_hnsw_<catalog>_<dim>``) so a model switch can build the new index before dropping the old.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

RENAME = """
do $$
declare
    c record;
begin
    for c in select id, embed_dim from catalogs where embed_dim is not null loop
        execute format('alter index if exists %I rename to %I',
                       'tool_vectors_hnsw_' || c.id, 'tool_vectors_hnsw_' || c.id || '_' || c.embed_dim);
        execute format('alter index if exists %I rename to %I',
                       'intent_examples_hnsw_' || c.id, 'intent_examples_hnsw_' || c.id || '_' || c.embed_dim);
    end loop;
end
$$;
"""

RENAME_BACK = """
do $$
declare
    c record;
begin
    for c in select id, embed_dim from catalogs where embed_dim is not null loop
        execute format('alter index if exists %I rename to %I',
                       'tool_vectors_hnsw_' || c.id || '_' || c.embed_dim, 'tool_vectors_hnsw_' || c.id);
        execute format('alter index if exists %I rename to %I',
                       'intent_examples_hnsw_' || c.id || '_' || c.embed_dim, 'intent_examples_hnsw_' || c.id);
    end loop;
end
$$;
"""

# As revision 0001 created them.
FUNCTIONS_0001 = """
create function ensure_vector_indexes(p_catalog integer) returns void
language plpgsql set search_path from current as $$
declare
    dim integer;
begin
    select embed_dim into dim from catalogs where id = p_catalog;
    execute format('drop index if exists %I', 'tool_vectors_hnsw_' || p_catalog);
    execute format('drop index if exists %I', 'intent_examples_hnsw_' || p_catalog);
    if dim is not null then
        execute format(
            'create index %I on tool_vectors using hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'where catalog_id = %s and vector_dims(embedding) = %s',
            'tool_vectors_hnsw_' || p_catalog, dim, p_catalog, dim);
        execute format(
            'create index %I on intent_examples using hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'where catalog_id = %s and vector_dims(embedding) = %s',
            'intent_examples_hnsw_' || p_catalog, dim, p_catalog, dim);
    end if;
end
$$;

create function drop_vector_indexes(p_catalog integer) returns void
language plpgsql set search_path from current as $$
begin
    execute format('drop index if exists %I', 'tool_vectors_hnsw_' || p_catalog);
    execute format('drop index if exists %I', 'intent_examples_hnsw_' || p_catalog);
end
$$;
"""


def upgrade() -> None:
    op.execute("drop function if exists ensure_vector_indexes(integer), drop_vector_indexes(integer)")
    op.execute(RENAME)


def downgrade() -> None:
    op.execute(RENAME_BACK)
    op.execute(FUNCTIONS_0001)
