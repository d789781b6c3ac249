-- Policy and approvals (src/policy/, src/approvals/) are audited: every decision other than a plain
-- allow names its rule, and an approval's request, decisions and use each leave a row.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_event_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_check CHECK (event IN ('connection_created', 'connection_refreshed', 'refresh_failed', 'reauth_required', 'connection_revoked', 'connection_revoked_by_admin', 'upstream_call', 'binding_refused', 'keys_rotated', 'token_exchanged', 'token_exchange_refused', 'policy_decision', 'approval_requested', 'approval_decided', 'approval_used'));
