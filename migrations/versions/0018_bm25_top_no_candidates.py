"""bm25_top() with no candidates returns no rows, not the unfiltered best n.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26

Migration 0017's ``bm25_top()`` scores its candidates with ``bm25_sums(..., candidates, false)``, where a null set
means "no filter". With a filter whose kept tools have none of the field's essential terms, the essential sums are
empty, ``array_agg`` makes the candidates null, and the last step summed every tool of the catalog: the route
statement's lexical list then held tools the filter leaves out (only where a field is heavy: at 100k tools). The
candidates are now an empty set when there are none (``tests/test_bm25_top.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def _revision_0014() -> ModuleType:
    """Migration 0014, loaded by its path (a module name cannot start with a digit), for its helpers that read an
    earlier migration's definitions from where they were written."""
    path = Path(__file__).with_name("0014_filtered_routes.py")
    spec = importlib.util.spec_from_file_location("toolstore_revision_0014", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R0014 = _revision_0014()

BM25_TOP_0017 = R0014.function_statement(R0014.earlier("0017_bm25_top.py").UPGRADE, "bm25_top")

BM25_TOP = R0014.edited(
    BM25_TOP_0017,
    "select array_agg(c.pk) into candidates",
    "select coalesce(array_agg(c.pk), '{}') into candidates",
)


def upgrade() -> None:
    op.execute(BM25_TOP)


def downgrade() -> None:
    op.execute(BM25_TOP_0017)
