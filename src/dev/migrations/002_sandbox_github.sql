-- The sandbox GitHub (src/dev/sandbox-github/): a simulated GitHub that `npm run dev` serves on the
-- broker's own server when no real GitHub OAuth app is configured, and that the tests use as their
-- GitHub stand-in. It lives in the broker's database so a restart keeps its users, tokens and issues.
-- Codes and tokens are stored as SHA-256 hex digests only.

CREATE TABLE sandbox_github_users (
  id    INTEGER PRIMARY KEY,
  login TEXT NOT NULL UNIQUE COLLATE NOCASE,
  name  TEXT NOT NULL
);

-- Named counters (the next user id).
CREATE TABLE sandbox_github_counters (
  name  TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);

-- Authorization codes from the web flow: single use, 10 minutes.
CREATE TABLE sandbox_github_codes (
  code_hash      TEXT PRIMARY KEY,
  client_id      TEXT NOT NULL,
  redirect_uri   TEXT NOT NULL,
  code_challenge TEXT,
  scopes         TEXT NOT NULL,
  login          TEXT NOT NULL COLLATE NOCASE,
  expires_at     INTEGER NOT NULL
);
CREATE INDEX sandbox_github_codes_expires ON sandbox_github_codes (expires_at);

-- OAuth access tokens (opaque gho_… strings). `seq` orders them for the 10-per-kind limit.
CREATE TABLE sandbox_github_tokens (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  token_hash TEXT NOT NULL UNIQUE,
  client_id  TEXT NOT NULL,
  login      TEXT NOT NULL COLLATE NOCASE,
  scopes     TEXT NOT NULL,
  issued_at  INTEGER NOT NULL
);
CREATE INDEX sandbox_github_tokens_owner ON sandbox_github_tokens (login, client_id);

-- Which user has authorized which application (an "authorized OAuth app" at GitHub).
CREATE TABLE sandbox_github_grants (
  client_id  TEXT NOT NULL,
  login      TEXT NOT NULL COLLATE NOCASE,
  scopes     TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (client_id, login)
);

-- Every grant revocation (DELETE /applications/{client_id}/grant), oldest first.
CREATE TABLE sandbox_github_grant_revocations (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  client_id  TEXT NOT NULL,
  login      TEXT NOT NULL,
  revoked_at INTEGER NOT NULL
);

-- Issue numbers are per repository and never reused.
CREATE TABLE sandbox_github_repos (
  owner       TEXT NOT NULL COLLATE NOCASE,
  repo        TEXT NOT NULL COLLATE NOCASE,
  last_number INTEGER NOT NULL,
  PRIMARY KEY (owner, repo)
);

CREATE TABLE sandbox_github_issues (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  owner      TEXT NOT NULL,
  repo       TEXT NOT NULL,
  number     INTEGER NOT NULL,
  title      TEXT NOT NULL,
  body       TEXT,
  labels     TEXT NOT NULL, -- JSON array of names
  author     TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (owner COLLATE NOCASE, repo COLLATE NOCASE, number)
);

INSERT INTO sandbox_github_users (id, login, name) VALUES
  (583231, 'octocat', 'The Octocat'),
  (2, 'hubot', 'Hubot'),
  (3, 'monalisa', 'Mona Lisa Octocat');
INSERT INTO sandbox_github_counters (name, value) VALUES ('next_user_id', 1000);
