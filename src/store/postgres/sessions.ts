import type { SessionRepository, SessionRow, SignedInSession } from '../types.js';
import type { Queryable } from './queryable.js';

export class PgSessionRepository implements SessionRepository {
  constructor(private readonly q: Queryable) {}

  async create(idHash: string, expiresAt: number): Promise<void> {
    await this.q.query('INSERT INTO browser_sessions (id_hash, created_at, expires_at) VALUES ($1, $2, $3)', [
      idHash,
      Date.now(),
      expiresAt,
    ]);
  }

  async find(idHash: string, now = Date.now()): Promise<SessionRow | undefined> {
    const r = await this.q.query<SessionRow>('SELECT * FROM browser_sessions WHERE id_hash = $1 AND expires_at > $2', [idHash, now]);
    return r.rows[0];
  }

  async rotateSignedIn({ oldHash, newHash, principal: p, expiresAt, sealedIdToken }: SignedInSession): Promise<void> {
    await this.q.atomically(async (q) => {
      if (oldHash) await q.query('DELETE FROM browser_sessions WHERE id_hash = $1', [oldHash]);
      await q.query(
        'INSERT INTO browser_sessions (id_hash, issuer, subject, display_name, created_at, expires_at, id_token) VALUES ($1, $2, $3, $4, $5, $6, $7)',
        [newHash, p.issuer, p.subject, p.name, Date.now(), expiresAt, sealedIdToken ?? null],
      );
    });
  }

  async delete(idHash: string): Promise<void> {
    await this.q.query('DELETE FROM browser_sessions WHERE id_hash = $1', [idHash]);
  }
}
