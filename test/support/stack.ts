import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/env.js';
import { createLogger } from '../../src/log.js';
import type { BrokerOptions } from '../../src/broker.js';
import { startBroker, type RunningBroker } from '../../src/server.js';
import type { Browser, Page } from './browser.js';
import { eventually } from './eventually.js';
import { startGitHubStandIn, type GitHubStandIn, type StandInOptions } from './github-standin.js';
import { startIdp, type IdpClient, type StartedIdp } from './idp.js';
import { LOOPBACK_EGRESS_ALLOW } from './egress.js';
import { bindLoopback, portOf } from './listen.js';

export const BROKER_CLIENT = { id: 'connect-broker', secret: 'broker-client-secret-for-tests' };

/** The broker's registration at the test IdP, for a broker that answers at `publicUrl`. */
export function brokerIdpClient(publicUrl: string, extra: Partial<IdpClient> = {}): IdpClient {
  return {
    client_id: BROKER_CLIENT.id,
    client_secret: BROKER_CLIENT.secret,
    redirect_uris: [`${publicUrl}/auth/callback`],
    token_endpoint_auth_method: 'client_secret_basic',
    ...extra,
  };
}

export interface Stack {
  publicUrl: string;
  mcpUrl: string;
  env: Record<string, string>;
  idp: StartedIdp;
  github: GitHubStandIn;
  broker: RunningBroker;
  /** Log lines the in-process broker wrote. */
  logs: string[];
  dir: string;
  token(sub: string, extra?: { aud?: string | string[]; expiresInSeconds?: number; iss?: string }): Promise<string>;
  /** Restarts the in-process broker on the same port and database. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export interface StackOptions {
  holdSeconds?: number;
  linkTtlSeconds?: number;
  env?: Record<string, string>;
  /** Options for the GitHub stand-in (e.g. `kind: 'github-app'`). */
  standIn?: StandInOptions;
  /** More clients registered at the IdP beside the broker's own. */
  idpClients?: (publicUrl: string) => IdpClient[];
  /** false: an IdP without RP-initiated logout (no end_session_endpoint). */
  idpEndSession?: boolean;
  /** Claims the IdP gives an account beside the defaults (e.g. a `name`). */
  idpAccountClaims?: (accountId: string) => Record<string, unknown>;
  /** Options of the in-process broker (e.g. shorter webhook retries), given its public URL. */
  brokerOptions?: (publicUrl: string) => BrokerOptions;
  /** Claims the IdP's `profile` scope releases into ID tokens beside name and preferred_username (e.g. `oid`). */
  idpProfileClaims?: string[];
  /** The broker's page client gets pairwise subjects at the IdP (Entra ID's `sub`), so its ID tokens' `sub` is no account id. */
  idpPairwiseBrokerClient?: boolean;
}

/** The environment every test broker shares (one set of secrets, one database in `dir`); add PORT. */
export function testBrokerEnv(o: {
  publicUrl: string;
  dir: string;
  idp: Pick<StartedIdp, 'issuer'>;
  github: GitHubStandIn;
  holdSeconds?: number | undefined;
}): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    PUBLIC_URL: o.publicUrl,
    DATABASE_PATH: join(o.dir, 'broker.db'),
    OIDC_ISSUER: o.idp.issuer,
    OIDC_CLIENT_ID: BROKER_CLIENT.id,
    OIDC_CLIENT_SECRET: BROKER_CLIENT.secret,
    GITHUB_CLIENT_ID: o.github.clientId,
    GITHUB_CLIENT_SECRET: o.github.clientSecret,
    GITHUB_WEB_URL: o.github.webUrl,
    GITHUB_API_URL: o.github.apiUrl,
    BROKER_SECRET: randomBytes(32).toString('base64url'),
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    REPEAT_HOLD_SECONDS: String(o.holdSeconds ?? 5),
    LOG_LEVEL: 'debug',
    // Tests drive many flows from one IP; test/rate-limits turns limits back on.
    RATE_LIMIT_PER_MINUTE: '0',
    // Load and fuzz suites send far more than 600 calls a minute as one user; test/rate-limits and
    // test/pending-bounds check the default.
    MCP_RATE_LIMIT_PER_MINUTE: '0',
    // Most tests link the stand-in's octocat to many users; test/providers checks the default (refuse).
    SHARED_ACCOUNT_POLICY: 'allow',
    // Upstreams, their authorization servers and webhook receivers all listen on loopback here;
    // test/gateway-mcp-auth-egress and test/egress check the rule without it.
    EGRESS_ALLOW: LOOPBACK_EGRESS_ALLOW,
  };
}

/**
 * What every broker under test stands on: a temporary folder, PUBLIC_URL on the broker's `port`,
 * the GitHub stand-in and the IdP with the broker registered (`idp` adds to that registration).
 */
