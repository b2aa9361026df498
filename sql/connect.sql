-- Connections: what ``_commits`` asks to tell whether a write whose connection was lost during its COMMIT took effect.

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
