"""HNSW indexes on halfvec at every width: neighbours as good, found faster, from an index half the size.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

``vector_index_type()`` (migration 0011, the one home of the rule) now answers ``halfvec`` up to 4,000 dimensions,
no longer ``vector`` up to 2,000. Each catalog's HNSW index is built on ``embedding::halfvec(dim)``, and ``knn()``,
which orders by the same expression, searches it. The distances ``knn()`` returns are still computed from the stored
full-precision vectors, so only which candidates the graph visits can change. Measured at 10k tools and 30k intent
examples (bench/PROFILE.md, "HNSW on halfvec"): the route statement 9.2 against 10.4 ms p50, top-10 overlap .993;
the k-NN searches' recall against exact search the same.

The upgrade rebuilds every existing HNSW index of a vector table's partition on halfvec, and the downgrade rebuilds
those up to 2,000 dimensions on vector again. Both run in the migration's transaction and hold the partitions while
they build, for a time that grows with the vectors indexed: 6.0-6.3 s up and 8.1-9.2 s down for a catalog of 10k
tools and 30k intent examples (384 dimensions) on this project's machine.
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

INDEX_TYPE = """
create or replace function vector_index_type(p_dim integer) returns text
language sql immutable parallel safe
return case when p_dim <= 4000 then 'halfvec' end;
"""

INDEX_TYPE_0011 = """
create or replace function vector_index_type(p_dim integer) returns text
language sql immutable parallel safe
return case when p_dim <= 2000 then 'vector' when p_dim <= 4000 then 'halfvec' end;
"""

# Every HNSW index of a vector table's partition (named <table>_hnsw_<catalog>_<dim>, as toolstore._indexes names
# them) not yet on the type vector_index_type() gives its dimension: dropped and built again on that type, with the
# parameters toolstore._indexes builds it with.
REBUILD = """
do $$
declare
    r record;
begin
    for r in
        select ic.relname as name, c.relname as partition, substring(ic.relname from '_([0-9]+)$')::integer as dim,
               o.opcname
        from pg_index i
        join pg_class ic on ic.oid = i.indexrelid
        join pg_class c on c.oid = i.indrelid
        join pg_opclass o on o.oid = i.indclass[0]
        where c.relnamespace = current_schema()::regnamespace
          and c.relname ~ '^(tool_vectors|intent_examples)_c[0-9]+$'
          and ic.relname ~ '_hnsw_[0-9]+_[0-9]+$'
    loop
        continue when r.opcname = vector_index_type(r.dim) || '_cosine_ops';
        execute format('drop index %I', r.name);
        continue when vector_index_type(r.dim) is null;
        execute format('create index %1$I on %2$I using hnsw ((embedding::%3$s(%4$s)) %3$s_cosine_ops) '
                       'with (m = 16, ef_construction = 64) where vector_dims(embedding) = %4$s',
                       r.name, r.partition, vector_index_type(r.dim), r.dim);
    end loop;
end
$$;
"""


def upgrade() -> None:
    op.execute(INDEX_TYPE)
    op.execute(REBUILD)


def downgrade() -> None:
    op.execute(INDEX_TYPE_0011)
    op.execute(REBUILD)
