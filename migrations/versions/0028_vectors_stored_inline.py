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

import runpy
from pathlib import Path
from types import SimpleNamespace

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# Migration 0014's helpers, run from its path (a module name cannot start with a digit): create_vector_partitions() is
# read from migration 0009, where it was written, and edited there; the downgrade restores it from there.
R0014 = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("0014_filtered_routes.py"))))
PARTITIONS_0009 = R0014.function_statement(
    R0014.earlier("0009_vector_partitions.py").PARTITIONED, "create_vector_partitions"
)
# A new catalog's partitions copy the parents' storage: without it they would store vectors as the type's default.
PARTITIONS = R0014.edited(PARTITIONS_0009, "(like %I)", "(like %I including storage)")

UPGRADE = """
alter table tool_vectors alter column embedding set storage main;
alter table intent_examples alter column embedding set storage main;
"""

DOWNGRADE = """
alter table tool_vectors alter column embedding set storage external;
alter table intent_examples alter column embedding set storage external;
"""


def upgrade() -> None:
    op.execute(UPGRADE + PARTITIONS)


def downgrade() -> None:
    op.execute(DOWNGRADE + PARTITIONS_0009)
