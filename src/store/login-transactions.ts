import type { Db } from './database.js';

export interface LoginTransaction {
  state_hash: string;
  session_hash: string;
  code_verifier: string;
  nonce: string;
  return_to: string;
  expires_at: number;
}

/** OIDC sign-ins in progress; each one can be taken exactly once. */
export class LoginTransactionStore {
  constructor(private readonly db: Db) {}

  put(t: LoginTransaction): void {
    this.db
      .prepare('INSERT INTO login_transactions (state_hash, session_hash, code_verifier, nonce, return_to, expires_at) VALUES (@state_hash, @session_hash, @code_verifier, @nonce, @return_to, @expires_at)')
      .run(t);
  }

  /** Deletes and returns the transaction, so a replayed callback finds nothing. */
  take(stateHash: string): LoginTransaction | undefined {
    return this.db.prepare('DELETE FROM login_transactions WHERE state_hash = ? RETURNING *').get(stateHash) as LoginTransaction | undefined;
  }
}
