-- The ID token of a signed-in browser session, sealed (AES-256-GCM, bound to the session), kept
-- only to be the id_token_hint of the identity provider's RP-initiated logout at sign-out.
ALTER TABLE browser_sessions ADD COLUMN id_token TEXT;
