// compose.yaml and deploy/Caddyfile, checked as text (no container engine runs here): every service
// has a pinned image or this repository's build; the two broker instances are one definition
// (same secrets from .env, same database); the database, the brokers and the proxy each have a
// health check the next one waits on; the proxy routes to both instances and takes the unready
// one out; and the brokers' environment, made from .env.example filled in, is one the broker's
// own configuration loader accepts. Not validated against the Compose specification's JSON schema:
// no dependency of the project ships it (docs/operations.md, "Deploy with Docker").
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../src/config/env.js';
import { variablesTheBrokerReads } from './support/config-variables.js';
import { healthcheck, readDockerfile, stage } from './support/dockerfile.js';
import { filledIn, interpolate, parseEnvFile, setVariables } from './support/env-file.js';

const ROOT = join(import.meta.dirname, '..');

interface Service {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  env_file?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string[] | string; disable?: boolean };
  ports?: string[];
  expose?: string[];
  volumes?: string[];
  stop_grace_period?: string;
}

interface Compose {
  services: Record<string, Service>;
}

interface Files {
  compose: Compose;
  caddyfile: string;
  /** The .env compose reads: here .env.example, as given or filled in. */
  dotenv: Record<string, string>;
}

function readFiles(): Files {
  return {
    compose: parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8'), { merge: true }) as Compose,
    caddyfile: readFileSync(join(ROOT, 'deploy/Caddyfile'), 'utf8'),
    dotenv: filledIn(setVariables(parseEnvFile(readFileSync(join(ROOT, '.env.example'), 'utf8')))),
  };
}

function environment(service: Service): Record<string, string> {
  const e = service.environment ?? {};
  if (Array.isArray(e))
    return Object.fromEntries(
      e.map((pair) => {
        const eq = pair.indexOf('=');
        return eq < 0 ? [pair, ''] : [pair.slice(0, eq), pair.slice(eq + 1)];
      }),
    );
  return Object.fromEntries(Object.entries(e).map(([k, v]) => [k, v === null ? '' : String(v)]));
}

function dependencies(service: Service): Record<string, string | undefined> {
  const d = service.depends_on ?? {};
  return Array.isArray(d)
    ? Object.fromEntries(d.map((name) => [name, undefined]))
    : Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v?.condition]));
}

const buildContext = (s: Service): string | undefined => (typeof s.build === 'string' ? s.build : s.build?.context);
const asList = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** The environment a broker container gets: its env_file (.env) overlaid with its interpolated `environment`. */
function containerEnv(service: Service, dotenv: Record<string, string>): Record<string, string> {
  const fromFiles = asList(service.env_file).includes('.env') ? dotenv : {};
  const own = Object.fromEntries(Object.entries(environment(service)).map(([k, v]) => [k, interpolate(v, dotenv)]));
  return { ...fromFiles, ...own };
}

