-- Token exchange (RFC 8693) for the operator's own MCP servers ("services").
-- The service whose exchange made a pending connection, so the consent page can say who asks and a
-- connect_request is honoured only for that service; null for links made by the broker's own tools.
ALTER TABLE pending_connections ADD COLUMN service_id TEXT;

-- private_key_jwt client assertions already used (RFC 7523 `jti`), by the hash of service id and
-- jti, kept until the assertion expires: shared by every instance, so a replay fails everywhere.
CREATE TABLE used_client_assertions (
  jti_hash   TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL
);
CREATE INDEX used_client_assertions_expires ON used_client_assertions (expires_at);

-- Which services obtained a token through each connection, and when last (shown on /connections).
CREATE TABLE connection_service_usage (
  issuer       TEXT NOT NULL,
  subject      TEXT NOT NULL,
  provider     TEXT NOT NULL,
  service_id   TEXT NOT NULL,
  last_used_at BIGINT NOT NULL,
  PRIMARY KEY (issuer, subject, provider, service_id)
);

-- The exchange's audit events.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused'));
