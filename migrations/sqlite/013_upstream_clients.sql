-- The broker's own client registrations at the authorization servers of `auth: mcp` upstreams,
-- kept per issuer (SEP-2352) and shared by every instance, so the broker registers once per
-- (issuer, redirect URI) however many instances start. `client_key` is the redirect URI the client
-- was registered for; the secret, when the server issued one, is sealed like tokens.
CREATE TABLE upstream_clients (
  issuer               TEXT NOT NULL,
  client_key           TEXT NOT NULL,
  client_id            TEXT NOT NULL,
  client_secret_sealed TEXT,
  key_id               TEXT,
  registered_at        INTEGER NOT NULL,
  metadata_json        TEXT NOT NULL,
  PRIMARY KEY (issuer, client_key)
);
