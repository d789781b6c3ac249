-- Held tool calls learn of settled connections from the rows themselves: pushed by a PostgreSQL
-- NOTIFY, or polled as "settled since t" through this index, at a cost that does not grow with the
-- number of calls held. `pending_events` is no longer read or written by this release, but stays
-- until the next one: processes of the previous release, still running during a rolling restart on
-- the same file, write to it inside their callback transaction.
CREATE INDEX pending_connections_updated ON pending_connections (updated_at);
