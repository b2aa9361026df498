-- Read replicas: whether one may answer that a call names no tool (`_steps.resolve_steps`), or only lags.

-- name: wal_written
-- On the primary, after a write of tools committed: a WAL position at or past the end of its commit record (bytes
-- from 0/0; `_replicas.Written`). A replica that has replayed it sees the write.
select pg_current_wal_insert_lsn() - '0/0'::pg_lsn as written;

-- name: replayed
-- On a read replica: whether it has replayed every WAL record it has received from the primary and at least up to
-- `written` (the store's last write of tools), so a call no tool answers to there is not one it only lags behind on.
-- Unknown positions (not streaming: WAL from an archive, or none received yet) count as not replayed; a server not in
-- recovery is a primary, which answers for itself.
select not pg_is_in_recovery()
       or coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()
                   and pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= %(written)s, false) as replayed;
