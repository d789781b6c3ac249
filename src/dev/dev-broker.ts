import express from 'express';
import { writeFileSync } from 'node:fs';
import { startIssueService, type IssueService } from '../../examples/issue-service/service.js';
import {
  DEV_PAGES_CLIENT_ID,
  developmentEnv,
  developmentFiles,
  developmentSettings,
  SANDBOX_GITHUB_CLIENT_ID,
} from '../config/development.js';
import { ConfigError, loadConfig } from '../config/env.js';
import type { Principal } from '../auth/principal.js';
import { Sessions, type BrowserSession } from '../auth/sessions.js';
import { isLoopbackHostname } from '../net/loopback.js';
import { ACCESS_EVENT, type Logger } from '../log.js';
import { startBroker, type RunningBroker } from '../server.js';
import { createIdentityProvider } from './identity-provider.js';
import { sqliteAdapter } from './idp-adapter.js';
import { createSandboxGitHub } from './sandbox-github/index.js';
import { sandboxGitHubUpstream, sandboxGitHubUpstreamYaml } from './sandbox-github/upstream.js';
import { loadOrCreateDevSecrets } from './secrets.js';
import { openDevTables } from './store/index.js';

export { DEV_PAGES_CLIENT_ID, SANDBOX_GITHUB_CLIENT_ID };
/** The example issue service's id at the broker (its `services:` entry). */
export const EXAMPLE_SERVICE_ID = 'issue-service';

export interface DevBroker {
  running: RunningBroker;
  publicUrl: string;
  mcpUrl: string;
  sandboxGitHub: boolean;
  secretsPath: string;
  databasePath: string;
  banner: string;
  /** The example issue service beside the broker (absent when PROVIDERS_FILE is the operator's). */
  example?: { mcpUrl: string; service: IssueService };
}

/**
 * `npm run dev`: the broker with nothing configured. An embedded OpenID Provider at /idp plays the
 * operator's IdP, a sandbox GitHub at /sandbox/github plays GitHub unless real GitHub credentials
 * are set, and generated secrets are kept beside the database. Refuses production and non-loopback.
 */
