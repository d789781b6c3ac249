// What every run starts before its phases: the identity provider, the GitHub stand-in seeded with
// the connected users, their connections in broker A's SQLite file, the baseline and broker A;
// then one sanity call to each target.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { ConnectionService } from '../../src/connections/index.js';
import { Sealer } from '../../src/crypto/index.js';
import { openSqliteStore, type Store } from '../../src/store/index.js';
import { openDevTables } from '../../src/dev/store/index.js';
import { freePort, startIdp, type StartedIdp } from '../../test/support/idp.js';
import { envelope, rawCall } from '../../test/support/mcp.js';
import { BROKER_CLIENT, brokerIdpClient } from '../../test/support/stack.js';
import type { Child } from './proc.js';
import type { Resources } from './resources.js';
import { CONNECTED_USERS, profiled, say, silent } from './settings.js';
import { expectComplete, firstCall } from './wire.js';

/**
 * Broker A's limits, all off: the completion runs drive ~20 sign-ins per process from one IP (the
 * page limit would refuse them), and the phases that only compare one broker with another measure
 * both alike. The throughput, exchange and gateway phases measure a broker with `withDefaultLimits`
 * too, and report that figure against the target, this one beside it.
 */
export const LIMITS_OFF = { RATE_LIMIT_PER_MINUTE: '0', MCP_RATE_LIMIT_PER_MINUTE: '0', SERVICE_RATE_LIMIT_PER_MINUTE: '0' } as const;

/**
 * `env` with every rate limit at its default (the page and failure limit RATE_LIMIT_PER_MINUTE,
 * the per-user MCP_RATE_LIMIT_PER_MINUTE): what a deployment runs. The per-service
 * limit is the one exception a caller may set (`serviceLimit`): its default of 600/min caps the
 * one busy service the bench loads at 10 exchanges/s.
 */
export function withDefaultLimits(env: Record<string, string>, serviceLimit?: number): Record<string, string> {
  const out = Object.fromEntries(Object.entries(env).filter(([k]) => !(k in LIMITS_OFF)));
  return serviceLimit === undefined ? out : { ...out, SERVICE_RATE_LIMIT_PER_MINUTE: String(serviceLimit) };
}

export interface BenchUser {
  sub: string;
  login: string;
  githubToken: string;
}

export interface Stack {
  idp: StartedIdp;
  publicUrl: string;
  /** Broker A's environment (SQLite), less PORT. */
  env: Record<string, string>;
  brokerDb: string;
  encryptionKey: Buffer;
  users: BenchUser[];
  /** One access token per connected user, in `users` order. */
  tokens: string[];
  baseline: Child;
  brokerA: Child;
  gh: Child;
}

/** Saves each user's GitHub connection through the real ConnectionService, sealed with the broker's key. */
export async function seedConnections(store: Store, issuer: string, users: readonly BenchUser[], encryptionKey: Buffer): Promise<void> {
  const service = new ConnectionService(store, new Sealer([encryptionKey]), silent);
  for (const [i, u] of users.entries()) {
    await service.save(
      principalFromVerifiedClaims(issuer, u.sub),
      'github',
      { id: String(1000 + i), login: u.login },
      { accessToken: u.githubToken, tokenType: 'bearer', scopes: ['repo'] },
      { refuseShared: false },
    );
  }
  await store.close();
}

