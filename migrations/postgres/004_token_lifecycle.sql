-- Token lifecycle: connections that need the user again, refresh leases shared by every instance,
-- requested scopes for incremental consent, and an audit trail that never holds a secret.
-- Times are epoch milliseconds (BIGINT).

ALTER TABLE connections ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'reauth_required'));
ALTER TABLE connections ADD COLUMN status_reason TEXT;
CREATE INDEX connections_account ON connections (provider, account_id);

-- What a pending connection asks the provider for (space-separated; NULL = the provider's defaults),
-- and why it ended when the reason matters to the waiting tool call.
ALTER TABLE pending_connections ADD COLUMN scopes TEXT;
ALTER TABLE pending_connections ADD COLUMN outcome_reason TEXT;

-- One refresh at a time per connection, across instances: whoever holds an unexpired lease refreshes.
CREATE TABLE refresh_leases (
  issuer     TEXT NOT NULL,
  subject    TEXT NOT NULL,
  provider   TEXT NOT NULL,
  holder     TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (issuer, subject, provider)
);

CREATE TABLE audit_events (
  id       BIGSERIAL PRIMARY KEY,
  at       BIGINT NOT NULL,
  event    TEXT NOT NULL CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'binding_refused', 'keys_rotated')),
  issuer   TEXT,
  subject  TEXT,
  provider TEXT,
  detail   TEXT
);
CREATE INDEX audit_events_owner ON audit_events (issuer, subject, at);
