// Shared set-up of the gateway suites: a PROVIDERS_FILE with `upstreams:`, connections seeded with
// stand-in tokens, and the upstream fixture's token check made against the GitHub stand-in.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GitHubStandIn } from './github-standin.js';
import { seedConnection } from './seed.js';
import { startStack, type Stack, type StackOptions } from './stack.js';
import { readThrough, useSuite } from './suite.js';
import { startUpstreamServer, type UpstreamServer } from './upstream-server.js';

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

/** `inputRequests` as the broker relays them from the upstream named `name`: each question led by that name. */
export function askedBy(name: string, inputRequests: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(inputRequests).map(([key, request]) => {
      const r = request as { params: { message: string } };
      return [key, { ...r, params: { ...r.params, message: `${name} asks: ${r.params.message}` } }];
    }),
  );
}

/** One upstream of a gateway suite: the fixture server's era, and its `upstreams:` entry but for id (the key) and url. */
export interface SuiteUpstream {
  era: 'modern' | 'legacy';
  /** `auth: none`: the server takes calls without a token; else it checks each token at the stack's GitHub stand-in. */
  anonymous?: boolean;
  entry: Record<string, unknown>;
}

/** The fixture servers, a PROVIDERS_FILE naming them and a stack reading it. */
export interface Gateway<K extends string> {
  stack: Stack;
  servers: Record<K, UpstreamServer>;
  file: { path: string; remove(): void };
  /** The `upstreams:` entries the file was written with (ids and urls filled in), to write it again with more. */
  entries: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Starts a fixture server for each of `upstreams`, then a stack (`options`) whose PROVIDERS_FILE lists them under their keys. */
export async function startGateway<K extends string>(upstreams: Record<K, SuiteUpstream>, options: StackOptions = {}): Promise<Gateway<K>> {
  let stack: Stack | undefined;
  const verify = standInVerifier(() => stack!.github);
  const servers: Partial<Record<K, UpstreamServer>> = {};
  let file: { path: string; remove(): void } | undefined;
  const close = async () => {
    await stack?.close();
    await Promise.all(Object.values<UpstreamServer | undefined>(servers).map((s) => s?.close()));
    file?.remove();
  };
  try {
    const keys = Object.keys(upstreams) as K[];
    for (const key of keys)
      servers[key] = await startUpstreamServer({
        era: upstreams[key].era,
        ...(upstreams[key].anonymous ? { anonymous: true } : { verify }),
      });
    const entries = keys.map((key) => ({ id: key, url: servers[key]!.url, ...upstreams[key].entry }));
    file = providersFile({ upstreams: entries });
    stack = await startStack({ ...options, env: { ...options.env, PROVIDERS_FILE: file.path } });
    return { stack, servers: servers as Record<K, UpstreamServer>, file, entries, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * {@link startGateway} for the enclosing `describe` (started before its first test, closed after its
 * last): the stack, each server and the file as handles that read through to them (`useSuite`).
 */
export function useGateway<K extends string>(
  upstreams: Record<K, SuiteUpstream>,
  options: StackOptions = {},
): Pick<Gateway<K>, 'stack' | 'servers' | 'file'> & { entries(): Array<Record<string, unknown>> } {
  const gateway = useSuite('the gateway', () => startGateway(upstreams, options));
  const servers = Object.fromEntries(Object.keys(upstreams).map((key) => [key, readThrough(() => gateway.servers[key as K])])) as Record<
    K,
    UpstreamServer
  >;
  return { stack: readThrough(() => gateway.stack), servers, file: readThrough(() => gateway.file), entries: () => gateway.entries };
}
