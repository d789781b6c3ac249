import type { Db } from './database.js';

export interface OAuthFlow {
  state_hash: string;
  pending_id: string;
  session_hash: string;
  code_verifier: string;
  expires_at: number;
}

/** Provider authorizations in progress; each `state` can be taken exactly once. */
export class OAuthFlowStore {
  constructor(private readonly db: Db) {}

  put(flow: OAuthFlow): void {
    this.db
      .prepare('INSERT INTO oauth_flows (state_hash, pending_id, session_hash, code_verifier, expires_at) VALUES (@state_hash, @pending_id, @session_hash, @code_verifier, @expires_at)')
      .run(flow);
  }

  peek(stateHash: string): OAuthFlow | undefined {
    return this.db.prepare('SELECT * FROM oauth_flows WHERE state_hash = ?').get(stateHash) as OAuthFlow | undefined;
  }

  take(stateHash: string): OAuthFlow | undefined {
    return this.db.prepare('DELETE FROM oauth_flows WHERE state_hash = ? RETURNING *').get(stateHash) as OAuthFlow | undefined;
  }
}
