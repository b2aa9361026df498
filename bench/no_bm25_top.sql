-- Variant: the route statement with bm25_top() (migration 0017) switched off, every lexical field summed in the
-- statement itself. The same rows; compares the two ways' speed.
-- Run: python bench/route.py --sizes 10000,100000 --variants bench/no_bm25_top.sql

-- name: setup
select 1

-- name: params
{"heavy_postings": 1000000000}
