import type { OAuthFlow, OAuthFlowRepository } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgOAuthFlowRepository implements OAuthFlowRepository {
  constructor(private readonly q: Queryable) {}

  async put(flow: OAuthFlow): Promise<void> {
    await this.q.query(
      'INSERT INTO oauth_flows (state_hash, pending_id, session_hash, code_verifier, expires_at) VALUES ($1, $2, $3, $4, $5)',
      [flow.state_hash, flow.pending_id, flow.session_hash, flow.code_verifier, flow.expires_at],
    );
  }

  async take(stateHash: string, sessionHash: string, provider: string): Promise<OAuthFlow | undefined> {
    const r = await this.q.query<OAuthFlow>(
      `DELETE FROM oauth_flows WHERE state_hash = $1 AND session_hash = $2
         AND pending_id IN (SELECT id FROM pending_connections WHERE provider = $3) RETURNING *`,
      [stateHash, sessionHash, provider],
    );
    return r.rows[0];
  }
}
