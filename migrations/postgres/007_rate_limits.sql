-- Rate-limit windows shared by every instance: one row per limiter and client, keyed by a keyed
-- hash (no IP address is stored), counting hits since the window opened at its first hit.
CREATE TABLE rate_limit_windows (
  key_hash     TEXT PRIMARY KEY,
  window_start BIGINT NOT NULL,
  hits         INTEGER NOT NULL
);
CREATE INDEX rate_limit_windows_start ON rate_limit_windows (window_start);
