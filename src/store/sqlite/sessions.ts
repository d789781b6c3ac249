import type { SessionRepository, SessionRow, SignedInSession } from '../types.js';
import type { Db } from './database.js';
import type { Runner } from './gate.js';

export class SqliteSessionRepository implements SessionRepository {
  readonly #find;

  constructor(
    private readonly db: Db,
    private readonly gate: Runner,
  ) {
    this.#find = db.prepare('SELECT * FROM browser_sessions WHERE id_hash = ? AND expires_at > ?');
  }

  create(idHash: string, expiresAt: number): Promise<void> {
    return this.gate.run(
      () =>
        void this.db
          .prepare('INSERT INTO browser_sessions (id_hash, created_at, expires_at) VALUES (?, ?, ?)')
          .run(idHash, Date.now(), expiresAt),
    );
  }

  find(idHash: string, now = Date.now()): Promise<SessionRow | undefined> {
    return this.gate.run(() => this.#find.get(idHash, now) as SessionRow | undefined);
  }

  rotateSignedIn({ oldHash, newHash, principal: p, expiresAt, sealedIdToken }: SignedInSession): Promise<void> {
    return this.gate.run(() =>
      this.db.transaction(() => {
        if (oldHash) this.db.prepare('DELETE FROM browser_sessions WHERE id_hash = ?').run(oldHash);
        this.db
          .prepare(
            'INSERT INTO browser_sessions (id_hash, issuer, subject, display_name, created_at, expires_at, id_token) VALUES (?, ?, ?, ?, ?, ?, ?)',
          )
          .run(newHash, p.issuer, p.subject, p.name, Date.now(), expiresAt, sealedIdToken ?? null);
      })(),
    );
  }

  delete(idHash: string): Promise<void> {
    return this.gate.run(() => void this.db.prepare('DELETE FROM browser_sessions WHERE id_hash = ?').run(idHash));
  }
}
