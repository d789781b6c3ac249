-- When the LISTEN connection is down, instances poll "settled since t" through this index, at a
-- cost that does not grow with the number of calls held.
CREATE INDEX pending_connections_updated ON pending_connections (updated_at);
