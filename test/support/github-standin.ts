// A loopback stand-in for GitHub (OAuth web flow + a sliver of the REST API), used by tests
// because the real GitHub is unreachable. It is a thin wrapper around the sandbox GitHub
// (src/dev/sandbox-github/), served at the root of its own loopback server over an in-memory
// SQLite store, so tests and `npm run dev` exercise the same GitHub behaviour. Like GitHub (see its
// "Authorizing OAuth apps" documentation): token-endpoint errors come back as HTTP 200 with an `error`
// field, the token response is form-encoded unless `Accept: application/json`, PKCE is S256-only
// and optional, and the REST API lives under /api/v3 (GitHub Enterprise Server layout). It never
// logs tokens.
//
// Its one client is an OAuth App by default (gho_ tokens that never expire, with scopes) or, with
// `kind: 'github-app'`, a GitHub App (ghu_ access tokens that expire after `accessTokenTtlSeconds`,
// single-use ghr_ refresh tokens that rotate; refreshes are counted in `refreshes`).
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { createSandboxGitHub, type SandboxAppKind, type SandboxIssuedToken } from '../../src/dev/sandbox-github/index.js';
import { openDevTables, type SandboxGitHubStore, type SandboxIssue, type SandboxUser } from '../../src/dev/store/index.js';
import { openSqliteStore } from '../../src/store/index.js';

export interface StandInOptions {
  clientId?: string; // default 'Iv1.standin'
  clientSecret?: string; // default: 40 random hex characters
  now?: () => number; // clock in ms, for code and token expiry and rate-limit windows (default Date.now)
  kind?: SandboxAppKind; // default 'oauth-app'
  accessTokenTtlSeconds?: number; // github-app access token lifetime (default 28800)
}

/** Faults are sticky: they apply to every matching request until cleared (set the field to undefined). */
export interface StandInFaults {
  token?: 'http500' | 'timeout' | 'malformed' | 'error200';
  api?: 401 | 403 | 429 | 500;
  /** Delays the answer to every refresh request by this many ms (the rotation happens on arrival). */
  refreshDelayMs?: number;
  /** The same for the code exchange; the code is spent (and the token issued) on arrival. */
  exchangeDelayMs?: number;
  /** Fields GET /user answers with over the user's own (say, a `login` GitHub itself would never send). */
  userFields?: Record<string, unknown>;
}

/** An issue as the sandbox keeps it, without its row id and time, plus the page GitHub would link to. */
export type StandInIssue = Omit<SandboxIssue, 'id' | 'createdAt'> & { html_url: string };

export interface GitHubStandIn {
  webUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  requests: Array<{ method: string; path: string; at: number }>;
  /** The W3C trace context each request arrived with (test/tracing.test.ts). */
  traceHeaders: Array<{ method: string; path: string; traceparent: string | undefined }>;
  issues: StandInIssue[];
  faults: StandInFaults;
  users: Map<string, { id: number; login: string; name: string }>;
  revokedGrants: Array<{ clientId: string; login: string }>;
  /** Access tokens that work now (not revoked, not rotated away, not expired). */
  activeTokenCount(login?: string): number;
  kind: SandboxAppKind;
  /** Token requests with grant_type=refresh_token so far, successful or not. */
  readonly refreshCount: number;
  /** Each of those requests, in arrival order (`at` from the `now` clock). */
  refreshes: Array<{ at: number; ok: boolean }>;
  /** TCP connections the stand-in accepted so far: fewer than its requests when clients keep connections alive. */
  readonly connectionCount: number;
  /** Mints a token pair for `login` as if the user had just authorized the app (no browser). */
  issueTokenFor(login: string, opts?: { expiresInSeconds?: number; scopes?: string[] }): SandboxIssuedToken;
  /** Makes the current access tokens of `login` (or everybody's) expired; refresh tokens keep working. */
  expireAccessTokens(login?: string): void;
  close(): Promise<void>;
}

type StandInUser = { id: number; login: string; name: string };

/** A user record whose field assignments are written through to the store. */
function liveUser(store: SandboxGitHubStore, user: SandboxUser): StandInUser {
  const current = { ...user };
  const write = (next: SandboxUser) => {
    store.putUser(next);
    Object.assign(current, next);
  };
  return {
    get id() {
      return current.id;
    },
    set id(id: number) {
      write({ ...current, id });
    },
    get login() {
      return current.login;
    },
    set login(login: string) {
      write({ ...current, login });
    },
    get name() {
      return current.name;
    },
    set name(name: string) {
      write({ ...current, name });
    },
  };
}

/** `users` as the Map it always was, but read from and written to the sandbox store. */
class StoreBackedUsers extends Map<string, StandInUser> {
  readonly #store: SandboxGitHubStore;

  constructor(store: SandboxGitHubStore) {
    super();
    this.#store = store;
  }