export async function startBrokerSurroundings(
  folderPrefix: string,
  port: number,
  standIn: StandInOptions | undefined,
  idp: (publicUrl: string) => Omit<Parameters<typeof startIdp>[0], 'resource'>,
): Promise<{ dir: string; port: number; publicUrl: string; github: GitHubStandIn; idp: StartedIdp }> {
  const dir = mkdtempSync(join(tmpdir(), folderPrefix));
  const publicUrl = `http://127.0.0.1:${port}`;
  const github = await startGitHubStandIn(standIn);
  return { dir, port, publicUrl, github, idp: await startIdp({ ...idp(publicUrl), resource: `${publicUrl}/mcp` }) };
}

/** Starts the IdP, the GitHub stand-in and one broker (in this process) on loopback ports. */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  // Bound before anything names its port: no other suite running beside this one can take it.
  let listening = await bindLoopback();
  const { dir, port, publicUrl, github, idp } = await startBrokerSurroundings(
    'broker-test-',
    portOf(listening),
    options.standIn,
    (url) => ({
      clients: [
        brokerIdpClient(url, {
          post_logout_redirect_uris: [`${url}/auth/signed-out`],
          ...(options.idpPairwiseBrokerClient ? { subject_type: 'pairwise' as const } : {}),
        }),
        ...(options.idpClients?.(url) ?? []),
      ],
      ...(options.idpEndSession === false ? { endSession: false } : {}),
      ...(options.idpAccountClaims ? { accountClaims: options.idpAccountClaims } : {}),
      ...(options.idpProfileClaims ? { profileClaims: options.idpProfileClaims } : {}),
      ...(options.idpPairwiseBrokerClient ? { pairwiseSubjects: true } : {}),
    }),
  );
  const env: Record<string, string> = {
    PORT: String(port),
    ...testBrokerEnv({ publicUrl, dir, idp, github, holdSeconds: options.holdSeconds }),
    ...(options.linkTtlSeconds ? { CONNECT_LINK_TTL_SECONDS: String(options.linkTtlSeconds) } : {}),
    ...options.env,
  };
  const logs: string[] = [];
  const log = createLogger('debug', (line) => logs.push(line));
  let broker: RunningBroker;
  try {
    broker = await startBroker(loadConfig(env), log, { ...options.brokerOptions?.(publicUrl), listening });
  } catch (err) {
    // Do not leave the server, the IdP, the stand-in and the folder behind when the broker cannot start.
    await new Promise<void>((resolve) => listening.close(() => resolve()));
    await idp.close();
    await github.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const stack: Stack = {
    publicUrl,
    mcpUrl: `${publicUrl}/mcp`,
    env,
    idp,
    github,
    get broker() {
      return broker;
    },
    logs,
    dir,
    token: (sub, extra = {}) => idp.mintAccessToken({ sub, ...extra }),
    async restart() {
      await broker.close();
      // The same port again: PUBLIC_URL and the IdP's registration name it.
      listening = await bindLoopback(port);
      broker = await startBroker(loadConfig(env), log, { ...options.brokerOptions?.(publicUrl), listening });
    },
    async close() {
      await broker.close();
      await idp.close();
      await github.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return stack;
}

/**
 * Drives the whole browser side of a connect link as the user `user`: sign in at the IdP if asked,
 * accept our consent page, sign in at GitHub as `githubLogin` and authorize. Returns the final page.
 */
export async function completeConnect(
  browser: Browser,
  link: string,
  user: string,
  opts: {
    githubLogin?: string;
    consent?: 'allow' | 'cancel';
    atGitHub?: 'authorize' | 'cancel';
    /** Called with the page the user is on once signed in (the consent page, on the way). */
    onSignedIn?: (page: Page) => void;
  } = {},
): Promise<Page> {
  let page = await browser.open(link);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  opts.onSignedIn?.(page);
  if (page.status !== 200 || !/name="decision" value="allow"/.test(page.html)) return page;
  page = await browser.submit(page, { button: opts.consent ?? 'allow' });
  if ((opts.consent ?? 'allow') === 'cancel') return page;
  if (!/GitHub stand-in/.test(page.html)) return page;
  return browser.submit(page, { button: opts.atGitHub ?? 'authorize', fields: { login: opts.githubLogin ?? 'octocat' } });
}

/** Signs `browser` in to the broker as `user` through the IdP. */
export async function signIn(browser: Browser, stack: Stack, user: string): Promise<Page> {
  let page = await browser.open(`${stack.publicUrl}/auth/login?returnTo=%2Fconnections`);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  return page;
}

/** Resolves once `n` tool calls wait on the in-process broker's completion watcher (held repeats). */
export async function heldCalls(stack: Stack, n = 1): Promise<void> {
  await eventually(`${n} held tool call(s) at the broker`, () => stack.broker.broker.watcher.waiting >= n);
}
