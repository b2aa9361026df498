-- Scratch A/A control (as of commit 853ea84): the unchanged route statement on the variant's own fresh
-- connection. Any difference from the baseline here is connection/ordering bias, not a lever.
-- Run: python bench/route.py --variants bench/control.sql,...

-- name: setup
select 1