  #sync(): void {
    super.clear();
    for (const user of this.#store.listUsers()) super.set(user.login, liveUser(this.#store, user));
  }

  override get(key: string): StandInUser | undefined {
    this.#sync();
    return super.get(key);
  }
  override has(key: string): boolean {
    this.#sync();
    return super.has(key);
  }
  override get size(): number {
    this.#sync();
    return super.size;
  }
  override keys(): MapIterator<string> {
    this.#sync();
    return super.keys();
  }
  override values(): MapIterator<StandInUser> {
    this.#sync();
    return super.values();
  }
  override entries(): MapIterator<[string, StandInUser]> {
    this.#sync();
    return super.entries();
  }
  override [Symbol.iterator](): MapIterator<[string, StandInUser]> {
    return this.entries();
  }
  override forEach(fn: (value: StandInUser, key: string, map: Map<string, StandInUser>) => void, thisArg?: unknown): void {
    this.#sync();
    super.forEach(fn, thisArg);
  }
  override set(_key: string, value: StandInUser): this {
    this.#store.putUser({ id: value.id, login: value.login, name: value.name });
    return this;
  }
  override delete(key: string): boolean {
    return this.#store.deleteUser(key);
  }
  override clear(): void {
    for (const user of this.#store.listUsers()) this.#store.deleteUser(user.login);
  }
}

export async function startGitHubStandIn(options: StandInOptions = {}): Promise<GitHubStandIn> {
  const clientId = options.clientId ?? 'Iv1.standin';
  const clientSecret = options.clientSecret ?? randomBytes(20).toString('hex');
  const now = options.now ?? Date.now;
  const database = openSqliteStore(':memory:');
  const store = openDevTables(database).sandboxGitHub;
  const requests: GitHubStandIn['requests'] = [];
  const faults: StandInFaults = {};
  const users = new StoreBackedUsers(store);
  const kind = options.kind ?? 'oauth-app';
  const refreshes: GitHubStandIn['refreshes'] = [];

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const traceHeaders: GitHubStandIn['traceHeaders'] = [];
  app.use((req, _res, next) => {
    traceHeaders.push({ method: req.method, path: req.path, traceparent: req.get('traceparent') });
    next();
  });
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', (err?: Error) => (err ? reject(err) : resolve(s)));
  });
  let connectionCount = 0;
  server.on('connection', () => void connectionCount++);
  const sandbox = createSandboxGitHub({
    store,
    clients: [
      {
        clientId,
        clientSecret,
        kind,
        ...(options.accessTokenTtlSeconds !== undefined ? { accessTokenTtlSeconds: options.accessTokenTtlSeconds } : {}),
      },
    ],
    publicBase: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    faults,
    // Path only: never the query, never tokens.
    onRequest: (method, path) => requests.push({ method, path, at: now() }),
    onRefresh: (ok) => refreshes.push({ at: now(), ok }),
    now,
    siteName: 'GitHub stand-in',
  });
  app.get(`${new URL(sandbox.apiUrl).pathname.replace(/\/$/, '')}/user`, (_req, res, next) => {
    const fields = faults.userFields;
    if (fields) {
      const json = res.json.bind(res);
      res.json = (body: Record<string, unknown>) => json({ ...body, ...fields });
    }
    next();
  });
  app.use(sandbox.router);
  const { webUrl, apiUrl } = sandbox;

  return {
    webUrl,
    apiUrl,
    clientId,
    clientSecret,
    requests,
    traceHeaders,
    get issues(): StandInIssue[] {
      return store.listIssues().map((i) => ({
        owner: i.owner,
        repo: i.repo,
        number: i.number,
        title: i.title,
        body: i.body,
        labels: i.labels,
        author: i.author,
        html_url: `${webUrl}/${i.owner}/${i.repo}/issues/${i.number}`,
      }));
    },
    get faults(): StandInFaults {
      return faults;
    },
    set faults(next: StandInFaults) {
      // The sandbox reads this one object on every request: replace its contents, not the object.
      delete faults.token;
      delete faults.api;
      delete faults.refreshDelayMs;
      delete faults.exchangeDelayMs;
      delete faults.userFields;
      Object.assign(faults, next);
    },
    users,
    get revokedGrants() {
      return store.listGrantRevocations().map(({ clientId: id, login }) => ({ clientId: id, login }));
    },
    activeTokenCount: (login) => store.countTokens(login, now()),
    kind,
    get refreshCount() {
      return refreshes.length;
    },
    refreshes,
    get connectionCount() {
      return connectionCount;
    },
    issueTokenFor: (login, opts) => sandbox.issueToken(clientId, login, opts),
    expireAccessTokens: (login) => void sandbox.expireAccessTokens(login, clientId),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => {
          void database.close();
          if (err) reject(err);
          else resolve();
        });
        server.closeAllConnections(); // also ends requests parked by the 'timeout' fault
      }),
  };
}
