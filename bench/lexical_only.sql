-- Breakdown variant (perf48): the route statement with the three BM25 fields alone (dense and intent weights 0).
-- Not a lever: its rows differ by design, so read only its time (wall and the backend's CPU) against the full
-- statement's; bench/PROFILE.md ("The 10k statement by backend CPU") has a run. Run:
-- python bench/route.py --sizes 10000 --no-import --variants bench/lexical_only.sql,bench/dense_only.sql,bench/intent_only.sql,bench/no_retrievers.sql

-- name: params
{"w_dense": 0.0, "w_intent": 0.0}
