"""knn() without a usable HNSW index searches exactly: full-precision distances, ties by tool pk.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-27

A catalog's partition of a vector table gets an HNSW index from ``HNSW_MIN_ROWS`` (2,000) rows on
(``toolstore/_indexes.py``); below that, and while a bulk load has dropped it or a killed build left it invalid, knn()
ran its HNSW statement without the index: a scan of the partition sorted by the index's expression, each vector cast
to halfvec. That order is not the exact one (halfvec rounding reorders near neighbours at the cut, and ties fell in
no set order: another row set than exact search for 1 request in 100 on metatool's 199 tools, 1 in 5 on
bfcl_sessions' 679 intent examples), and the casts made it slower than exact search (``python bench/knn_recall.py``:
10.3-12.5 against 2.3-2.6 ms over seal_tools' 4,076 tool vectors, 2.7-4.3 against 1.6-2.0 ms over metatool's 2,017
intent examples, 0.95-1.06 against 0.59-0.68 ms over bfcl_sessions' 679; the route statement with the old knn() took
1.05-1.27x as long at 199 to 1,900 tools, ``bench/route.py --variants bench/knn_0016.sql``). knn() now looks the
catalog's index up (its name, ``_indexes.index_name``'s, and whether it is valid) and, without one, computes every
vector's full-precision distance, sorted with the tool pk as tie-breaker: the exact neighbours, the same rows from
every build of the same catalog. A filter's kept or dropped set that would have taken the iterative HNSW scan is
tested in the same exact scan. With the index, nothing changed.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# Migrations 0014 (its helpers) and 0016 (knn() as it wrote it), run from their paths (a module name cannot start with a
# digit): the definition this one edits is read from where it was written, and restored from there by the downgrade.
R0014 = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("0014_filtered_routes.py"))))
KNN_0016 = R0014.earlier("0016_dropped_sets.py").KNN

UNFILTERED_0016 = """    if p_kept is null then
        return query execute format("""

# First the kept set's exact path (by key), unchanged; then, without a valid HNSW index of the catalog's partition for
# this dimension, the exact scan; else the HNSW statements of 0016.
EXACT = (
    """    if p_kept is not null and not coalesce(p_dropped, false) and cardinality(p_kept) <= 2000 then
        -- Exact: one key lookup per kept tool (a lateral subquery that OFFSET 0 keeps from being flattened), and the
        -- distances sorted above it. Flattened into a join ordered by the distance, the planner was free to answer
        -- the order with the catalog's HNSW index (ef_search rows of the whole catalog, the kept set joined
        -- afterwards) or to scan the whole table for a hash join (vector_dims()'s default selectivity hides the rows).
        return query execute format(
            'select s.tool_pk, s.distance from unnest($3::bigint[]) k (pk) '
            'cross join lateral (select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v where v.catalog_id = %2$s and v.tool_pk = k.pk and vector_dims(v.embedding) = %1$s '
            'offset 0) s '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept;
        return;
    end if;
    if not exists (select 1 from pg_index i
                   where i.indexrelid = to_regclass(format('%I', p_table || '_hnsw_' || p_catalog || '_' || p_dim))
                     and i.indisvalid) then
        -- No HNSW index to search (a partition under HNSW_MIN_ROWS rows, an index a bulk load dropped or a killed
        -- build left invalid): exact, every vector's full-precision distance, ties by tool pk. Ordered by the index's
        -- halfvec expression instead, the scan cast every vector and its order was not the exact one.
        return query execute format(
            'select v.tool_pk, (v.embedding::vector(%1$s) <=> $1)::double precision as distance '
            'from %3$I v where v.catalog_id = %2$s and vector_dims(v.embedding) = %1$s '
            'and ($3::bigint[] is null or (v.tool_pk in (select unnest($3::bigint[]))) <> $4) '
            'order by 2, 1 limit $2', p_dim, p_catalog, p_table)
        using p_query, p_limit, p_kept, coalesce(p_dropped, false);
        return;
    end if;
"""
    + UNFILTERED_0016
)

KEPT_0016 = """    elsif not coalesce(p_dropped, false) and cardinality(p_kept) <= 2000 then
"""
KNN = R0014.function_statement(
    R0014.edited(
        R0014.edited(KNN_0016, UNFILTERED_0016, EXACT),
        KEPT_0016 + KNN_0016.split(KEPT_0016)[1].split("    else\n")[0],  # the kept set's path, moved up
        "",
    ),
    "knn",
)


def upgrade() -> None:
    op.execute(KNN)


def downgrade() -> None:
    op.execute(R0014.function_statement(KNN_0016, "knn"))
