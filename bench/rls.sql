-- Row-level security cost (issue 13): the unchanged route statement, run as a role granted the bench catalog
-- read-only, so every table it reads applies its policy (migration 0005).
-- Run: python bench/route.py --variants bench/control.sql,bench/rls.sql

-- name: setup
do $$ begin create role bench_reader; exception when duplicate_object then null; end $$;
grant usage on schema toolstore to bench_reader;
grant select on all tables in schema toolstore to bench_reader;
insert into catalog_grants (catalog_id, role) select id, 'bench_reader' from catalogs where name = 'bench'
on conflict do nothing;
set role bench_reader
