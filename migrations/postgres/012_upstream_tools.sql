-- The gateway (remote MCP servers behind the broker). The last tool definitions the broker saw for
-- each upstream: the upstream's public metadata, listed to users who have not connected it yet and
-- shared by every instance. Written only when they change.
CREATE TABLE upstream_tools (
  upstream         TEXT PRIMARY KEY,
  definitions_json TEXT NOT NULL,
  seen_at          BIGINT NOT NULL
);

-- Each forwarded call is audited.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused', 'upstream_call'));