export async function startStack(resources: Resources): Promise<Stack> {
  const { dir } = resources;
  const portA = await freePort();
  const publicUrl = `http://127.0.0.1:${portA}`;
  const idp = await startIdp({
    clients: [brokerIdpClient(publicUrl)],
    resource: `${publicUrl}/mcp`,
  });
  resources.idp = idp;
  const github = { clientId: 'Iv1.bench', clientSecret: randomBytes(20).toString('hex') };
  const sandboxDb = join(dir, 'github.db');
  const brokerDb = join(dir, 'broker.db');
  const encryptionKey = randomBytes(32);
  const users = Array.from({ length: CONNECTED_USERS }, (_, i) => ({
    sub: `bench-user-${i}`,
    login: `bench-gh-${i}`,
    githubToken: `gho_${randomBytes(18).toString('hex')}`,
  }));
  {
    const db = openSqliteStore(sandboxDb);
    const sandbox = openDevTables(db).sandboxGitHub;
    for (const u of users) {
      sandbox.ensureUser(u.login);
      sandbox.issueToken(u.githubToken, { clientId: github.clientId, login: u.login, scopes: ['repo'], issuedAt: Date.now() }, 10);
    }
    await db.close();
  }
  await seedConnections(openSqliteStore(brokerDb), idp.issuer, users, encryptionKey);
  const gh = await resources.start('github', 'bench/servers/github.ts', {
    SANDBOX_DB: sandboxDb,
    GITHUB_CLIENT_ID: github.clientId,
    GITHUB_CLIENT_SECRET: github.clientSecret,
  });
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PUBLIC_URL: publicUrl,
    DATABASE_PATH: brokerDb,
    OIDC_ISSUER: idp.issuer,
    OIDC_CLIENT_ID: BROKER_CLIENT.id,
    OIDC_CLIENT_SECRET: BROKER_CLIENT.secret,
    GITHUB_CLIENT_ID: github.clientId,
    GITHUB_CLIENT_SECRET: github.clientSecret,
    GITHUB_WEB_URL: gh.url,
    GITHUB_API_URL: `${gh.url}/api/v3`,
    BROKER_SECRET: randomBytes(32).toString('base64url'),
    TOKEN_ENCRYPTION_KEY: encryptionKey.toString('base64'),
    REPEAT_HOLD_SECONDS: '20',
    LOG_LEVEL: 'info',
    ...LIMITS_OFF,
  };
  const tokens = await Promise.all(users.map((u) => idp.mintAccessToken({ sub: u.sub, expiresInSeconds: 3600 })));

  // allSettled: if one fails to start, the other is still in `children` before the run stops them.
  const [baselineStart, brokerStart] = await Promise.allSettled([
    resources.start(
      'baseline',
      'bench/servers/baseline.ts',
      // Its github_whoami calls the same stand-in with one fixed token (users[0]'s).
      { GITHUB_API_URL: `${gh.url}/api/v3`, BASELINE_GITHUB_TOKEN: users[0]!.githubToken },
      profiled('baseline'),
    ),
    resources.spawnBroker('broker A', { ...env, PORT: String(portA) }, profiled('broker')),
  ]);
  if (baselineStart.status === 'rejected') throw baselineStart.reason;
  if (brokerStart.status === 'rejected') throw brokerStart.reason;
  const baseline = baselineStart.value;
  const brokerA = brokerStart.value;
  say(`baseline ${baseline.url}, broker A ${brokerA.url}, GitHub stand-in ${gh.url}, ${users.length} connected users`);

  // Every target answers what it should before it is loaded.
  expectComplete(
    await rawCall(`${baseline.url}/mcp`, undefined, { method: 'tools/call', params: { name: 'ping', arguments: {}, _meta: envelope() } }),
    'baseline ping',
  );
  const baselineWhoami = expectComplete(await firstCall(baseline.url, tokens[0]!, 'github_whoami'), 'baseline github_whoami');
  if (baselineWhoami.structuredContent.login !== users[0]!.login)
    throw new Error(`baseline github_whoami: ${JSON.stringify(baselineWhoami.structuredContent)}`);
  await checkTargets(brokerA.url, tokens, users, '');
  return { idp, publicUrl, env, brokerDb, encryptionKey, users, tokens, baseline, brokerA, gh };
}

/** `list_connections` and `github_whoami` on a broker answer for the user whose token was sent. */
export async function checkTargets(url: string, tokens: readonly string[], users: readonly BenchUser[], label: string): Promise<void> {
  const listed = expectComplete(await firstCall(url, tokens[0]!, 'list_connections'), `${label}list_connections`);
  if (listed.structuredContent.connections?.[0]?.login !== users[0]!.login)
    throw new Error(`${label}list_connections: ${JSON.stringify(listed.structuredContent)}`);
  const whoami = expectComplete(await firstCall(url, tokens[1]!, 'github_whoami'), `${label}github_whoami`);
  if (whoami.structuredContent.login !== users[1]!.login)
    throw new Error(`${label}github_whoami: ${JSON.stringify(whoami.structuredContent)}`);
}
