import type { LoginTransaction, LoginTransactionRepository } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgLoginTransactionRepository implements LoginTransactionRepository {
  constructor(private readonly q: Queryable) {}

  async put(t: LoginTransaction): Promise<void> {
    await this.q.query(
      'INSERT INTO login_transactions (state_hash, session_hash, code_verifier, nonce, return_to, expires_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [t.state_hash, t.session_hash, t.code_verifier, t.nonce, t.return_to, t.expires_at],
    );
  }

  async take(stateHash: string, sessionHash: string): Promise<LoginTransaction | undefined> {
    const r = await this.q.query<LoginTransaction>(
      'DELETE FROM login_transactions WHERE state_hash = $1 AND session_hash = $2 RETURNING *',
      [stateHash, sessionHash],
    );
    return r.rows[0];
  }
}
