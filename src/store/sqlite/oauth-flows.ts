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
          .prepare('INSERT INTO oauth_flows (state_hash, pending_id, session_hash, code_verifier, expires_at) VALUES (@state_hash, @pending_id, @session_hash, @code_verifier, @expires_at)')
          .run(flow),
    );
  }

  peek(stateHash: string): Promise<OAuthFlow | undefined> {
    return this.gate.run(() => this.db.prepare('SELECT * FROM oauth_flows WHERE state_hash = ?').get(stateHash) as OAuthFlow | undefined);
  }

  take(stateHash: string): Promise<OAuthFlow | undefined> {
    return this.gate.run(() => this.db.prepare('DELETE FROM oauth_flows WHERE state_hash = ? RETURNING *').get(stateHash) as OAuthFlow | undefined);
  }
}
