import type { Db } from './database.js';

export interface SessionRow {
  id_hash: string;
  issuer: string | null;
  subject: string | null;
  display_name: string | null;
  created_at: number;
  expires_at: number;
}

/** Server-side browser sessions, keyed by the hash of the cookie value. */
export class SessionStore {
  constructor(private readonly db: Db) {}

  create(idHash: string, expiresAt: number): void {
    this.db.prepare('INSERT INTO browser_sessions (id_hash, created_at, expires_at) VALUES (?, ?, ?)').run(idHash, Date.now(), expiresAt);
  }

  find(idHash: string, now = Date.now()): SessionRow | undefined {
    return this.db.prepare('SELECT * FROM browser_sessions WHERE id_hash = ? AND expires_at > ?').get(idHash, now) as SessionRow | undefined;
  }

  /** Replaces the session with a fresh id carrying the signed-in principal (no fixation). */
  rotateSignedIn(oldHash: string | undefined, newHash: string, p: { issuer: string; subject: string; name: string }, expiresAt: number): void {
    this.db.transaction(() => {
      if (oldHash) this.db.prepare('DELETE FROM browser_sessions WHERE id_hash = ?').run(oldHash);
      this.db
        .prepare('INSERT INTO browser_sessions (id_hash, issuer, subject, display_name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
        .run(newHash, p.issuer, p.subject, p.name, Date.now(), expiresAt);
    })();
  }

  delete(idHash: string): void {
    this.db.prepare('DELETE FROM browser_sessions WHERE id_hash = ?').run(idHash);
  }
}