/** `reverse_proxy` upstreams, its `health_uri`, and the site address of deploy/Caddyfile. */
function caddy(text: string): { site: string | undefined; upstreams: string[]; healthUri: string | undefined } {
  const lines = text.split('\n').map((l) => l.replace(/#.*$/, '').trim());
  const site = lines
    .find((l) => l.endsWith('{') && !/^\S+\s+\S/.test(l.slice(0, -1).trim()))
    ?.slice(0, -1)
    .trim();
  const proxy = lines.find((l) => l.startsWith('reverse_proxy '));
  const upstreams = proxy
    ? proxy
        .replace(/\{$/, '')
        .split(/\s+/)
        .slice(1)
        .filter((w) => w && !w.startsWith('/') && !w.startsWith('@'))
    : [];
  const healthUri = lines.find((l) => l.startsWith('health_uri '))?.split(/\s+/)[1];
  return { site, upstreams, healthUri };
}

/** Every rule this deployment rests on, as one sentence per broken rule. */
function composeProblems({ compose, caddyfile, dotenv }: Files): string[] {
  const problems: string[] = [];
  const services = compose.services ?? {};
  const runtime = stage(readDockerfile(ROOT), 'runtime');

  for (const [name, s] of Object.entries(services)) {
    if (!s.image && !s.build) problems.push(`${name} has neither image nor build`);
    const context = buildContext(s);
    if (
      context !== undefined &&
      !existsSync(join(ROOT, context, typeof s.build === 'object' ? (s.build.dockerfile ?? 'Dockerfile') : 'Dockerfile'))
    )
      problems.push(`${name} builds ${context}, which has no Dockerfile`);
    if (s.image && !s.build && !/^[^:\s]+:(?!latest$)[\w.-]+$/.test(s.image))
      problems.push(`${name}'s image ${s.image} is not pinned by tag`);
  }

  const brokers = Object.entries(services).filter(([, s]) => buildContext(s) === '.');
  if (brokers.length !== 2)
    problems.push(`expected two broker instances built from this repository, found ${brokers.map(([n]) => n).join(', ') || 'none'}`);
  const [first, ...others] = brokers;
  if (!first) return problems;
  for (const [name, s] of others)
    try {
      assert.deepEqual(s, first[1]);
    } catch {
      problems.push(`${name} differs from ${first[0]}: the instances must share one definition (secrets, database, settings)`);
    }

  const read = new Set(variablesTheBrokerReads().variables);
  for (const [name, s] of brokers) {
    if (!asList(s.env_file).includes('.env')) problems.push(`${name} does not read .env (env_file)`);
    for (const [key, raw] of Object.entries(environment(s))) {
      if (!read.has(key)) problems.push(`${name} sets ${key}, which the broker does not read`);
      if (/(SECRET|KEYS?|PASSWORD)$/.test(key) && !/^\$\{[^}]+\}$/.test(raw))
        problems.push(`${name} writes ${key} into compose.yaml: secrets come from .env`);
    }
    if (s.ports?.length) problems.push(`${name} publishes ports: only the proxy is reachable from outside`);
    const ownCheck = s.healthcheck;
    if (ownCheck?.disable || (!ownCheck?.test && !healthcheck(runtime))) problems.push(`${name} has no health check`);
  }

  const [brokerName, broker] = first;
  let env: Record<string, string> = {};
  try {
    env = containerEnv(broker, dotenv);
  } catch (err) {
    problems.push(`compose refuses to start: ${(err as Error).message}`);
    return problems;
  }
  try {
    const config = loadConfig(env);
    if (config.host !== '0.0.0.0') problems.push(`${brokerName} listens on ${config.host}, unreachable from the proxy`);
    // Compose's default is 10 s; the shutdown lets callbacks and refreshes in flight finish first.
    const grace = /^(\d+)s$/.exec(broker.stop_grace_period ?? '10s')?.[1];
    const needed = config.providerTimeoutMs / 1000 + 2;
    if (grace === undefined || Number(grace) < needed)
      problems.push(
        `${brokerName}'s stop_grace_period (${broker.stop_grace_period ?? 'default 10s'}) is shorter than its shutdown (${needed} s)`,
      );
    if (config.trustProxy !== 1) problems.push(`${brokerName} trusts ${String(config.trustProxy)} proxy hops; there is one (the proxy)`);
    const db = config.database.url ? new URL(config.database.url) : undefined;
    if (!db) problems.push(`${brokerName} has no DATABASE_URL: two instances on SQLite files of their own share nothing`);
    else {
      const dbService = services[db.hostname];
      if (!dbService) problems.push(`DATABASE_URL names the host ${db.hostname}, which is no service`);
      else {
        const dbEnv = Object.fromEntries(Object.entries(environment(dbService)).map(([k, v]) => [k, interpolate(v, dotenv)]));
        if (decodeURIComponent(db.username) !== dbEnv.POSTGRES_USER || decodeURIComponent(db.password) !== dbEnv.POSTGRES_PASSWORD)
          problems.push(`DATABASE_URL's user or password is not the ${db.hostname} service's POSTGRES_USER/POSTGRES_PASSWORD`);
        if (db.pathname.slice(1) !== dbEnv.POSTGRES_DB) problems.push(`DATABASE_URL's database is not ${db.hostname}'s POSTGRES_DB`);
        if (!dbService.healthcheck?.test || dbService.healthcheck.disable) problems.push(`${db.hostname} has no health check`);
        for (const [name, s] of brokers)
          if (dependencies(s)[db.hostname] !== 'service_healthy') problems.push(`${name} does not wait for ${db.hostname} to be healthy`);
      }
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(`the brokers' environment is refused: ${err.problems.join('; ')}`);
    return problems;
  }

  const proxies = Object.entries(services).filter(([, s]) => (s.volumes ?? []).some((v) => v.startsWith('./deploy/Caddyfile:')));
  if (proxies.length !== 1) problems.push(`expected one proxy mounting ./deploy/Caddyfile, found ${proxies.length}`);
  else {
    const [proxyName, proxy] = proxies[0]!;
    const { site, upstreams, healthUri } = caddy(caddyfile);
    const expected = brokers.map(([name, s]) => `${name}:${containerEnv(s, dotenv).PORT ?? '3000'}`);
    if ([...upstreams].sort().join(' ') !== expected.sort().join(' '))
      problems.push(`the proxy routes to ${upstreams.join(', ') || 'nothing'}, not to ${expected.join(', ')}`);
    if (healthUri !== '/readyz') problems.push(`the proxy checks ${healthUri ?? 'nothing'}, not /readyz, before routing to an instance`);
    const siteVariable = /^\{\$([A-Z_]+)\}$/.exec(site ?? '')?.[1];
    const proxyEnv = Object.fromEntries(Object.entries(environment(proxy)).map(([k, v]) => [k, interpolate(v, dotenv)]));
    if (!siteVariable || proxyEnv[siteVariable] !== env.PUBLIC_URL)
      problems.push(`the proxy's site address (${site}) is not the brokers' PUBLIC_URL`);
    if (asList(proxy.env_file).length) problems.push(`${proxyName} reads an env_file: the proxy needs no broker secret`);
    if (!(proxy.ports ?? []).some((p) => /(^|:)443(\/tcp)?$/.test(p))) problems.push(`${proxyName} does not publish 443`);
    for (const [name] of brokers)
      if (dependencies(proxy)[name] !== 'service_healthy') problems.push(`${proxyName} does not wait for ${name} to be healthy`);
  }
  return problems;
}

describe('compose.yaml and deploy/Caddyfile', () => {
  it('hold every rule: pinned images, two instances of one definition on one database, health checks in order, the proxy routing to both', () => {
    assert.deepEqual(composeProblems(readFiles()), []);
  });

  it('give the brokers an environment the configuration loader accepts, with the secrets from .env and the rest from compose', () => {
    const files = readFiles();
    const broker = files.compose.services['broker-1']!;
    const env = containerEnv(broker, files.dotenv);
    const config = loadConfig(env);
    assert.equal(config.brokerSecret.toString(), files.dotenv.BROKER_SECRET, 'BROKER_SECRET from .env');
    assert.equal(config.database.url, `postgres://broker:${files.dotenv.POSTGRES_PASSWORD}@postgres:5432/broker`);
    assert.equal(config.publicUrl.href, new URL(files.dotenv.PUBLIC_URL!).href);
  });

  it('refuse to start with .env.example unchanged (the database password is empty)', () => {
    const dotenv = setVariables(parseEnvFile(readFileSync(join(ROOT, '.env.example'), 'utf8')));
    assert.deepEqual(composeProblems({ ...readFiles(), dotenv }), [
      'compose refuses to start: POSTGRES_PASSWORD: set POSTGRES_PASSWORD in .env',
    ]);
  });

  it('name what is wrong in a compose file or Caddyfile that breaks a rule', () => {
    const broken = (change: (f: Files) => void): string[] => {
      const files = readFiles();
      change(files);
      return composeProblems(files);
    };
    assert.deepEqual(
      broken((f) => (f.caddyfile = f.caddyfile.replace(' broker-2:3000', ''))),
      ['the proxy routes to broker-1:3000, not to broker-1:3000, broker-2:3000'],
    );
    assert.deepEqual(
      broken((f) => (f.caddyfile = f.caddyfile.replace('health_uri /readyz', 'health_uri /healthz'))),
      ['the proxy checks /healthz, not /readyz, before routing to an instance'],
    );
    assert.deepEqual(
      broken(
        (f) =>
          (f.compose.services['broker-2'] = {
            ...f.compose.services['broker-2']!,
            environment: { ...environment(f.compose.services['broker-2']!), BROKER_SECRET: 'x'.repeat(40) },
          }),
      ),
      [
        'broker-2 differs from broker-1: the instances must share one definition (secrets, database, settings)',
        'broker-2 writes BROKER_SECRET into compose.yaml: secrets come from .env',
      ],
    );
    assert.deepEqual(
      broken((f) => delete f.compose.services.postgres!.healthcheck),
      ['postgres has no health check'],
    );
    assert.deepEqual(
      broken((f) => {
        for (const name of ['broker-1', 'broker-2']) f.compose.services[name]!.depends_on = ['postgres'];
      }),
      ['broker-1 does not wait for postgres to be healthy', 'broker-2 does not wait for postgres to be healthy'],
    );
    assert.deepEqual(
      broken((f) => {
        for (const name of ['broker-1', 'broker-2'])
          f.compose.services[name] = {
            ...f.compose.services[name]!,
            environment: { ...environment(f.compose.services[name]!), DATABASE_URL: '' },
          };
      }),
      ['broker-1 has no DATABASE_URL: two instances on SQLite files of their own share nothing'],
    );
    assert.deepEqual(
      broken((f) => (f.compose.services.postgres!.image = 'postgres')),
      ["postgres's image postgres is not pinned by tag"],
    );
    assert.deepEqual(
      broken((f) => (f.compose.services.proxy!.env_file = '.env')),
      ['proxy reads an env_file: the proxy needs no broker secret'],
    );
    assert.deepEqual(
      broken((f) => {
        for (const name of ['broker-1', 'broker-2']) delete f.compose.services[name]!.stop_grace_period;
      }),
      ["broker-1's stop_grace_period (default 10s) is shorter than its shutdown (12 s)"],
    );
    assert.deepEqual(
      broken((f) => delete f.dotenv.OIDC_ISSUER),
      ["the brokers' environment is refused: OIDC_ISSUER is required"],
    );
  });
});
