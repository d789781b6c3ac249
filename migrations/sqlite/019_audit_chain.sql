-- The audit trail is tamper-evident (src/store/audit-chain.ts, docs/audit.md): each row written from
-- here on names its writer's stream, its place in that stream, the key it was MACed with, and a MAC
-- chained over the stream's previous MAC and every column of the row. Rows from before this step keep
-- NULL there: unchained history, reported as such by `npm run admin -- audit verify`.
ALTER TABLE audit_events ADD COLUMN stream TEXT;
ALTER TABLE audit_events ADD COLUMN seq INTEGER;
ALTER TABLE audit_events ADD COLUMN key_id TEXT;
ALTER TABLE audit_events ADD COLUMN mac TEXT;
CREATE INDEX audit_events_chain ON audit_events (stream, seq);
-- Where a stream's pruned part ends: the last pruned row's place and MAC, so verification starts there.
CREATE TABLE audit_chain_anchors (
  stream TEXT PRIMARY KEY,
  seq    INTEGER NOT NULL,
  mac    TEXT NOT NULL,
  at     INTEGER NOT NULL,
  key_id TEXT NOT NULL,
  tag    TEXT NOT NULL
);
-- A chained row whose transaction rolled back after later rows of its stream were chained onto it:
-- its place and MAC, so the stream stays verifiable across the gap.
CREATE TABLE audit_chain_voids (
  stream TEXT NOT NULL,
  seq    INTEGER NOT NULL,
  mac    TEXT NOT NULL,
  key_id TEXT NOT NULL,
  tag    TEXT NOT NULL,
  PRIMARY KEY (stream, seq)
);
