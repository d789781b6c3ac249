import Database from 'better-sqlite3';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { loadConfig } from '../../src/config/env.js';
import { ConnectionService } from '../../src/connections/index.js';
import { Sealer } from '../../src/crypto/index.js';
import { createLogger } from '../../src/log.js';
import type { ProviderAccount, ProviderTokens } from '../../src/providers/provider.js';
import { openStore } from '../../src/store/index.js';
import type { SandboxIssuedToken } from '../../src/dev/sandbox-github/index.js';
import type { GitHubStandIn } from './github-standin.js';

/**
 * Writes a connection straight into a broker's database (as a finished connect flow would), sealed
 * with the broker's own key ring: for tests that start from "already connected".
 */
export async function seedConnection(
  env: Record<string, string>,
  sub: string,
  provider: string,
  account: ProviderAccount,
  tokens: ProviderTokens,
): Promise<void> {
  const config = loadConfig(env);
  const store = await openStore(config.database);
  try {
    const service = new ConnectionService(store, new Sealer(config.tokenKeys), createLogger('error'));
    await service.save(principalFromVerifiedClaims(env.OIDC_ISSUER!, sub), provider, account, tokens, { refuseShared: false });
  } finally {
    await store.close();
  }
}

/** Reads one connection row (without tokens) from a broker's database. */
export async function readConnection(env: Record<string, string>, sub: string, provider: string) {
  const store = await openStore(loadConfig(env).database);
  try {
    return await store.connections.find({ issuer: env.OIDC_ISSUER!, subject: sub }, provider);
  } finally {
    await store.close();
  }
}

/**
 * Connects `sub` to the stand-in's GitHub account `login` with a token the stand-in just issued
 * (with `scopes`, or its default scopes and `repo` recorded), and returns that token.
 */
export async function seedGitHubConnection(
  stack: { env: Record<string, string>; github: GitHubStandIn },
  sub: string,
  login: string,
  scopes?: string[],
): Promise<SandboxIssuedToken> {
  const issued = stack.github.issueTokenFor(login, scopes ? { scopes } : undefined);
  await seedConnection(
    stack.env,
    sub,
    'github',
    { id: String(stack.github.users.get(login)!.id), login },
    { accessToken: issued.accessToken, tokenType: 'bearer', scopes: scopes ?? ['repo'] },
  );
  return issued;
}

/** Runs one write on the stack's SQLite file behind the broker's back (a row aged, a row moved), and returns how many rows changed. */
export function writeDb(stack: { env: Record<string, string | undefined> }, sql: string, ...params: unknown[]): number {
  const db = new Database(stack.env.DATABASE_PATH!, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return db.prepare(sql).run(...params).changes;
  } finally {
    db.close();
  }
}
