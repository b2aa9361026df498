-- Scratch variant (as of commit 853ea84): the same route statement, but the session lets Postgres reuse a generic
-- plan of the prepared statement (psycopg prepares it after 5 executions) instead of re-planning every call
-- (the pool sets plan_cache_mode = force_custom_plan). HNSW plans are not affected: they are made inside knn()
-- by dynamic SQL, which is always planned with its actual values.
-- Run: python bench/route.py --variants bench/generic_plan.sql

-- name: setup
set plan_cache_mode = force_generic_plan
