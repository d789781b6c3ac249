-- Held tool calls now learn of settled connections by status (polling `pending_connections`
-- by id, or a PostgreSQL NOTIFY), so the event log is no longer written or read.
DROP TABLE pending_events;
