-- Scratch variant: the route statement planned afresh on every call (plan_cache_mode = force_custom_plan, what the
-- pool set before commit 55554ef). Since 55554ef the baseline runs with Postgres' default (auto).
-- Run: python bench/route.py --variants bench/control.sql,bench/custom_plan.sql,bench/generic_plan.sql

-- name: setup
set plan_cache_mode = force_custom_plan
