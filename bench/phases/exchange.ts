// The token exchange (RFC 8693, `POST /oauth/token`): throughput and latency for connected users
// against a bare Express endpoint that verifies the same JWT (bench/servers/jwt-baseline.ts), in
// the same interleaved rounds; and a held exchange (`connect_request` + `wait`) released by the
// provider callback, on the same broker process and on another one over the same SQLite file.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/idp.js';
import { completionFigures, completionSamples, type HeldFlow } from '../lib/browser.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadTarget, type RequestSpec } from '../lib/load.js';
import { definePhase } from '../lib/phase.js';
import { BENCH_DIR, CONCURRENCY, DURATION, PROFILE, say } from '../lib/settings.js';
import { ms, us } from '../lib/stats.js';
import { exchangeRows, type ExchangeLoad } from '../lib/exchange-rows.js';

export const SERVICE = { id: 'bench-svc', audience: 'https://bench-svc.example/mcp' };
const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

/** The services file of the exchange brokers: one client_secret_basic service allowed GitHub's `repo`. */
export function servicesYaml(): string {
  return [
    'services:',
    `  - id: ${SERVICE.id}`,
    `    audiences: [${SERVICE.audience}]`,
    '    auth: client_secret_basic',
    '    allow: { github: [repo] }',
    '',
  ].join('\n');
}

/** The exchange form for `subjectToken` (and a held repeat's `connect_request` and `wait`). */
export function exchangeForm(subjectToken: string, extra: Record<string, string> = {}): string {
  return new URLSearchParams({
    grant_type: GRANT,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN,
    audience: 'github',
    scope: 'repo',
    ...extra,
  }).toString();
}

export const basicAuth = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

/** The form POST autocannon sends: Basic auth, the subject token in the body; a 200 with a provider token is the only good answer. */
export function exchangeSpec(authorization: string): RequestSpec {
  return {
    path: '/oauth/token',
    headers: () => ({ 'content-type': 'application/x-www-form-urlencoded', authorization }),
    body: (token) => exchangeForm(token),
    ok: (status, text) => status === 200 && text.includes('"access_token"') && !text.includes('refresh_token'),
  };
}

async function post(url: string, authorization: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization },
    body,
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** The exchange's held flow: an exchange answered `interaction_required`, then its repeat with `connect_request` and `wait`. */
function exchangeFlow(heldOn: string, authorization: string): HeldFlow {
  return {
    async start(token) {
      const first = await post(heldOn, authorization, exchangeForm(token));
      if (first.status !== 400 || first.json.error !== 'interaction_required' || typeof first.json.connect_uri !== 'string')
        throw new Error(`expected interaction_required, got ${first.status} ${JSON.stringify(first.json).slice(0, 300)}`);
      const connectRequest = String(first.json.connect_request);
      return {
        link: first.json.connect_uri,
        held: async () => {
          const r = await post(heldOn, authorization, exchangeForm(token, { connect_request: connectRequest, wait: '20' }));
          if (r.status !== 200 || typeof r.json.access_token !== 'string' || 'refresh_token' in r.json)
            throw new Error(`held exchange: ${r.status} ${JSON.stringify(r.json).slice(0, 300)}`);
        },
      };
    },
  };
}

export const exchange = definePhase({
  name: 'exchange',
  keys: ['exchange', 'exchangeHeld'],
  async run({ stack, resources, report }) {
    const { idp, publicUrl, env, users } = stack;
    const servicesFile = join(resources.dir, 'services.yaml');
    writeFileSync(servicesFile, servicesYaml());
    const secret = randomBytes(24).toString('base64url');
    const authorization = basicAuth(SERVICE.id, secret);
    // Broker A's environment plus the service (and no per-service limit: the load is one service).
    const xEnv = { ...env, PROVIDERS_FILE: servicesFile, SERVICE_BENCH_SVC_SECRET: secret, SERVICE_RATE_LIMIT_PER_MINUTE: '0' };
    const [portX, portY] = [await freePort(), await freePort()];
    const [jwtBase, brokerX, brokerY] = await Promise.all([
      resources.start('jwt baseline', 'bench/servers/jwt-baseline.ts', { OIDC_ISSUER: idp.issuer, AUDIENCE: SERVICE.audience }),
      resources.spawnBroker(
        'broker X',
        { ...xEnv, PORT: String(portX) },
        PROFILE ? ['--cpu-prof', '--cpu-prof-dir', join(BENCH_DIR, 'profiles', 'exchange')] : [],
      ),
      resources.spawnBroker('broker Y', { ...xEnv, PORT: String(portY) }),
    ]);
    // The connected users' tokens as the service received them (its audience).
    const subjectTokens = await Promise.all(
      users.map((u) => idp.mintAccessToken({ sub: u.sub, aud: SERVICE.audience, expiresInSeconds: 3600 })),
    );
    const check = await post(brokerX.url, authorization, exchangeForm(subjectTokens[0]!));
    if (check.status !== 200 || check.json.access_token !== users[0]!.githubToken)
      throw new Error(`exchange for a connected user: ${check.status} ${JSON.stringify(check.json).slice(0, 300)}`);
    const checkBase = await post(jwtBase.url, authorization, exchangeForm(subjectTokens[0]!));
    if (checkBase.status !== 200) throw new Error(`jwt baseline: ${checkBase.status} ${JSON.stringify(checkBase.json)}`);

    const spec = exchangeSpec(authorization);
    const targets: LoadTarget[] = [
      { name: 'jwt baseline', url: jwtBase.url, tool: 'exchange', pid: jwtBase.pid, upstream: undefined, spec, tokens: subjectTokens },
      { name: 'broker exchange', url: brokerX.url, tool: 'exchange', pid: brokerX.pid, upstream: undefined, spec, tokens: subjectTokens },
    ];
    const loads: ExchangeLoad[] = [];
    for (const c of CONCURRENCY) {
      const [base, x] = await interleavedRounds(targets, c, subjectTokens, DURATION);
      loads.push({ connections: c, baseline: base!, exchange: x! });
      for (const r of [base!, x!])
        say(
          `${r.target.padEnd(16)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req${errorCounts(r, ',')}`,
        );
    }
    report.results.exchange = loads.map((l) => ({
      connections: l.connections,
      baseline: roundLoad(l.baseline),
      exchange: roundLoad(l.exchange),
    }));
    for (const row of exchangeRows(loads)) report.row(row);

    const held: Record<string, unknown> = {};
    for (const mode of ['same process', 'across processes'] as const) {
      const callbackOn = mode === 'same process' ? brokerX.url : brokerY.url;
      const { s, record, value } = completionFigures(
        await completionSamples(
          idp,
          publicUrl,
          brokerX.url,
          callbackOn,
          `bench-xh-${mode === 'same process' ? 's' : 'x'}`,
          exchangeFlow(brokerX.url, authorization),
          (sub) => idp.mintAccessToken({ sub, aud: SERVICE.audience, expiresInSeconds: 3600 }),
        ),
      );
      held[mode] = record;
      report.row({ section: 'exchange', measure: `held exchange, ${mode} (n=${s.n})`, value, target: 'p50 < 50 ms', met: s.p50 < 50 });
      say(`held exchange, ${mode}: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
    }
    report.results.exchangeHeld = held;
    await Promise.all([brokerX.stop(), brokerY.stop(), jwtBase.stop()]);
  },
});
