import { sha256Hex } from '../../crypto/index.js';
import type { SqliteDb as Db } from '../../store/index.js';
import { scopeList as splitScopes, scopeString as joinScopes } from '../../providers/scopes.js';

// Storage for the sandbox GitHub (src/dev/sandbox-github/). Authorization codes, access tokens and
// refresh tokens are kept as SHA-256 hex digests: callers pass the raw value, which never reaches
// the database.

export interface SandboxUser {
  id: number;
  login: string;
  name: string;
}

export interface SandboxCode {
  clientId: string;
  redirectUri: string;
  /** The PKCE S256 challenge, when the authorization request carried one. */
  codeChallenge: string | undefined;
  scopes: string[];
  login: string;
  expiresAt: number;
}

export interface SandboxToken {
  clientId: string;
  login: string;
  scopes: string[];
  issuedAt: number;
  /** When the token stops working (ms); undefined = never (OAuth App tokens). */
  expiresAt?: number | undefined;
}

/** Options of {@link SandboxGitHubStore.issueToken}. */
export interface SandboxIssueOptions {
  /** A refresh token issued together with the access token (GitHub App user-to-server tokens). */
  refresh?: { token: string; expiresAt: number };
  /**
   * The grant's scopes after this authorization, from its scopes before (undefined: no grant yet).
   * Default: the union of the previous scopes and the token's, previous ones first.
   */
  grantScopes?: (previous: string[] | undefined) => string[];
}

/** A rotated pair (see {@link SandboxGitHubStore.rotateRefreshToken}). */
export interface SandboxRotation {
  accessToken: string;
  refreshToken: string;
  accessExpiresAt: number;
  refreshExpiresAt: number;
  issuedAt: number;
}

export interface SandboxGrant {
  clientId: string;
  login: string;
  scopes: string[];
  createdAt: number;
  updatedAt: number;
}

export interface SandboxGrantRevocation {
  clientId: string;
  login: string;
  revokedAt: number;
}

export interface SandboxIssue {
  id: number;
  owner: string;
  repo: string;
  number: number;
  title: string;
  body: string | null;
  labels: string[];
  author: string;
  createdAt: number;
}

/** A repository: created by its first issue (or {@link SandboxGitHubStore.ensureRepository}), gone when deleted. */
export interface SandboxRepository {
  /** Like GitHub's repository ids: a repository created again under the same name gets a new one. */
  id: number;
  owner: string;
  name: string;
  createdAt: number;
  /** The login that created it (filed its first issue): an admin of it, like its owner. */
  createdBy: string | null;
}

interface CodeRow {
  client_id: string;
  redirect_uri: string;
  code_challenge: string | null;
  scopes: string;
  login: string;
  expires_at: number;
}
interface TokenRow {
  client_id: string;
  login: string;
  scopes: string;
  issued_at: number;
  expires_at: number | null;
}
interface RefreshRow {
  token_hash: string;
  access_token_hash: string;
  client_id: string;
  login: string;
  issued_at: number;
  expires_at: number;
}
interface GrantRow {
  client_id: string;
  login: string;
  scopes: string;
  created_at: number;
  updated_at: number;
}
interface RepoRow {
  id: number;
  owner: string;
  repo: string;
  created_at: number;
  created_by: string | null;
}
/** An issue as its row stores it: the labels as JSON text, the time under its column name. */
type IssueRow = Omit<SandboxIssue, 'labels' | 'createdAt'> & { labels: string; created_at: number };

const hash = (value: string): string => sha256Hex(value);
const unionScopes = (a: string[], b: string[]): string[] => [...new Set([...a, ...b])];

const toRepository = (r: RepoRow): SandboxRepository => ({
  id: r.id,
  owner: r.owner,
  name: r.repo,
  createdAt: r.created_at,
  createdBy: r.created_by,
});

const toIssue = (r: IssueRow): SandboxIssue => ({
  id: r.id,
  owner: r.owner,
  repo: r.repo,
  number: r.number,
  title: r.title,
  body: r.body,
  labels: JSON.parse(r.labels) as string[],
  author: r.author,
  createdAt: r.created_at,
});

/** The sandbox GitHub's users, codes, tokens, grants, repositories and issues (tables `sandbox_github_*`). */
export class SandboxGitHubStore {
  constructor(private readonly db: Db) {}

