-- The short form of a connect link (`/activate` and an 8-character code, src/connect/activate.ts):
-- a keyed hash of the code (the code itself is derived again from the id when it is shown), and when
-- a code opened its consent page (a code works once). Null on rows of the previous release: their
-- links work, they have no code.
ALTER TABLE pending_connections ADD COLUMN activation_hash TEXT;
ALTER TABLE pending_connections ADD COLUMN activated_at BIGINT;
CREATE INDEX pending_connections_activation ON pending_connections (activation_hash);
