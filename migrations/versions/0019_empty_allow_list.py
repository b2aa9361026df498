"""An empty allow list keeps no tool in every part of the route statement.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26

Migration 0008's ``route_filter()`` turned the allow and block lists into LIKE patterns with ``array_agg``, which
gives null for an empty list, and null means "no allow filter" to ``route_keeps()``. ``route_kept()`` read the same
empty list as keeping nothing, so ``route(allow=[])`` dropped every tool from the retrievers while an exact name
match, an anchor, or a recent or transition call still let tools through. A list given, empty or not, now stays a
list (``tests/test_filters.py``); an empty block list blocks nothing, as before.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# Migration 0014, run from its path (a module name cannot start with a digit), for its helpers that read an earlier
# migration's definitions from where they were written.
R0014 = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("0014_filtered_routes.py"))))

ROUTE_FILTER_0008 = R0014.function_statement(R0014.earlier("0008_controls.py").FILTERS, "route_filter")

ROUTE_FILTER = R0014.edited(
    ROUTE_FILTER_0008,
    """    select row((select array_agg(glob_like(v)) from unnest(p_allow) v),
               (select array_agg(glob_like(v)) from unnest(p_block) v),""",
    """    select row(case when p_allow is not null then array(select glob_like(v) from unnest(p_allow) v) end,
               case when p_block is not null then array(select glob_like(v) from unnest(p_block) v) end,""",
)


def upgrade() -> None:
    op.execute(ROUTE_FILTER)


def downgrade() -> None:
    op.execute(ROUTE_FILTER_0008)
