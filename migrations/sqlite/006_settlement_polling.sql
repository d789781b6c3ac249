-- Held tool calls learn of settled connections from the rows themselves: pushed by a PostgreSQL
-- NOTIFY, or polled as "settled since t" through this index, at a cost that does not grow with the
-- number of calls held. The event log that served the same purpose is no longer written or read.
DROP TABLE pending_events;
CREATE INDEX pending_connections_updated ON pending_connections (updated_at);
