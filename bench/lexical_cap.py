"""Bounded lexical retrieval on the shared query sets: each BM25 field's top 10 with ``lexical_cap`` vs exact BM25.

    python bench/lexical_cap.py [--caps 50,100,300,1000] [--sets metatool,seal_tools,gorilla_torch]

Imports each ../shared/bench/<set>/tools.jsonl into its own catalog (lexical only: no embedder), then for every
query of queries.jsonl runs the route statement once per BM25 field with that field's weight alone, exact and at
each cap (bench/route.py's lexical_overlap), and prints the mean top-10 overlap, the share of queries with a term
the cap cut and the longest posting list a query term has. The synthetic catalogs are measured by
``bench/route.py --lexical-caps``. Uses $TOOLSTORE_DSN's server or bench/route.py's embedded one.
"""

from __future__ import annotations

import argparse
import json

from _harness import BENCH, admin_dsn, fresh_database, log
from _measure import lexical_overlap

from toolstore import ToolStore, load_tools_file
from toolstore._fusion import stored_fusion
from toolstore._route import route_request, statement_params
from toolstore._sql import query
from toolstore._text import query_text

SHARED = BENCH.parent.parent / "shared" / "bench"

LONGEST = """
select coalesce(max(df), 0) from lexeme_stats
where catalog_id = %(catalog)s and field <= 3 and lexeme = any (tsvector_to_array(to_tsvector('english', %(q)s)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", default="50,100,300,1000")
    parser.add_argument("--sets", default="metatool,seal_tools,gorilla_torch")
    args = parser.parse_args()
    caps = [int(c) for c in args.caps.split(",")]
    dsn = fresh_database(admin_dsn(), "bench_lexical_cap")
    print(f"| set | tools | queries | longest posting list of a query term (max) | {' | '.join(map(str, caps))} |")
    print(f"|---|---|---|---|{'---|' * len(caps)}")
    for name in args.sets.split(","):
        folder = SHARED / name
        with ToolStore(dsn, embedder=None, catalog=name) as store:
            store.upsert(load_tools_file(folder / "tools.jsonl"))
            store.analyze()
            info = store.info()
            fusion = stored_fusion(info.settings)
            texts = [json.loads(line)["query"] for line in (folder / "queries.jsonl").open()]
            params = [statement_params(info, route_request(t, fusion, k=8), None) for t in texts]
            with store.connection() as conn:
                longest = [
                    conn.execute(LONGEST, {"catalog": info.id, "q": query_text(t)}).fetchone()[0]  # type: ignore[index]
                    for t in texts
                ]
                cells = []
                for cap in caps:
                    log(f"{name}: cap {cap}")
                    overlap = lexical_overlap(conn, params, query("route"), {"lexical_cap": cap})
                    cut = sum(d > cap for d in longest) / len(texts)
                    cells.append(f"{overlap:.4f} (cut {cut:.0%})")
        print(f"| {name} | {info.n_tools} | {len(texts)} | {max(longest)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
