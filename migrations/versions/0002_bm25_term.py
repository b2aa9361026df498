"""One BM25 formula: ``bm25_term()``, the score of one query term in one field of one tool.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Every statement that scores BM25 (``sql/route.sql``, ``sql/eval.sql``, the tests' reference blocks) calls this
function, so the formula is written once. It is a plain ``language sql`` expression, immutable, not strict and
without ``SET`` options, so the planner inlines it into the calling statement (a function call per posting would
cost more than the arithmetic).

    idf = ln(1 + (N - df + 0.5) / (df + 0.5))
    bm25_term = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),  k1 = 1.2, b = 0.75
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create function bm25_term(tf float8, dl float8, df float8, n float8, avgdl float8) returns float8
        language sql immutable parallel safe
        return ln(1 + (n - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
        """
    )


def downgrade() -> None:
    op.execute("drop function if exists bm25_term(float8, float8, float8, float8, float8)")
