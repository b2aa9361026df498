-- Variant: the route statement planned afresh on every call (plan_cache_mode = force_custom_plan). The pool runs every
-- statement on its generic plan (toolstore/_connect.py); Postgres' default (auto) re-plans this statement every call.
-- Run: python bench/route.py --sizes 10000 --no-import --variants bench/custom_plan.sql

-- name: setup
set plan_cache_mode = force_custom_plan
