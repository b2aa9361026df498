-- Connections: each pooled connection's session (`_connect`), and what `_commits` asks to tell whether a write whose
-- connection was lost during its COMMIT took effect.

-- name: extension_schema
-- The schema pgvector is installed in (no row: not installed), which goes on the search_path after toolstore's; also
-- asked by a migration (`_migrate.prepare_connection`).
select extnamespace::regnamespace::text from pg_extension where extname = 'vector';

-- name: set_session
-- A connection's session, set in one round trip: the schema first on the search_path (`path`, quoted); the catalog it
-- works for (`tenant`: row-level security shows a tenant role only that catalog, migration 0005); and generic plans
-- for every statement. Re-planned per call, the route statement spends about 4 ms planning at 10k tools (Postgres'
-- default, auto, chooses custom plans for it), while its generic plan executes as fast (bench/route.py). Safe here:
-- the vector searches, whose plan depends on the catalog and dimension, are planned afresh inside knn() with their
-- actual values, and tests/test_plans.py checks the generic plans' shape. Also the server backend that ran it, which
-- is not the one the client was told of at connect behind a pooler (`_setup.Backends`).
select set_config('search_path', %(path)s, false), set_config('toolstore.tenant', %(tenant)s, false),
  set_config('plan_cache_mode', 'force_generic_plan', false), pg_backend_pid();

-- name: backend_session
-- The server backend a connection's statement runs on now, and its search_path and tenant, after a name or the
-- store's catalog was not found on a connection set up through a pooler: another backend, or another session, than
-- set_session's says a pooler in transaction mode (`_setup.session_lost`).
select pg_backend_pid(), current_setting('search_path'), coalesce(current_setting('toolstore.tenant', true), '');

-- name: set_session_local
-- set_session's search_path and tenant, local to the transaction (`_setup.PooledConnection`, behind a transaction
-- pooler, which may run each transaction on another server connection). No plan_cache_mode: such a connection
-- prepares nothing, and an unnamed statement is planned for its values whatever it says.
select set_config('search_path', %(path)s, true), set_config('toolstore.tenant', %(tenant)s, true);

-- name: transaction_id
-- The id of the transaction about to commit (NULL: it wrote nothing, so none was assigned), and since when the server
-- is up (one that restarted may give the id again: `_commits`).
select pg_current_xact_id_if_assigned()::text, pg_postmaster_start_time();

-- name: end_lost_transaction
-- After a connection was lost during a COMMIT: its backend, if it still holds the transaction (the COMMIT never
-- arrived; the server has not noticed the connection is gone), is ended, so the transaction's outcome becomes final.
select pg_terminate_backend(pid) from pg_stat_activity where pid = %(pid)s and backend_xid = %(xid)s::xid8::xid;

-- name: transaction_status
-- 'committed', 'aborted' or 'in progress' (NULL: too old for Postgres to know), and since when the server is up.
select pg_xact_status(%(xid)s::xid8), pg_postmaster_start_time();

-- name: backend_waits
-- Whether the server backend `pid` waits for its client (not running a statement), asked on a fresh connection when a
-- statement of the primary's connection on it got no answer within the store's timeout (`_deadline`): no row (behind a
-- pooler, whose backend ids the client is not told; or gone) or NULL (another role's) is not taken for "waits".
select state is distinct from 'active' and state is not null from pg_stat_activity where pid = %(pid)s;
