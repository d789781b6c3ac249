import type { LoginTransaction, LoginTransactionRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteLoginTransactionRepository implements LoginTransactionRepository {
  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {}

  put(t: LoginTransaction): Promise<void> {
    return this.gate.run(
      () =>
        void this.db
          .prepare(
            'INSERT INTO login_transactions (state_hash, session_hash, code_verifier, nonce, return_to, expires_at) VALUES (@state_hash, @session_hash, @code_verifier, @nonce, @return_to, @expires_at)',
          )
          .run(t),
    );
  }

  take(stateHash: string, sessionHash: string): Promise<LoginTransaction | undefined> {
    return this.gate.run(
      () =>
        this.db
          .prepare('DELETE FROM login_transactions WHERE state_hash = ? AND session_hash = ? RETURNING *')
          .get(stateHash, sessionHash) as LoginTransaction | undefined,
    );
  }
}