  // ------------------------------------------------------------------ users

  /** The user with this login, compared case-insensitively like GitHub does. */
  findUser(login: string): SandboxUser | undefined {
    return this.db.prepare('SELECT id, login, name FROM sandbox_github_users WHERE login = ?').get(login) as SandboxUser | undefined;
  }

  /** The user with this login, created (with the next free id, name = login) when there is none. */
  ensureUser(login: string): SandboxUser {
    return this.db
      .transaction(() => {
        const existing = this.findUser(login);
        if (existing) return existing;
        let id = this.#nextUserId();
        while (this.db.prepare('SELECT 1 FROM sandbox_github_users WHERE id = ?').get(id)) id = this.#nextUserId();
        this.db.prepare('INSERT INTO sandbox_github_users (id, login, name) VALUES (?, ?, ?)').run(id, login, login);
        return { id, login, name: login };
      })
      .immediate();
  }

  /** Creates or replaces the user with `user.login` (another user holding `user.id` is replaced too). */
  putUser(user: SandboxUser): void {
    this.db
      .transaction(() => {
        this.db.prepare('DELETE FROM sandbox_github_users WHERE login = ? OR id = ?').run(user.login, user.id);
        this.db.prepare('INSERT INTO sandbox_github_users (id, login, name) VALUES (?, ?, ?)').run(user.id, user.login, user.name);
      })
      .immediate();
  }

  /** Deletes the user record (their tokens then stop working: there is nobody to act as). */
  deleteUser(login: string): boolean {
    return this.db.prepare('DELETE FROM sandbox_github_users WHERE login = ?').run(login).changes > 0;
  }

  listUsers(): SandboxUser[] {
    return this.db.prepare('SELECT id, login, name FROM sandbox_github_users ORDER BY rowid').all() as SandboxUser[];
  }

