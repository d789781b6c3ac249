-- Why a tool asked for the connection ("create the issue in acme/widgets"), composed by the broker's
-- own tool code from validated arguments and shown on the consent page; null for links made from
-- /connections and for rows of the previous release.
ALTER TABLE pending_connections ADD COLUMN purpose TEXT;
