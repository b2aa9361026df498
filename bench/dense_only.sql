-- Breakdown variant (perf48): the route statement with the dense retriever alone (the BM25 fields' and intent's weights 0).
-- Not a lever: its rows differ by design, so read only its time (wall and the backend's CPU) against the full
-- statement's; bench/PROFILE.md ("The 10k statement by backend CPU") has a run. Run:
-- python bench/route.py --sizes 10000 --no-import --variants bench/lexical_only.sql,bench/dense_only.sql,bench/intent_only.sql,bench/no_retrievers.sql

-- name: params
{"w_name": 0.0, "w_description": 0.0, "w_expansion": 0.0, "w_intent": 0.0}
