-- The sandbox GitHub as a GitHub App (user-to-server tokens): access tokens that expire, and
-- single-use refresh tokens that rotate with them. OAuth App tokens keep expires_at NULL (never).
-- Refresh tokens, like every other sandbox secret, are stored as SHA-256 hex digests only.

ALTER TABLE sandbox_github_tokens ADD COLUMN expires_at INTEGER;

-- A refresh token (ghr_…) and the access token it was issued with. Using it, revoking its access
-- token or revoking the grant deletes the row.
CREATE TABLE sandbox_github_refresh_tokens (
  token_hash        TEXT PRIMARY KEY,
  access_token_hash TEXT NOT NULL,
  client_id         TEXT NOT NULL,
  login             TEXT NOT NULL COLLATE NOCASE,
  issued_at         INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL
);
CREATE INDEX sandbox_github_refresh_tokens_owner ON sandbox_github_refresh_tokens (login, client_id);
CREATE INDEX sandbox_github_refresh_tokens_access ON sandbox_github_refresh_tokens (access_token_hash);
