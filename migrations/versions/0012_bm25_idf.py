"""BM25's idf on its own: ``bm25_idf(df, n)``, which ``bm25_term()`` now calls.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24

The route statement computes each query term's idf once, beside its document frequency, and scores a posting as
``idf * bm25_tf(tf, dl, avgdl)``: the logarithm per posting was a sixth of the lexical work at 100k tools. The formula
is still written once: ``bm25_term(tf, dl, df, n, avgdl) = bm25_idf(df, n) * bm25_tf(tf, dl, avgdl)``, the same
operations in the same order, so a score is the same float either way. Both are plain ``language sql`` expressions the
planner inlines.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        create function bm25_idf(df float8, n float8) returns float8
        language sql immutable parallel safe
        return ln(1 + (n - df + 0.5) / (df + 0.5));

        create or replace function bm25_term(tf float8, dl float8, df float8, n float8, avgdl float8) returns float8
        language sql immutable parallel safe
        return bm25_idf(df, n) * bm25_tf(tf, dl, avgdl);
        """
    )


def downgrade() -> None:
    # bm25_term() as migration 0007 wrote it
    op.execute(
        """
        create or replace function bm25_term(tf float8, dl float8, df float8, n float8, avgdl float8) returns float8
        language sql immutable parallel safe
        return ln(1 + (n - df + 0.5) / (df + 0.5)) * bm25_tf(tf, dl, avgdl);

        drop function bm25_idf(float8, float8);
        """
    )
