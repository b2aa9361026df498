-- Scratch variant (k100): the thresholds for bm25_top() before stop 46 (toolstore/_route.py HEAVY_POSTINGS,
-- HEAVY_SHARE were 20,000 and 0.4). The same rows by construction; bench/PROFILE.md ("The 100k statement by backend
-- CPU") has the runs. Run: python bench/route.py --sizes 100000 --no-import --variants bench/heavy_20k.sql

-- name: params
{"heavy_postings": 20000, "heavy_share": 0.4}
