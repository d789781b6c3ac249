import type { LoginTransaction, LoginTransactionRepository } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';
import { SqliteTakeOnce } from './take-once.js';

export class SqliteLoginTransactionRepository
  extends SqliteTakeOnce<LoginTransaction, [stateHash: string, sessionHash: string]>
  implements LoginTransactionRepository
{
  constructor(db: Db, gate: Runner) {
    super(db, gate, {
      put: 'INSERT INTO login_transactions (state_hash, session_hash, code_verifier, nonce, return_to, expires_at) VALUES (@state_hash, @session_hash, @code_verifier, @nonce, @return_to, @expires_at)',
      take: 'DELETE FROM login_transactions WHERE state_hash = ? AND session_hash = ? RETURNING *',
    });
  }
}
