-- Read replicas: whether one may answer that a call names no tool (`_steps.resolve_steps`), or only lags.

-- name: wal_written
-- On the primary, after a write of tools committed: a WAL position at or past the end of its commit record (bytes
-- from 0/0; `_replicas.Written`). A replica that has replayed it sees the write.
select pg_current_wal_insert_lsn() - '0/0'::pg_lsn as written;

-- name: replayed
-- On a read replica: whether it streams from the primary now (its WAL receiver streaming, its last message from the
-- primary less than 5 s old: `wal_receiver_timeout` of at most 6 s has the receiver ask for one after half of it while
-- no WAL comes), has replayed every WAL record it has received and at least up to `written` (the store's last write
-- of tools), so a call no tool answers to there is not one it only lags behind on: a replica cut off from the primary
-- replays all it received and stops there, however long the outage. Unknown values count as not replayed: no WAL
-- receiver (WAL from an archive, the primary unreachable, none received yet), and its state hidden from the role (a
-- role neither superuser nor with pg_read_all_stats' privileges sees only its pid). A server not in recovery is a
-- primary, which answers for itself.
select not pg_is_in_recovery()
       or coalesce((select status = 'streaming' and clock_timestamp() - last_msg_receipt_time < interval '5 seconds'
                    from pg_stat_wal_receiver)
                   and pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()
                   and pg_last_wal_replay_lsn() - '0/0'::pg_lsn >= %(written)s, false) as replayed;
