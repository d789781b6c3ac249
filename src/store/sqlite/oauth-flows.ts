import type { OAuthFlow, OAuthFlowRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteOAuthFlowRepository implements OAuthFlowRepository {
  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {}

  put(flow: OAuthFlow): Promise<void> {
    return this.gate.run(
      () =>
        void this.db
          .prepare(
            'INSERT INTO oauth_flows (state_hash, pending_id, session_hash, code_verifier, expires_at) VALUES (@state_hash, @pending_id, @session_hash, @code_verifier, @expires_at)',
          )
          .run(flow),
    );
  }

  take(stateHash: string, sessionHash: string, provider: string): Promise<OAuthFlow | undefined> {
    return this.gate.run(
      () =>
        this.db
          .prepare(
            `DELETE FROM oauth_flows WHERE state_hash = ? AND session_hash = ?
               AND pending_id IN (SELECT id FROM pending_connections WHERE provider = ?) RETURNING *`,
          )
          .get(stateHash, sessionHash, provider) as OAuthFlow | undefined,
    );
  }
}
