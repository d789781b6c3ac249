// The token exchange (RFC 8693, `POST /oauth/token`): throughput and latency for connected users
// against a bare `node:http` endpoint that only verifies the same JWT (bench/servers/jwt-bare.ts,
// the target's ceiling) and an Express one (bench/servers/jwt-baseline.ts), on a broker with the
// default limits and one with the limits off, in the same interleaved rounds; and a held exchange (`connect_request` + `wait`) released by the
// provider callback, on the same broker process and on another one over the same SQLite file.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/idp.js';
import { completionFigures, completionSamples, type HeldFlow } from '../lib/browser.js';
import { errorCounts, interleavedRounds, roundLoad, type LoadTarget, type RequestSpec } from '../lib/load.js';
import type { Child } from '../lib/proc.js';
import { withDefaultLimits } from '../lib/stack.js';
import { definePhase } from '../lib/phase.js';
import { CONCURRENCY, DURATION, profiled, say } from '../lib/settings.js';
import { ms, us } from '../lib/stats.js';
import { exchangeRows, type ExchangeLoad } from '../lib/exchange-rows.js';

export const SERVICE = { id: 'bench-svc', audience: 'https://bench-svc.example/mcp' };
/**
 * Broker X's per-service limit, per minute: the highest SERVICE_RATE_LIMIT_PER_MINUTE takes, which
 * the one busy service does not reach (6,000 exchanges/s would be 360,000/min); its default of
 * 600/min would cap the service at 10 exchanges/s. Every other limit is at its default.
 */
export const SERVICE_LIMIT = 1_000_000;
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
    // Broker A's environment plus the service: broker X with every limit at its default but the
    // per-service one (SERVICE_LIMIT, which the one busy service does not reach), broker X0 with
    // the limits off (as broker A), and broker Y beside X0 for the held exchange across processes.
    const xEnv = { ...env, PROVIDERS_FILE: servicesFile, SERVICE_BENCH_SVC_SECRET: secret };
    const [portX, portX0, portY] = [await freePort(), await freePort(), await freePort()];
    const jwtEnv = { OIDC_ISSUER: idp.issuer, AUDIENCE: SERVICE.audience };
    // One after another: five processes starting at once on a busy 2-core machine can miss the start-up timeout.
    const jwtBase = await resources.start('jwt baseline', 'bench/servers/jwt-baseline.ts', jwtEnv);
    const jwtBare = await resources.start('jwt bare', 'bench/servers/jwt-bare.ts', jwtEnv);
    const brokerX = await resources.spawnBroker(
      'broker X',
      { ...withDefaultLimits(xEnv, SERVICE_LIMIT), PORT: String(portX) },
      profiled('exchange'),
    );
    // Profiled as X is, when profiling, so that the pair differs in the limits alone.
    const brokerX0 = await resources.spawnBroker('broker X0', { ...xEnv, PORT: String(portX0) }, profiled('exchange-limits-off'));
    const brokerY = await resources.spawnBroker('broker Y', { ...xEnv, PORT: String(portY) });
    // The connected users' tokens as the service received them (its audience).
    const subjectTokens = await Promise.all(
      users.map((u) => idp.mintAccessToken({ sub: u.sub, aud: SERVICE.audience, expiresInSeconds: 3600 })),
    );
    for (const broker of [brokerX, brokerX0]) {
      const check = await post(broker.url, authorization, exchangeForm(subjectTokens[0]!));
      if (check.status !== 200 || check.json.access_token !== users[0]!.githubToken)
        throw new Error(`exchange for a connected user on ${broker.name}: ${check.status} ${JSON.stringify(check.json).slice(0, 300)}`);
    }
    for (const base of [jwtBase, jwtBare]) {
      const checkBase = await post(base.url, authorization, exchangeForm(subjectTokens[0]!));
      if (checkBase.status !== 200) throw new Error(`${base.name}: ${checkBase.status} ${JSON.stringify(checkBase.json)}`);
    }

    const spec = exchangeSpec(authorization);
    const target = (name: string, c: Child): LoadTarget => ({
      name,
      url: c.url,
      tool: 'exchange',
      pid: c.pid,
      upstream: undefined,
      spec,
      tokens: subjectTokens,
    });
    const targets = [
      target('jwt bare', jwtBare),
      target('jwt baseline', jwtBase),
      target('broker exchange', brokerX),
      target('exchange, limits off', brokerX0),
    ];
    const loads: ExchangeLoad[] = [];
    for (const c of CONCURRENCY) {
      const [bare, base, x, x0] = await interleavedRounds(targets, c, subjectTokens, DURATION);
      loads.push({ connections: c, bare: bare!, baseline: base!, exchange: x!, limitsOff: x0! });
      for (const r of [bare!, base!, x!, x0!])
        say(
          `${r.target.padEnd(20)} c=${String(c).padStart(2)}: ${Math.round(r.rps)} req/s, p50 ${ms(r.p50)}, p99 ${ms(r.p99)}, CPU ${us(r.cpuPerRequestUs)}/req${errorCounts(r, ',')}`,
        );
    }
    report.results.exchange = loads.map((l) => ({
      connections: l.connections,
      serviceLimitPerMinute: SERVICE_LIMIT,
      bare: roundLoad(l.bare),
      baseline: roundLoad(l.baseline),
      exchange: roundLoad(l.exchange),
      ...(l.limitsOff ? { limitsOff: roundLoad(l.limitsOff) } : {}),
    }));
    for (const row of exchangeRows(loads, SERVICE_LIMIT)) report.row(row);

    const held: Record<string, unknown> = {};
    for (const mode of ['same process', 'across processes'] as const) {
      // On the limits-off brokers: 2 × 20 sign-ins from one address in about a minute are near the page limit.
      const callbackOn = mode === 'same process' ? brokerX0.url : brokerY.url;
      const { s, record, value } = completionFigures(
        await completionSamples(
          idp,
          publicUrl,
          brokerX0.url,
          callbackOn,
          `bench-xh-${mode === 'same process' ? 's' : 'x'}`,
          exchangeFlow(brokerX0.url, authorization),
          (sub) => idp.mintAccessToken({ sub, aud: SERVICE.audience, expiresInSeconds: 3600 }),
        ),
      );
      held[mode] = record;
      report.row({ section: 'exchange', measure: `held exchange, ${mode} (n=${s.n})`, value, target: 'p50 < 50 ms', met: s.p50 < 50 });
      say(`held exchange, ${mode}: p50 ${ms(s.p50)}, p99 ${ms(s.p99)}`);
    }
    report.results.exchangeHeld = held;
    await Promise.all([brokerX.stop(), brokerX0.stop(), brokerY.stop(), jwtBase.stop(), jwtBare.stop()]);
  },
});
