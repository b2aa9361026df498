-- Variant (ten50): the intent depth before stop 50, 120 nearest intent examples at k 10 (3 per over-fetched candidate,
-- toolstore/_fusion.py EXAMPLES_PER_CANDIDATE; now 2, so 80), knn()'s ef_search 120 with it. The rows differ by
-- design; bench/PROFILE.md ("The intent depth") has the runs and the train quality of both. Run:
-- python bench/route.py --sizes 10000 --requests 200 --no-import --variants bench/intent_120.sql

-- name: params
{"n_examples": 120}
