-- Policy and approvals (src/policy/, src/approvals/) are audited: every decision other than a plain
-- allow names its rule, and an approval's request, decisions and use each leave a row (SQLite cannot
-- change a CHECK in place: the table is rebuilt).
CREATE TABLE audit_events_017 (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  at       INTEGER NOT NULL,
  event    TEXT NOT NULL CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'connection_revoked_by_admin', 'upstream_call', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused', 'policy_decision', 'approval_requested', 'approval_decided', 'approval_used')),
  issuer   TEXT,
  subject  TEXT,
  provider TEXT,
  detail   TEXT
);
INSERT INTO audit_events_017 (id, at, event, issuer, subject, provider, detail) SELECT id, at, event, issuer, subject, provider, detail FROM audit_events;
DROP TABLE audit_events;
ALTER TABLE audit_events_017 RENAME TO audit_events;
CREATE INDEX audit_events_owner ON audit_events (issuer, subject, at);
CREATE INDEX audit_events_at ON audit_events (at, id);
