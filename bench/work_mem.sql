-- Scratch variant (as of commit 853ea84): the same statement with work_mem = 32MB for the session (default 4MB).
-- At 100k tools a query's BM25 sort of ~100k (field, tool) rows spills to disk ("external merge Disk: 5.7MB").
-- Run: python bench/route.py --variants bench/work_mem.sql

-- name: setup
set work_mem = '32MB'
