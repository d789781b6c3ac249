import type { OAuthFlow, OAuthFlowRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';
import { SqliteTakeOnce } from './take-once.js';

export class SqliteOAuthFlowRepository
  extends SqliteTakeOnce<OAuthFlow, [stateHash: string, sessionHash: string, provider: string]>
  implements OAuthFlowRepository
{
  constructor(db: Db, gate: Runner) {
    super(db, gate, {
      put: 'INSERT INTO oauth_flows (state_hash, pending_id, session_hash, code_verifier, expires_at) VALUES (@state_hash, @pending_id, @session_hash, @code_verifier, @expires_at)',
      take: `DELETE FROM oauth_flows WHERE state_hash = ? AND session_hash = ?
               AND pending_id IN (SELECT id FROM pending_connections WHERE provider = ?) RETURNING *`,
    });
  }
}
