import type { SqliteDb as Db } from '../../store/index.js';

export interface DevIdpRecord {
  payload: Record<string, unknown>;
  consumed: boolean;
}

/** Key-value storage for the development IdP's models, with expiry and grant-wide revocation. */
export class DevIdpStore {
  constructor(private readonly db: Db) {}

  upsert(model: string, id: string, payload: Record<string, unknown>, expiresInSeconds: number | undefined): void {
    this.db
      .prepare(
        `INSERT INTO dev_idp_models (model, id, payload, grant_id, user_code, uid, expires_at, consumed)
         VALUES (?, ?, ?, ?, ?, ?, ?, 0)
         ON CONFLICT (model, id) DO UPDATE SET payload = excluded.payload, grant_id = excluded.grant_id,
           user_code = excluded.user_code, uid = excluded.uid, expires_at = excluded.expires_at`,
      )
      .run(
        model,
        id,
        JSON.stringify(payload),
        typeof payload.grantId === 'string' ? payload.grantId : null,
        typeof payload.userCode === 'string' ? payload.userCode : null,
        typeof payload.uid === 'string' ? payload.uid : null,
        expiresInSeconds ? Date.now() + expiresInSeconds * 1000 : null,
      );
  }

  #row(sql: string, ...args: unknown[]): DevIdpRecord | undefined {
    const row = this.db.prepare(sql).get(...args, Date.now()) as { payload: string; consumed: number } | undefined;
    return row ? { payload: JSON.parse(row.payload) as Record<string, unknown>, consumed: row.consumed === 1 } : undefined;
  }

  find(model: string, id: string): DevIdpRecord | undefined {
    return this.#row(
      'SELECT payload, consumed FROM dev_idp_models WHERE model = ? AND id = ? AND (expires_at IS NULL OR expires_at > ?)',
      model,
      id,
    );
  }

  findByUid(model: string, uid: string): DevIdpRecord | undefined {
    return this.#row(
      'SELECT payload, consumed FROM dev_idp_models WHERE model = ? AND uid = ? AND (expires_at IS NULL OR expires_at > ?)',
      model,
      uid,
    );
  }

  findByUserCode(model: string, userCode: string): DevIdpRecord | undefined {
    return this.#row(
      'SELECT payload, consumed FROM dev_idp_models WHERE model = ? AND user_code = ? AND (expires_at IS NULL OR expires_at > ?)',
      model,
      userCode,
    );
  }

  consume(model: string, id: string): void {
    this.db.prepare('UPDATE dev_idp_models SET consumed = 1 WHERE model = ? AND id = ?').run(model, id);
  }

  destroy(model: string, id: string): void {
    this.db.prepare('DELETE FROM dev_idp_models WHERE model = ? AND id = ?').run(model, id);
  }

  /** Only `model`'s rows: an interaction carries its grantId too and must outlive the grant's revocation. */
  revokeByGrantId(model: string, grantId: string): void {
    this.db.prepare('DELETE FROM dev_idp_models WHERE model = ? AND grant_id = ?').run(model, grantId);
  }

  prune(): void {
    this.db.prepare('DELETE FROM dev_idp_models WHERE expires_at IS NOT NULL AND expires_at <= ?').run(Date.now());
  }
}
