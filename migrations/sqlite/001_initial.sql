-- Browser sessions on our pages. The cookie holds a random id; only its SHA-256 is stored.
CREATE TABLE browser_sessions (
  id_hash      TEXT PRIMARY KEY,
  issuer       TEXT,
  subject      TEXT,
  display_name TEXT,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL
);
CREATE INDEX browser_sessions_expires ON browser_sessions (expires_at);

-- An OIDC sign-in in progress, keyed by the hash of its `state`.
CREATE TABLE login_transactions (
  state_hash    TEXT PRIMARY KEY,
  session_hash  TEXT NOT NULL,
  code_verifier TEXT NOT NULL,
  nonce         TEXT NOT NULL,
  return_to     TEXT NOT NULL,
  expires_at    INTEGER NOT NULL
);

-- A connection some principal asked for through an MCP tool (or from /connections).
-- `id` travels in the signed requestState; the link carries a separate secret stored as a hash.
CREATE TABLE pending_connections (
  id          TEXT PRIMARY KEY,
  link_hash   TEXT NOT NULL UNIQUE,
  issuer      TEXT NOT NULL,
  subject     TEXT NOT NULL,
  provider    TEXT NOT NULL,
  client_name TEXT,
  status      TEXT NOT NULL CHECK (status IN ('open', 'authorizing', 'completed', 'cancelled', 'denied', 'failed')),
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
CREATE INDEX pending_connections_expires ON pending_connections (expires_at);
CREATE INDEX pending_connections_owner ON pending_connections (issuer, subject, provider, created_at);

-- An authorization at the provider in progress, keyed by the hash of its OAuth `state`.
CREATE TABLE oauth_flows (
  state_hash    TEXT PRIMARY KEY,
  pending_id    TEXT NOT NULL REFERENCES pending_connections (id) ON DELETE CASCADE,
  session_hash  TEXT NOT NULL,
  code_verifier TEXT NOT NULL,
  expires_at    INTEGER NOT NULL
);

-- Linked provider accounts. Tokens are AES-256-GCM sealed, bound to (issuer, subject, provider).
CREATE TABLE connections (
  issuer        TEXT NOT NULL,
  subject       TEXT NOT NULL,
  provider      TEXT NOT NULL,
  account_id    TEXT NOT NULL,
  account_login TEXT NOT NULL,
  scopes        TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  sealed_tokens TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  last_used_at  INTEGER,
  PRIMARY KEY (issuer, subject, provider)
);

-- Each settled pending connection appends a row; every process tails it to wake held tool calls.
CREATE TABLE pending_events (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  pending_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
