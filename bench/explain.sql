-- Scratch: how bench/route.py's profiling was done (see PROFILE.md). Not a variant; run by hand.
-- EXPLAIN (ANALYZE, BUFFERS) of the route statement is run from Python with the bound parameters of a
-- benchmark query (statement_params), after a warm-up call:
--     explain (analyze, buffers, settings) <route statement>
-- knn()'s inner statements are traced with auto_explain at NOTICE level:
-- name: trace_knn
load 'auto_explain';
set auto_explain.log_min_duration = 0;
set auto_explain.log_nested_statements = on;
set auto_explain.log_analyze = on;
set auto_explain.log_buffers = on;
set auto_explain.log_level = notice;
