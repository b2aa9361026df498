"""Vectors stay in their rows: ``embedding`` of tool_vectors and intent_examples is stored MAIN, not EXTERNAL.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-27

pgvector's ``vector`` type is stored EXTERNAL by default: when a row passes Postgres' TOAST threshold (about 2 kB),
the largest out-of-line-able value moves to the TOAST table first, and a 384-dimension vector (1,544 bytes) is larger
than most texts. So an intent example longer than about 450 characters had its vector moved out of its row, and every
search that reads it (exact k-NN below ``HNSW_MIN_ROWS``, a filtered route's vectors read by key, the distances of
the rows an HNSW scan returns, the index build) fetched it from the TOAST table first: exact k-NN over seal_tools'
intent examples (a quarter of them that long) took 11.5-12.7 ms against 2.4 ms over its 4,076 tool vectors
(bench/PROFILE.md, "Exact k-NN below the HNSW threshold"). Stored MAIN, a vector leaves its row only as the last
resort, when the row would not fit a page otherwise; the text is compressed and moved first.

Existing rows keep their layout until they are written again: ``VACUUM FULL intent_examples`` (an exclusive lock while
it runs) or re-embedding the catalog rewrites them. New catalogs' partitions copy the parents' storage
(``create_vector_partitions()``: ``like ... including storage``); ALTER on the parents reaches the existing partitions.
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# create_vector_partitions() as migration 0009 wrote it, but for the partitions' columns, which now copy the parents'
# storage (`including storage`): without it a new catalog's partitions would store vectors as the type's default.
PARTITIONS = """
create or replace function create_vector_partitions(p_catalog integer) returns void
language plpgsql set search_path from current as $$
declare
    t text;
begin
    foreach t in array array['tool_vectors', 'intent_examples'] loop
        execute format('create table if not exists %I (like %I including storage)', t || '_c' || p_catalog, t);
        if not exists (select 1 from pg_inherits where inhrelid = (t || '_c' || p_catalog)::regclass) then
            execute format('alter table %I attach partition %I for values in (%s)', t, t || '_c' || p_catalog,
                           p_catalog);
        end if;
        execute format('alter table %I enable row level security', t || '_c' || p_catalog);
    end loop;
end
$$;
"""

UPGRADE = (
    """
alter table tool_vectors alter column embedding set storage main;
alter table intent_examples alter column embedding set storage main;
"""
    + PARTITIONS
)

DOWNGRADE = """
alter table tool_vectors alter column embedding set storage external;
alter table intent_examples alter column embedding set storage external;
""" + PARTITIONS.replace("(like %I including storage)", "(like %I)")


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
