import type { ConnectionRow } from '../store/index.js';
import { scopeList } from '../providers/scopes.js';

/** A connection as people and models see it (no tokens): the `/connections` page and `list_connections`. */
export interface ConnectionSummary {
  provider: string;
  login: string;
  scopes: string[];
  connectedAt: string;
  lastUsedAt: string | null;
  status: ConnectionRow['status'];
}

export function summarizeConnection(row: ConnectionRow): ConnectionSummary {
  return {
    provider: row.provider,
    login: row.account_login,
    scopes: scopeList(row.scopes),
    connectedAt: new Date(row.created_at).toISOString(),
    lastUsedAt: row.last_used_at ? new Date(row.last_used_at).toISOString() : null,
    status: row.status,
  };
}
