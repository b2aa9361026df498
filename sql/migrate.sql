-- Migrations (`_migrate`): the schema and pgvector made before alembic runs, the search_path it runs with, and the
-- revision applied. The lock all of them take first is `migration_lock` (access.sql). `{name}` is an identifier,
-- composed by psycopg (`sql.Identifier`), never formatted in.

-- name: create_vector_extension
create extension if not exists vector;

-- name: schema_oid
-- The schema (a quoted identifier), or NULL when there is none.
select to_regnamespace(%(schema)s);

-- name: create_schema
create schema {schema};

-- name: search_path
select current_setting('search_path');

-- name: set_search_path
-- The search_path for the rest of the transaction (local).
select set_config('search_path', %(path)s, true);

-- name: version_table
-- alembic's version table (a qualified, quoted name), or NULL when the schema was never migrated.
select to_regclass(%(table)s);

-- name: version_num
select version_num from {table};

-- name: database_exists
-- The embedded server's database (`_embedded`), made once.
select 1 from pg_database where datname = %(name)s;

-- name: create_database
create database {name};

-- name: migrating_as
-- Who migrates where, named by the errors of a role that may not create pgvector or the schema.
select current_user::text, current_database()::text;
