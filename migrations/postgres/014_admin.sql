-- The operator's admin command (`npm run admin`): revocations made by an operator are audited as
-- such, and `audit export` pages the trail oldest first by (at, id), `--since` included, through an index.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'connection_revoked_by_admin', 'upstream_call', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused'));
CREATE INDEX audit_events_at ON audit_events (at, id);
