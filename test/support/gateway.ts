// Shared set-up of the gateway suites: a PROVIDERS_FILE with `upstreams:`, connections seeded with
// stand-in tokens, and the upstream fixture's token check made against the GitHub stand-in.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GitHubStandIn } from './github-standin.js';
import { seedConnection } from './seed.js';
import type { Stack } from './stack.js';

/** Writes `content` as a PROVIDERS_FILE in a folder of its own; `remove` deletes it. */
export function providersFile(content: unknown): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'gateway-file-'));
  const path = join(dir, 'providers.json');
  writeFileSync(path, JSON.stringify(content));
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A token check against the stand-in's GET /user: the login the token belongs to, or undefined (the fixture answers 401). */
export function standInVerifier(github: () => GitHubStandIn): (token: string) => Promise<string | undefined> {
  return async (token) => {
    const res = await fetch(`${github().apiUrl}/user`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
    if (!res.ok) return undefined;
    return ((await res.json()) as { login: string }).login;
  };
}

/** Links `sub`'s GitHub to `login` at the stand-in (a finished connect flow); returns the access token. */
export async function connectGitHub(
  stack: Stack,
  sub: string,
  login: string,
  opts: { scopes?: string[]; expiresAt?: number } = {},
): Promise<{ accessToken: string; refreshToken?: string }> {
  const issued = stack.github.issueTokenFor(login, { scopes: opts.scopes ?? ['repo'] });
  await seedConnection(
    stack.env,
    sub,
    'github',
    { id: String(stack.github.users.get(login)!.id), login },
    {
      accessToken: issued.accessToken,
      tokenType: 'bearer',
      ...(issued.refreshToken ? { refreshToken: issued.refreshToken } : {}),
      ...(opts.expiresAt ? { expiresAt: opts.expiresAt } : issued.expiresAt ? { expiresAt: issued.expiresAt } : {}),
      scopes: issued.scopes,
    },
  );
  return { accessToken: issued.accessToken, ...(issued.refreshToken ? { refreshToken: issued.refreshToken } : {}) };
}

/** `_meta` without the protocol's own `io.modelcontextprotocol/` keys; undefined when nothing is left. */
export function foreignMeta(meta: unknown): Record<string, unknown> | undefined {
  if (!meta || typeof meta !== 'object') return undefined;
  const kept = Object.entries(meta).filter(([k]) => !k.startsWith('io.modelcontextprotocol/'));
  return kept.length ? Object.fromEntries(kept) : undefined;
}

/** A tool result as the test compares it: its `_meta` without the protocol's keys, no resultType. */
export function comparable(result: Record<string, unknown>): Record<string, unknown> {
  const { _meta, resultType: _ignored, ...rest } = result;
  const meta = foreignMeta(_meta);
  return meta ? { ...rest, _meta: meta } : rest;
}
