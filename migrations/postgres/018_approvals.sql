-- Approvals bound to the call (src/approvals/): one row per call waiting for people to agree, and
-- one decision per approver. `binding` is a digest of everything that must not change between the
-- question and the run (requester, tool, upstream, arguments digest, provider, account, policy
-- version, rule, service): the same call finds its row again, any other call does not. The
-- arguments and the requester's displayed claims may hold personal data: `sealed_call` keeps them
-- sealed (AES-256-GCM, bound to the row), under `key_id`. Expired and used rows are pruned.
CREATE TABLE approval_requests (
  id             TEXT PRIMARY KEY,
  binding        TEXT NOT NULL,
  issuer         TEXT NOT NULL,
  subject        TEXT NOT NULL,
  client_name    TEXT NOT NULL,
  tool           TEXT NOT NULL,
  upstream       TEXT NOT NULL,
  provider       TEXT NOT NULL,
  account        TEXT NOT NULL,
  policy_version TEXT NOT NULL,
  rule_id        TEXT NOT NULL,
  service_id     TEXT NOT NULL,
  key_id         TEXT NOT NULL,
  sealed_call    TEXT NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'used')),
  reason         TEXT,
  created_at     BIGINT NOT NULL,
  expires_at     BIGINT NOT NULL,
  updated_at     BIGINT NOT NULL,
  decided_at     BIGINT,
  used_at        BIGINT,
  use_count      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX approval_requests_binding ON approval_requests (issuer, subject, binding);
CREATE INDEX approval_requests_status ON approval_requests (status, expires_at);
CREATE INDEX approval_requests_updated ON approval_requests (updated_at);
CREATE TABLE approval_decisions (
  request_id TEXT NOT NULL REFERENCES approval_requests (id) ON DELETE CASCADE,
  issuer     TEXT NOT NULL,
  subject    TEXT NOT NULL,
  name       TEXT NOT NULL,
  verdict    TEXT NOT NULL CHECK (verdict IN ('approve', 'deny')),
  reason     TEXT,
  at         BIGINT NOT NULL,
  PRIMARY KEY (request_id, issuer, subject)
);
