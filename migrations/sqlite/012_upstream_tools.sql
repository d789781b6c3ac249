-- The gateway (remote MCP servers behind the broker). The last tool definitions the broker saw for
-- each upstream: the upstream's public metadata, listed to users who have not connected it yet and
-- shared by every instance. Written only when they change.
CREATE TABLE upstream_tools (
  upstream         TEXT PRIMARY KEY,
  definitions_json TEXT NOT NULL,
  seen_at          INTEGER NOT NULL
);

-- Each forwarded call is audited (SQLite cannot change a CHECK in place: the table is rebuilt).
CREATE TABLE audit_events_012 (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  at       INTEGER NOT NULL,
  event    TEXT NOT NULL CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused', 'upstream_call')),
  issuer   TEXT,
  subject  TEXT,
  provider TEXT,
  detail   TEXT
);
INSERT INTO audit_events_012 (id, at, event, issuer, subject, provider, detail) SELECT id, at, event, issuer, subject, provider, detail FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_012 RENAME TO audit_events;
CREATE INDEX audit_events_owner ON audit_events (issuer, subject, at);