  #nextUserId(): number {
    const row = this.db
      .prepare("UPDATE sandbox_github_counters SET value = value + 1 WHERE name = 'next_user_id' RETURNING value - 1 AS id")
      .get() as { id: number } | undefined;
    return row!.id;
  }

  // ------------------------------------------------------------------ authorization codes

  putCode(code: string, grant: SandboxCode): void {
    this.db
      .prepare(
        'INSERT INTO sandbox_github_codes (code_hash, client_id, redirect_uri, code_challenge, scopes, login, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        hash(code),
        grant.clientId,
        grant.redirectUri,
        grant.codeChallenge ?? null,
        joinScopes(grant.scopes),
        grant.login,
        grant.expiresAt,
      );
  }

  /** Removes and returns the code (expired or not): a code is burned by the first attempt that presents it. */
  takeCode(code: string): SandboxCode | undefined {
    const row = this.db.prepare('DELETE FROM sandbox_github_codes WHERE code_hash = ? RETURNING *').get(hash(code)) as CodeRow | undefined;
    return (
      row && {
        clientId: row.client_id,
        redirectUri: row.redirect_uri,
        codeChallenge: row.code_challenge ?? undefined,
        scopes: splitScopes(row.scopes),
        login: row.login,
        expiresAt: row.expires_at,
      }
    );
  }

  /** Drops codes that expired before `now`. */
  pruneCodes(now: number): number {
    return this.db.prepare('DELETE FROM sandbox_github_codes WHERE expires_at <= ?').run(now).changes;
  }

  // ------------------------------------------------------------------ tokens and grants

  /**
   * Stores a new access token (with its refresh token, if any), records the user's grant to the
   * app (its scopes accumulate: see `options.grantScopes`), and keeps at most `maxPerKind` tokens
   * per user/app/scope set: the oldest beyond that stop working, their refresh tokens with them.
   */
  issueToken(token: string, record: SandboxToken, maxPerKind: number, options: SandboxIssueOptions = {}): void {
    this.db
      .transaction(() => {
        const scopes = joinScopes(record.scopes);
        this.db
          .prepare(
            'INSERT INTO sandbox_github_tokens (token_hash, client_id, login, scopes, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
          )
          .run(hash(token), record.clientId, record.login, scopes, record.issuedAt, record.expiresAt ?? null);
        if (options.refresh) {
          this.db
            .prepare(
              'INSERT INTO sandbox_github_refresh_tokens (token_hash, access_token_hash, client_id, login, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
            )
            .run(hash(options.refresh.token), hash(token), record.clientId, record.login, record.issuedAt, options.refresh.expiresAt);
        }
        const pruned = this.db
          .prepare(
            `DELETE FROM sandbox_github_tokens WHERE seq IN (
             SELECT seq FROM sandbox_github_tokens WHERE login = ? AND client_id = ? AND scopes = ?
             ORDER BY seq DESC LIMIT -1 OFFSET ?) RETURNING token_hash`,
          )
          .all(record.login, record.clientId, scopes, maxPerKind) as Array<{ token_hash: string }>;
        const dropRefresh = this.db.prepare('DELETE FROM sandbox_github_refresh_tokens WHERE access_token_hash = ?');
        for (const { token_hash } of pruned) dropRefresh.run(token_hash);
        const previous = this.findGrant(record.clientId, record.login)?.scopes;
        const grantScopes = options.grantScopes ? options.grantScopes(previous) : unionScopes(previous ?? [], record.scopes);
        this.db
          .prepare(
            `INSERT INTO sandbox_github_grants (client_id, login, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (client_id, login) DO UPDATE SET scopes = excluded.scopes, updated_at = excluded.updated_at`,
          )
          .run(record.clientId, record.login, joinScopes(grantScopes), record.issuedAt, record.issuedAt);
      })
      .immediate();
  }

  /** The access token's record, expired or not (callers compare `expiresAt` with their clock). */
  findToken(token: string): SandboxToken | undefined {
    const row = this.db
      .prepare('SELECT client_id, login, scopes, issued_at, expires_at FROM sandbox_github_tokens WHERE token_hash = ?')
      .get(hash(token)) as TokenRow | undefined;
    return (
      row && {
        clientId: row.client_id,
        login: row.login,
        scopes: splitScopes(row.scopes),
        issuedAt: row.issued_at,
        expiresAt: row.expires_at ?? undefined,
      }
    );
  }

  /** Revokes one token (DELETE /applications/{client_id}/token), and the refresh token issued with it. */
  deleteToken(token: string): boolean {
    return this.db
      .transaction(() => {
        this.db.prepare('DELETE FROM sandbox_github_refresh_tokens WHERE access_token_hash = ?').run(hash(token));
        return this.db.prepare('DELETE FROM sandbox_github_tokens WHERE token_hash = ?').run(hash(token)).changes > 0;
      })
      .immediate();
  }

  /**
   * How many tokens work, for one login (case-insensitive) or for everybody. With `now`, access
   * tokens that expired by then are not counted.
   */
  countTokens(login?: string, now?: number): number {
    const row = this.db
      .prepare(
        `SELECT COUNT(*) AS n FROM sandbox_github_tokens
         WHERE (@login IS NULL OR login = @login) AND (@now IS NULL OR expires_at IS NULL OR expires_at > @now)`,
      )
      .get({ login: login ?? null, now: now ?? null }) as { n: number };
    return row.n;
  }

  /**
   * Makes access tokens expired as of `now` (those of one login, case-insensitive, or everybody's;
   * optionally of one app only). Refresh tokens keep working. Returns how many changed.
   */
  expireTokens(now: number, login?: string, clientId?: string): number {
    return this.db
      .prepare(
        `UPDATE sandbox_github_tokens SET expires_at = @now
         WHERE (expires_at IS NULL OR expires_at > @now)
           AND (@login IS NULL OR login = @login) AND (@clientId IS NULL OR client_id = @clientId)`,
      )
      .run({ now, login: login ?? null, clientId: clientId ?? null }).changes;
  }

  /**
   * Uses a refresh token of `clientId`: atomically burns it and its access token and stores the new
   * pair, with the old token's scopes. Undefined when the refresh token is unknown, already used,
   * revoked, expired (it is then deleted) or belongs to another app (it is then left alone).
   */
  rotateRefreshToken(
    refreshToken: string,
    clientId: string,
    now: number,
    next: SandboxRotation,
  ): { login: string; scopes: string[] } | undefined {
    return this.db
      .transaction(() => {
        const row = this.db.prepare('SELECT * FROM sandbox_github_refresh_tokens WHERE token_hash = ?').get(hash(refreshToken)) as
          RefreshRow | undefined;
        if (!row || row.client_id !== clientId) return undefined;
        this.db.prepare('DELETE FROM sandbox_github_refresh_tokens WHERE token_hash = ?').run(row.token_hash);
        if (row.expires_at <= now) return undefined;
        const old = this.db
          .prepare('DELETE FROM sandbox_github_tokens WHERE token_hash = ? RETURNING scopes')
          .get(row.access_token_hash) as { scopes: string } | undefined;
        const scopes = old?.scopes ?? '';
        this.db
          .prepare(
            'INSERT INTO sandbox_github_tokens (token_hash, client_id, login, scopes, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
          )
          .run(hash(next.accessToken), row.client_id, row.login, scopes, next.issuedAt, next.accessExpiresAt);
        this.db
          .prepare(
            'INSERT INTO sandbox_github_refresh_tokens (token_hash, access_token_hash, client_id, login, issued_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
          )
          .run(hash(next.refreshToken), hash(next.accessToken), row.client_id, row.login, next.issuedAt, next.refreshExpiresAt);
        return { login: row.login, scopes: splitScopes(scopes) };
      })
      .immediate();
  }

  /** How many refresh tokens can still be used (not yet used, revoked or expired by `now`). */
  countRefreshTokens(login?: string, now?: number): number {
    const row = this.db
      .prepare(
        `SELECT COUNT(*) AS n FROM sandbox_github_refresh_tokens
         WHERE (@login IS NULL OR login = @login) AND (@now IS NULL OR expires_at > @now)`,
      )
      .get({ login: login ?? null, now: now ?? null }) as { n: number };
    return row.n;
  }

  /**
   * Revokes a user's grant to an app (DELETE /applications/{client_id}/grant): every token and
   * refresh token and pending code of that app for that user goes, and the revocation is recorded.
   */
  revokeGrant(clientId: string, login: string, now: number): void {
    this.db
      .transaction(() => {
        this.db.prepare('DELETE FROM sandbox_github_tokens WHERE client_id = ? AND login = ?').run(clientId, login);
        this.db.prepare('DELETE FROM sandbox_github_refresh_tokens WHERE client_id = ? AND login = ?').run(clientId, login);
        this.db.prepare('DELETE FROM sandbox_github_codes WHERE client_id = ? AND login = ?').run(clientId, login);
        this.db.prepare('DELETE FROM sandbox_github_grants WHERE client_id = ? AND login = ?').run(clientId, login);
        this.db
          .prepare('INSERT INTO sandbox_github_grant_revocations (client_id, login, revoked_at) VALUES (?, ?, ?)')
          .run(clientId, login, now);
      })
      .immediate();
  }

  /** The user's (case-insensitive) grant to the app, if any. */
  findGrant(clientId: string, login: string): SandboxGrant | undefined {
    const r = this.db.prepare('SELECT * FROM sandbox_github_grants WHERE client_id = ? AND login = ?').get(clientId, login) as
      GrantRow | undefined;
    return r && { clientId: r.client_id, login: r.login, scopes: splitScopes(r.scopes), createdAt: r.created_at, updatedAt: r.updated_at };
  }

  listGrants(login?: string): SandboxGrant[] {
    const rows = (
      login === undefined
        ? this.db.prepare('SELECT * FROM sandbox_github_grants ORDER BY created_at, client_id').all()
        : this.db.prepare('SELECT * FROM sandbox_github_grants WHERE login = ? ORDER BY created_at, client_id').all(login)
    ) as GrantRow[];
    return rows.map((r) => ({
      clientId: r.client_id,
      login: r.login,
      scopes: splitScopes(r.scopes),
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    }));
  }

  /** Every grant revocation, oldest first. */
  listGrantRevocations(): SandboxGrantRevocation[] {
    return (
      this.db.prepare('SELECT client_id, login, revoked_at FROM sandbox_github_grant_revocations ORDER BY seq').all() as Array<{
        client_id: string;
        login: string;
        revoked_at: number;
      }>
    ).map((r) => ({ clientId: r.client_id, login: r.login, revokedAt: r.revoked_at }));
  }

  // ------------------------------------------------------------------ issues

  /** Creates an issue with the repository's next number (numbers are per repository, never reused). */
  createIssue(issue: Omit<SandboxIssue, 'id' | 'number'>): SandboxIssue {
    return this.db
      .transaction(() => {
        const { last_number: number } = this.db
          .prepare(
            `INSERT INTO sandbox_github_repos (owner, repo, last_number, created_at, created_by) VALUES (?, ?, 1, ?, ?)
           ON CONFLICT (owner, repo) DO UPDATE SET last_number = last_number + 1 RETURNING last_number`,
          )
          .get(issue.owner, issue.repo, issue.createdAt, issue.author) as { last_number: number };
        const row = this.db
          .prepare(
            'INSERT INTO sandbox_github_issues (owner, repo, number, title, body, labels, author, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *',
          )
          .get(
            issue.owner,
            issue.repo,
            number,
            issue.title,
            issue.body,
            JSON.stringify(issue.labels),
            issue.author,
            issue.createdAt,
          ) as IssueRow;
        return toIssue(row);
      })
      .immediate();
  }

  /** The issue `number` of owner/repo (names compared case-insensitively). */
  getIssue(owner: string, repo: string, number: number): SandboxIssue | undefined {
    const row = this.db
      .prepare('SELECT * FROM sandbox_github_issues WHERE owner = ? COLLATE NOCASE AND repo = ? COLLATE NOCASE AND number = ?')
      .get(owner, repo, number) as IssueRow | undefined;
    return row && toIssue(row);
  }

  /** Every issue, in creation order. */
  listIssues(): SandboxIssue[] {
    return (this.db.prepare('SELECT * FROM sandbox_github_issues ORDER BY id').all() as IssueRow[]).map(toIssue);
  }

  /** The issues of owner/repo (names compared case-insensitively), in creation order. */
  listRepositoryIssues(owner: string, repo: string): SandboxIssue[] {
    return (
      this.db
        .prepare('SELECT * FROM sandbox_github_issues WHERE owner = ? COLLATE NOCASE AND repo = ? COLLATE NOCASE ORDER BY number')
        .all(owner, repo) as IssueRow[]
    ).map(toIssue);
  }

  // ------------------------------------------------------------------ repositories

  /** The repository owner/repo (names compared case-insensitively), if it exists. */
  findRepository(owner: string, repo: string): SandboxRepository | undefined {
    const row = this.db
      .prepare('SELECT id, owner, repo, created_at, created_by FROM sandbox_github_repos WHERE owner = ? AND repo = ?')
      .get(owner, repo) as RepoRow | undefined;
    return row && toRepository(row);
  }

  /** The repository owner/repo, created (without issues, with the next id, by `createdBy`) when there is none. */
  ensureRepository(owner: string, repo: string, createdAt: number, createdBy: string | null = null): SandboxRepository {
    return this.db
      .transaction(() => {
        this.db
          .prepare(
            'INSERT INTO sandbox_github_repos (owner, repo, last_number, created_at, created_by) VALUES (?, ?, 0, ?, ?) ON CONFLICT (owner, repo) DO NOTHING',
          )
          .run(owner, repo, createdAt, createdBy);
        return this.findRepository(owner, repo)!;
      })
      .immediate();
  }

  /** The repositories of one owner (case-insensitive), or every one, oldest first. */
  listRepositories(owner?: string): SandboxRepository[] {
    return (
      this.db
        .prepare(
          'SELECT id, owner, repo, created_at, created_by FROM sandbox_github_repos WHERE @owner IS NULL OR owner = @owner ORDER BY created_at, id',
        )
        .all({ owner: owner ?? null }) as RepoRow[]
    ).map(toRepository);
  }

  /**
   * Deletes the repository owner/repo with its issues, but only while it is still the repository
   * `id` (not one created again under that name since). Returns whether it deleted it.
   */
  deleteRepository(owner: string, repo: string, id: number): boolean {
    return this.db
      .transaction(() => {
        const gone =
          this.db.prepare('DELETE FROM sandbox_github_repos WHERE owner = ? AND repo = ? AND id = ?').run(owner, repo, id).changes > 0;
        if (gone)
          this.db.prepare('DELETE FROM sandbox_github_issues WHERE owner = ? COLLATE NOCASE AND repo = ? COLLATE NOCASE').run(owner, repo);
        return gone;
      })
      .immediate();
  }
}