export async function startDevBroker(env: NodeJS.ProcessEnv, baseLog: Logger): Promise<DevBroker> {
  // A terminal, not a collector: one access line per request (the IdP's JWKS poll alone is one a
  // minute) would scroll the banner away. They stay at debug (LOG_LEVEL=debug, as the banner says).
  const log = accessLinesAtDebug(baseLog);
  if (env.NODE_ENV === 'production')
    throw new ConfigError(
      'NODE_ENV is "production": development mode (embedded sign-in, sandbox GitHub) refuses to run there; use npm start with real configuration',
    );
  const settings = developmentSettings(env);
  const { publicUrl, host, issuer, sandboxBase, realGitHub, exampleUrl } = settings;
  let hostname: string;
  try {
    hostname = new URL(publicUrl).hostname;
  } catch {
    throw new ConfigError(`PUBLIC_URL must be an absolute URL (got "${publicUrl}")`);
  }
  if (!isLoopbackHostname(hostname))
    throw new ConfigError('PUBLIC_URL must be a loopback URL in development mode (its sign-in accepts any user name)');
  if (!isLoopbackHostname(host)) throw new ConfigError('HOST must be a loopback address in development mode');
  // Nothing may make the any-user-name sign-in reachable under another name (e.g. behind a proxy).
  for (const name of (env.ALLOWED_HOSTS ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean)) {
    if (!isLoopbackHostname(name)) throw new ConfigError(`ALLOWED_HOSTS must list only loopback names in development mode (got "${name}")`);
  }
  for (const origin of (env.ALLOWED_ORIGINS ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean)) {
    if (!isLoopbackHostname(URL.parse(origin)?.hostname ?? ''))
      throw new ConfigError(`ALLOWED_ORIGINS must list only loopback origins in development mode (got "${origin}")`);
  }
  if (env.MCP_AUDIENCE && !isLoopbackHostname(URL.parse(env.MCP_AUDIENCE)?.hostname ?? ''))
    throw new ConfigError('MCP_AUDIENCE must be a loopback URL in development mode');
  if (env.TRUST_PROXY && env.TRUST_PROXY !== 'false') throw new ConfigError('TRUST_PROXY is not allowed in development mode');
  // The embedded IdP and sandbox GitHub keep their state beside the broker's in one SQLite file.
  if (env.DATABASE_URL)
    throw new ConfigError(
      'DATABASE_URL is not used in development mode (everything lives in the SQLite file at DATABASE_PATH); unset it, or use npm start for PostgreSQL',
    );

  const files = developmentFiles(env);
  const { databasePath, secretsPath } = files;
  const { secrets } = await loadOrCreateDevSecrets(secretsPath);
  const githubApiUrl = realGitHub ? (env.GITHUB_API_URL ?? 'https://api.github.com') : `${sandboxBase}/api/v3`;

  // The example issue service (examples/issue-service): a second MCP server on the next port, its
  // users signed in by the same embedded IdP for its own audience, declared to the broker as a
  // service so it obtains their GitHub tokens through POST /oauth/token. An operator's own
  // PROVIDERS_FILE is left alone (no example then).
  if (exampleUrl) {
    writeFileSync(
      files.servicesPath,
      [
        '# Written by npm run dev: the example issue service, a service of this development broker.',
        'services:',
        `  - id: ${EXAMPLE_SERVICE_ID}`,
        '    displayName: Example issue service',
        `    audiences: [${exampleUrl.href}]`,
        '    auth: client_secret_basic',
        '    allow: { github: [public_repo, repo] }',
        // The sandbox's MCP endpoint as the `github` upstream (its tools as github_mcp_*), when it plays GitHub.
        ...(realGitHub ? [] : sandboxGitHubUpstreamYaml(sandboxGitHubUpstream(sandboxBase))),
        '',
      ].join('\n'),
    );
  }

  const config = loadConfig(
    developmentEnv(env, settings, files, secrets),
    // Upstreams, their authorization servers and webhook receivers run on this machine in development.
    { developmentMode: true },
  );

  const running = await startBroker(config, log, {
    sandboxGitHub: !realGitHub,
    mount: (app, store) => {
      // Inside the mount: the IdP and the sandbox keep their tables in the broker's SQLite file.
      const devTables = openDevTables(store);
      const idp = createIdentityProvider({
        issuer,
        resource: config.audience,
        ...(exampleUrl ? { moreResources: [exampleUrl.href] } : {}),
        clients: [
          {
            client_id: DEV_PAGES_CLIENT_ID,
            client_name: config.productName,
            client_secret: secrets.pagesClientSecret,
            redirect_uris: [`${publicUrl}/auth/callback`],
            post_logout_redirect_uris: [`${publicUrl}/auth/signed-out`],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        loopbackMetadataDocuments: true,
        cookieKeys: secrets.idpCookieKeys,
        signingJwk: secrets.idpSigningJwk,
        adapter: sqliteAdapter(devTables.identityProvider),
        log,
      });
      idp.catch((err: unknown) => log.error('dev_idp_failed', { message: err instanceof Error ? err.message : String(err) }));
      const idpRoutes = express.Router();
      idpRoutes.use(async (req, res, next) => {
        const path = req.path;
        if (
          path === '/idp' ||
          path.startsWith('/idp/') ||
          path === '/.well-known/oauth-authorization-server/idp' ||
          path === '/.well-known/openid-configuration/idp'
        ) {
          (await idp).callback()(req, res);
          return;
        }
        next();
      });
      app.use(idpRoutes);
      if (!realGitHub) {
        // The sandbox cannot see who is signed in; the broker's session (same origin) can: the
        // authorize page pre-fills a login derived from that person, so a second dev user is not octocat too.
        const sessions = new Sessions(store, { secure: config.secureCookies }, config.brokerSecret);
        const sandbox = createSandboxGitHub({
          store: devTables.sandboxGitHub,
          suggestLogin: (_req, res) => sandboxLoginFor((res.locals.session as BrowserSession | undefined)?.principal),
          clients: [
            {
              clientId: SANDBOX_GITHUB_CLIENT_ID,
              clientSecret: secrets.sandboxGitHubClientSecret,
              kind: config.github.appType,
              name: config.productName,
            },
          ],
          publicBase: sandboxBase,
          // Persisted, so a restart between delete_repository's question and its answer still works.
          mcpStateKey: secrets.sandboxMcpStateKey,
        });
        app.use('/sandbox/github', sessions.load, sandbox.router);
      }
    },
  });

  let example: DevBroker['example'];
  if (exampleUrl) {
    try {
      const service = await startIssueService({
        brokerUrl: publicUrl,
        serviceId: EXAMPLE_SERVICE_ID,
        serviceSecret: secrets.exampleServiceSecret,
        stateKey: secrets.exampleStateKey,
        oidcIssuer: issuer,
        audience: exampleUrl.href,
        githubApiUrl,
        host,
        // The embedded IdP grants its `mcp` scope for every resource it knows.
        scopes: ['mcp'],
        log: (line) => log.info('example_service', { line }),
      });
      example = { mcpUrl: service.url, service };
      const closeBroker = running.close.bind(running);
      running.close = async () => {
        await service.close();
        await closeBroker();
      };
    } catch (err) {
      await running.close();
      if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE')
        throw new Error(
          `EXAMPLE_SERVICE_PORT: ${exampleUrl.host} (the example issue service, PORT + 1 by default) is already in use; stop that process or set EXAMPLE_SERVICE_PORT to a free port`,
        );
      throw err;
    }
  }

  const mcpUrl = config.mcpUrl.href;
  const banner = [
    '',
    `  ${config.productName} — development mode (not for production)`,
    '',
    `  MCP endpoint       ${mcpUrl}`,
    `  Your accounts      ${publicUrl}/connections`,
    `  Identity provider  embedded at ${issuer} — "development sign-in": any user name is accepted`,
    realGitHub
      ? `  GitHub             the real one (GITHUB_CLIENT_ID is set; callback ${publicUrl}/connect/github/callback)`
      : `  GitHub             sandbox at ${sandboxBase} — simulated, nothing reaches github.com (set GITHUB_CLIENT_ID/SECRET for the real one)`,
    ...(exampleUrl && !realGitHub
      ? [`  Upstream           ${sandboxBase}/mcp as "github" — its tools appear as github_mcp_* once you connect GitHub`]
      : []),
    `  Data               ${databasePath} (generated secrets in ${secretsPath})`,
    ...(example
      ? [
          `  Example service    ${example.mcpUrl} — a second MCP server (examples/issue-service) whose create_issue`,
          `                     gets your GitHub token from this broker (POST ${publicUrl}/oauth/token)`,
        ]
      : []),
    '',
    '  Add it to an MCP client (it signs in through the embedded IdP on first use):',
    `    {"mcpServers": {"connect-broker": {"type": "http", "url": "${mcpUrl}"}}}`,
    `    MCP Inspector: npx @modelcontextprotocol/inspector → Streamable HTTP → ${mcpUrl}`,
    '',
    '  Requests are logged at debug level here: LOG_LEVEL=debug npm run dev shows one line per request.',
    '',
  ].join('\n');
  return { running, publicUrl, mcpUrl, sandboxGitHub: !realGitHub, secretsPath, databasePath, banner, ...(example ? { example } : {}) };
}

/** `log`, with the per-request access line at debug instead of info (development mode's terminal). */
export function accessLinesAtDebug(log: Logger): Logger {
  return {
    ...log,
    info: (event, fields) => (event === ACCESS_EVENT ? log.debug(event, fields) : log.info(event, fields)),
  };
}

/** A GitHub-shaped login (letters, digits, single hyphens, at most 39) from a signed-in person's name or subject. */
export function sandboxLoginFor(principal: Principal | undefined): string | undefined {
  if (!principal) return undefined;
  const login = (principal.name || principal.subject)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 39)
    .replace(/-+$/, '');
  return login || undefined;
}
