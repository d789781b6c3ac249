-- State of the embedded development identity provider (npm run dev): oidc-provider's models
-- (sessions, grants, registered clients, codes...), so a restart keeps signed-in MCP clients.
CREATE TABLE dev_idp_models (
  model      TEXT NOT NULL,
  id         TEXT NOT NULL,
  payload    TEXT NOT NULL,
  grant_id   TEXT,
  user_code  TEXT,
  uid        TEXT,
  expires_at INTEGER,
  consumed   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (model, id)
);
CREATE INDEX dev_idp_models_grant ON dev_idp_models (grant_id);
CREATE INDEX dev_idp_models_uid ON dev_idp_models (model, uid);
