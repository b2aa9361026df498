"""What to run to finish what a write left undone (an HNSW index not built, one or a partition only a concurrent drop
removes): each said here once, naming the library's call and the command line's, since a warning or an error's note
reaches the user of either."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

#: The ``--dsn`` a remedy behind a transaction pooler names: the database's own address, not the pooler's.
DIRECT_DSN = "DIRECT_DSN"


def reimport(catalog: str, dsn: str = "") -> str:
    """The command line's write of a catalog that changes no tool: an import of its own tools, exported with their ids
    (an empty file is refused; an export without --with-metadata does not give their ids back); on ``dsn`` if given."""
    on, name = f"--dsn {dsn} " if dsn else "", shlex.quote(catalog)
    return f"toolstore {on}-c {name} export --with-metadata -o FILE, then toolstore {on}-c {name} import FILE"


def rebuild(catalog: str) -> str:
    """How a catalog's HNSW indexes are built again after a failed bulk write could not build them."""
    return (
        "the catalog's next write builds them (ToolStore.upsert([]) will do; on the command line, importing its own "
        f"tools again: {reimport(catalog)})"
    )


def owner_builds(catalog: str) -> str:
    """What the owner of toolstore's tables runs to build an index a writer without ownership could not."""
    return (
        "any write to the catalog as the owner of toolstore's tables builds it (ToolStore.upsert([]) will do; on the "
        f"command line, as that role: {reimport(catalog)})"
    )


def left_behind_pooler(catalog: str, left: Sequence[str]) -> str:
    """What a write behind a transaction pooler leaves of a catalog's indexes (``left``), and what drops them."""
    return (
        f"catalog {catalog!r}: HNSW index(es) {', '.join(left)} left (of another dimension, on a table grown small, or "
        "invalid: dense retrieval then searches exactly): behind a transaction pooler (transaction_pooling=True) none "
        "is dropped, as only DROP INDEX CONCURRENTLY spares other catalogs' routes; a write to the catalog on a direct "
        f"DSN (transaction_pooling=False: ToolStore(direct_dsn, catalog={catalog!r}).upsert([]); on the command line, "
        f"without --transaction-pooling: {reimport(catalog, DIRECT_DSN)}) drops them and builds an invalid one again"
    )


def partitions_behind_pooler(left: Sequence[str]) -> str:
    """What a drop_catalog behind a transaction pooler leaves (the partitions ``left``), and what drops them."""
    return (
        f"{len(left)} emptied vector partition(s) of dropped catalogs left ({', '.join(left)}): behind a transaction "
        "pooler (transaction_pooling=True) they are not detached, as only DETACH PARTITION CONCURRENTLY spares every "
        "other catalog's routes; they cost routes nothing, and the next drop_catalog on a direct DSN "
        f"(transaction_pooling=False; on the command line, toolstore --dsn {DIRECT_DSN} drop-catalog NAME, without "
        "--transaction-pooling) drops them"
    )


def partitions_left(name: str) -> str:
    """What a drop leaves when a dropped catalog's detached partition ``name`` (and those after it) never got its lock
    on ``tools`` (``_indexes.drop_partitions``), and what drops them."""
    return (
        f"the emptied vector partition {name} of a dropped catalog (and any after it) is left: other transactions kept "
        "using the tools table, whose lock dropping it takes (waiting for that lock would stall every route); they "
        "cost routes nothing, and the next drop_catalog (toolstore drop-catalog NAME) drops them"
    )
