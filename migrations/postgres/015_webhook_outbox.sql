-- Signed webhooks (Standard Webhooks): one row per event and endpoint, written in the transaction
-- of the connection change it reports, so a crash keeps both or neither. `id` is the stable
-- `webhook-id` receivers deduplicate on. `due_at` is when the next attempt may start; while an
-- instance holds the row (`claimed_by`), it is when that claim lapses, so a row whose sender died
-- is claimed again once it does. `payload` is the JSON body exactly as signed: never a token.
CREATE TABLE webhook_outbox (
  id          TEXT PRIMARY KEY,
  endpoint    TEXT NOT NULL,
  event_type  TEXT NOT NULL,
  payload     TEXT NOT NULL,
  status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts    INTEGER NOT NULL DEFAULT 0,
  created_at  BIGINT NOT NULL,
  due_at      BIGINT NOT NULL,
  claimed_by  TEXT,
  last_error  TEXT,
  settled_at  BIGINT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (status, due_at);
CREATE INDEX webhook_outbox_settled ON webhook_outbox (settled_at);
