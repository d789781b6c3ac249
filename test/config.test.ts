import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { validateHostHeader } from '@modelcontextprotocol/server';
import { ConfigError, loadConfig } from '../src/config/env.js';
import { allowedHostnames, allowedOrigins } from '../src/app.js';
import { originAllowed } from '../src/http/host-guard.js';
import { WEBHOOK_EVENT_TYPES } from '../src/config/webhooks.js';
import { missing, productionEnv, REQUIRED } from './support/production-env.js';

const KEY = randomBytes(32);

/** A complete, valid production-shaped environment with nothing optional set, its key {@link KEY}. */
function validEnv(overrides: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return productionEnv({ TOKEN_ENCRYPTION_KEY: KEY.toString('base64'), ...overrides });
}

/** Asserts that loading `env` throws a ConfigError with exactly `message`. */
function refuses(env: NodeJS.ProcessEnv, message: string): void {
  assert.throws(
    () => loadConfig(env),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
      assert.equal(err.name, 'ConfigError');
      assert.equal(err.message, message);
      return true;
    },
  );
}

/** Asserts that each value of `variable` in `refusals` is refused with its message, the rest of the environment valid. */
function refusesValues(variable: string, refusals: Record<string, string>): void {
  for (const [value, message] of Object.entries(refusals)) refuses(validEnv({ [variable]: value }), message);
}

/** What a missing required variable is reported as. */
describe('loadConfig: required variables', () => {
  for (const name of REQUIRED) {
    it(`refuses to start without ${name}, naming it: "${missing(name)}"`, () => {
      refuses(validEnv({ [name]: undefined }), missing(name));
    });
  }

  it('names every required variable at once in an empty environment, one line each', () => {
    assert.throws(
      () => loadConfig({}),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.deepEqual(err.problems, REQUIRED.map(missing));
        assert.equal(err.message, REQUIRED.map(missing).join('\n'));
        return true;
      },
    );
  });

  it('reports every malformed value together, and missing ones beside them', () => {
    refuses(
      validEnv({ PORT: 'http', PUBLIC_URL: 'http://broker.example.com', BROKER_SECRET: 'short' }),
      [
        'PORT must be an integer between 0 and 65535 (got "http")',
        'PUBLIC_URL must use https:// (http:// is accepted only for loopback hosts)',
        'BROKER_SECRET must be at least 32 bytes (got 5)',
      ].join('\n'),
    );
    refuses(
      validEnv({ OIDC_CLIENT_ID: undefined, GITHUB_CLIENT_SECRET: '', RATE_LIMIT_PER_MINUTE: '-1', TOKEN_ENCRYPTION_KEY: 'abc' }),
      [
        'OIDC_CLIENT_ID is required',
        'GITHUB_CLIENT_SECRET must not be empty',
        'TOKEN_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (got 2 bytes)',
        'RATE_LIMIT_PER_MINUTE must be an integer between 0 and 100000 (got "-1")',
      ].join('\n'),
    );
  });

  it('names the empty variable when a required credential is set to the empty string', () => {
    refuses(validEnv({ OIDC_CLIENT_SECRET: '' }), 'OIDC_CLIENT_SECRET must not be empty');
    refuses(validEnv({ GITHUB_CLIENT_ID: '' }), 'GITHUB_CLIENT_ID must not be empty');
  });

  it('accepts the minimal valid environment', () => {
    const config = loadConfig(validEnv());
    assert.equal(config.publicUrl.href, 'https://broker.example.com/');
    assert.equal(config.oidc.clientId, 'connect-broker');
    assert.equal(config.providers.find((p) => p.definition.id === 'github')?.clientSecret, 'github-client-secret');
  });
});

describe('loadConfig: secrets', () => {
  it('refuses a BROKER_SECRET shorter than 32 bytes', () => {
    refuses(validEnv({ BROKER_SECRET: 'x'.repeat(31) }), 'BROKER_SECRET must be at least 32 bytes (got 31)');
    refuses(validEnv({ BROKER_SECRET: '' }), 'BROKER_SECRET must be at least 32 bytes (got 0)');
  });

  it('counts BROKER_SECRET in UTF-8 bytes, not characters', () => {
    assert.equal(loadConfig(validEnv({ BROKER_SECRET: 'é'.repeat(16) })).brokerSecret.length, 32);
    refuses(validEnv({ BROKER_SECRET: 'é'.repeat(15) + 'x' }), 'BROKER_SECRET must be at least 32 bytes (got 31)');
  });

  it('refuses a TOKEN_ENCRYPTION_KEY that does not decode to exactly 32 bytes', () => {
    refuses(
      validEnv({ TOKEN_ENCRYPTION_KEY: randomBytes(16).toString('base64') }),
      'TOKEN_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (got 16 bytes)',
    );
    refuses(
      validEnv({ TOKEN_ENCRYPTION_KEY: randomBytes(33).toString('base64') }),
      'TOKEN_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (got 33 bytes)',
    );
    refuses(validEnv({ TOKEN_ENCRYPTION_KEY: '' }), 'TOKEN_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (got 0 bytes)');
  });

  it('refuses a TOKEN_ENCRYPTION_KEY that is not base64 at all', () => {
    // 32 characters, but with spaces and '!': must not be decoded leniently into some other key.
    refuses(
      validEnv({ TOKEN_ENCRYPTION_KEY: 'not base64! not base64! not b64!' }),
      'TOKEN_ENCRYPTION_KEY must be the base64 encoding of exactly 32 bytes (got 0 bytes)',
    );
    // 64 hex digits (openssl rand -hex 32) decode as base64 to 48 bytes: the line says what was meant.
    refuses(
      validEnv({ TOKEN_ENCRYPTION_KEY: KEY.toString('hex') }),
      'TOKEN_ENCRYPTION_KEY looks like hex (64 hex digits); it must be the base64 encoding of 32 bytes: generate one with openssl rand -base64 32, or convert this one with echo <hex> | xxd -r -p | base64',
    );
  });

  it('accepts the key in base64 and base64url and decodes both to the same 32 bytes', () => {
    assert.deepEqual(loadConfig(validEnv()).tokenKeys[0]?.key, KEY);
    assert.deepEqual(loadConfig(validEnv({ TOKEN_ENCRYPTION_KEY: KEY.toString('base64url') })).tokenKeys[0]?.key, KEY);
  });
});

describe('loadConfig: URLs must be https unless they point at loopback', () => {
  const httpsOnly = (name: string) => `${name} must use https:// (http:// is accepted only for loopback hosts)`;

  it('refuses PUBLIC_URL over http on a non-loopback host', () => {
    refuses(validEnv({ PUBLIC_URL: 'http://broker.example.com' }), httpsOnly('PUBLIC_URL'));
    refuses(validEnv({ PUBLIC_URL: 'http://10.0.0.5:3000' }), httpsOnly('PUBLIC_URL'));
    refuses(validEnv({ PUBLIC_URL: 'http://localhost.evil.example' }), httpsOnly('PUBLIC_URL'));
    refuses(validEnv({ PUBLIC_URL: 'http://127.0.0.1.evil.example' }), httpsOnly('PUBLIC_URL'));
  });

  it('refuses PUBLIC_URL schemes other than http and https', () => {
    refuses(validEnv({ PUBLIC_URL: 'ftp://broker.example.com' }), httpsOnly('PUBLIC_URL'));
  });

  it('refuses a PUBLIC_URL that is not an absolute URL', () => {
    refuses(validEnv({ PUBLIC_URL: 'broker.example.com' }), 'PUBLIC_URL must be an absolute URL (got "broker.example.com")');
  });

  it('accepts PUBLIC_URL over https, and over http on 127.0.0.1, localhost and [::1]', () => {
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'https://broker.example.com' })).publicUrl.origin, 'https://broker.example.com');
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://127.0.0.1:3000' })).publicUrl.origin, 'http://127.0.0.1:3000');
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://localhost:3000' })).publicUrl.origin, 'http://localhost:3000');
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://[::1]:3000' })).publicUrl.origin, 'http://[::1]:3000');
  });

  it('marks cookies Secure exactly when PUBLIC_URL is https', () => {
    assert.equal(loadConfig(validEnv()).secureCookies, true);
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://127.0.0.1:3000' })).secureCookies, false);
  });

  it('refuses a PUBLIC_URL with a path, a query, a fragment or credentials', () => {
    refuses(validEnv({ PUBLIC_URL: 'https://broker.example.com/app' }), 'PUBLIC_URL must not have a path');
    refuses(validEnv({ PUBLIC_URL: 'https://broker.example.com/?x=1' }), 'PUBLIC_URL must not carry a query, fragment or credentials');
    refuses(validEnv({ PUBLIC_URL: 'https://broker.example.com#top' }), 'PUBLIC_URL must not carry a query, fragment or credentials');
    refuses(validEnv({ PUBLIC_URL: 'https://user:pw@broker.example.com' }), 'PUBLIC_URL must not carry a query, fragment or credentials');
  });

  it('accepts a PUBLIC_URL with only a trailing slash', () => {
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'https://broker.example.com/' })).mcpUrl.href, 'https://broker.example.com/mcp');
  });

  it('applies the same https rule to OIDC_ISSUER, keeping the configured identifier byte for byte', () => {
    refuses(validEnv({ OIDC_ISSUER: 'http://idp.example.com' }), httpsOnly('OIDC_ISSUER'));
    refuses(validEnv({ OIDC_ISSUER: 'https://idp.example.com/?tenant=1' }), 'OIDC_ISSUER must not carry a query, fragment or credentials');
    const https = loadConfig(validEnv({ OIDC_ISSUER: 'https://idp.example.com/realms/staff/' }));
    assert.equal(https.oidc.issuer.href, 'https://idp.example.com/realms/staff/');
    assert.equal(https.oidc.issuerId, 'https://idp.example.com/realms/staff/');
    assert.equal(loadConfig(validEnv({ OIDC_ISSUER: 'http://127.0.0.1:9000' })).oidc.issuerId, 'http://127.0.0.1:9000');
    assert.equal(loadConfig(validEnv({ OIDC_ISSUER: 'http://localhost:9000/idp' })).oidc.issuer.href, 'http://localhost:9000/idp');
  });

  for (const name of ['GITHUB_WEB_URL', 'GITHUB_API_URL'] as const) {
    it(`applies the same https rule to ${name}`, () => {
      refuses(validEnv({ [name]: 'http://github.example.com' }), httpsOnly(name));
      const key = name === 'GITHUB_WEB_URL' ? 'webUrl' : 'apiUrl';
      assert.equal(loadConfig(validEnv({ [name]: 'https://ghe.example.com/api/v3' })).github[key].href, 'https://ghe.example.com/api/v3');
      assert.equal(loadConfig(validEnv({ [name]: 'http://127.0.0.1:8080/api/v3' })).github[key].href, 'http://127.0.0.1:8080/api/v3');
      assert.equal(loadConfig(validEnv({ [name]: 'http://localhost:8080' })).github[key].href, 'http://localhost:8080/');
    });
  }
});

describe('the host names the Host guard accepts', () => {
  it('accepts an IPv6 loopback PUBLIC_URL and IPv6 ALLOWED_HOSTS in the form the guard compares (bracketed)', () => {
    const hosts = allowedHostnames(loadConfig(validEnv({ PUBLIC_URL: 'http://[::1]:3000', ALLOWED_HOSTS: '2001:db8::1' })));
    assert.ok(validateHostHeader('[::1]:3000', hosts).ok);
    assert.ok(validateHostHeader('[2001:db8::1]:443', hosts).ok);
    assert.ok(validateHostHeader('localhost:3000', hosts).ok, 'loopback names for a loopback PUBLIC_URL');
    assert.equal(validateHostHeader('evil.example:3000', hosts).ok, false);
  });
});

describe('the origins the Origin checks accept (ALLOWED_ORIGINS)', () => {
  it("accepts in production exactly PUBLIC_URL's origin and the listed ones: another port or scheme on the same host is another site", () => {
    const origins = allowedOrigins(
      loadConfig(
        validEnv({ ALLOWED_HOSTS: 'broker.internal', ALLOWED_ORIGINS: 'https://assistant.example.com, https://App.Example.com:8443' }),
      ),
    );
    assert.deepEqual([...origins].sort(), ['https://app.example.com:8443', 'https://assistant.example.com', 'https://broker.example.com']);
    for (const origin of [
      'https://broker.example.com',
      'https://assistant.example.com',
      'https://app.example.com:8443',
      'HTTPS://BROKER.EXAMPLE.COM',
      undefined,
    ]) {
      assert.ok(originAllowed(origin, origins), String(origin));
    }
    for (const origin of [
      'http://broker.example.com',
      'https://broker.example.com:1234',
      'https://broker.example.com:443',
      'https://broker.example.com/',
      'https://broker.internal',
      'https://app.example.com',
      'http://localhost:3000',
      'null',
    ]) {
      assert.equal(originAllowed(origin, origins), false, origin);
    }
  });

  it("adds the loopback names with PUBLIC_URL's scheme and port for a loopback PUBLIC_URL (IPv6 bracketed), and no other port", () => {
    for (const publicUrl of ['http://127.0.0.1:3000', 'http://localhost:3000', 'http://[::1]:3000']) {
      const origins = allowedOrigins(loadConfig(validEnv({ PUBLIC_URL: publicUrl })));
      assert.deepEqual([...origins].sort(), ['http://127.0.0.1:3000', 'http://[::1]:3000', 'http://localhost:3000'], publicUrl);
      for (const other of ['http://localhost:8080', 'https://localhost:3000', 'http://127.0.0.2:3000', 'http://localhost'])
        assert.equal(originAllowed(other, origins), false, other);
    }
  });

  it('refuses an ALLOWED_ORIGINS entry that is not exactly scheme://host[:port], or http:// off loopback', () => {
    const notAnOrigin = (entry: string) =>
      `ALLOWED_ORIGINS must be a comma-separated list of origins, scheme://host[:port] and nothing else, e.g. https://app.example.com (got "${entry}")`;
    for (const entry of [
      'https://app.example.com/',
      'https://app.example.com/path',
      'https://app.example.com?x=1',
      'https://app.example.com#x',
      'https://user@app.example.com',
      'app.example.com',
      'ftp://app.example.com',
      'https://',
      'https://app.example.com:99999',
      '*',
    ]) {
      refuses(validEnv({ ALLOWED_ORIGINS: `https://ok.example.com,${entry}` }), notAnOrigin(entry));
    }
    refuses(
      validEnv({ ALLOWED_ORIGINS: 'http://app.example.com' }),
      'ALLOWED_ORIGINS must use https:// (http:// is accepted only for loopback hosts) (got "http://app.example.com")',
    );
    assert.deepEqual(loadConfig(validEnv({ ALLOWED_ORIGINS: 'http://localhost:6274,https://app.example.com:443' })).allowedOrigins, [
      'http://localhost:6274',
      'https://app.example.com',
    ]);
    assert.deepEqual(loadConfig(validEnv()).allowedOrigins, []);
  });
});

describe('MCP_ACCESS_TOKEN_TYPES', () => {
  it('defaults to at+jwt (RFC 9068), and takes a comma-separated list, lowercased', () => {
    assert.deepEqual(loadConfig(validEnv()).accessTokenTypes, ['at+jwt']);
    assert.deepEqual(loadConfig(validEnv({ MCP_ACCESS_TOKEN_TYPES: '' })).accessTokenTypes, ['at+jwt']);
    assert.deepEqual(loadConfig(validEnv({ MCP_ACCESS_TOKEN_TYPES: 'JWT' })).accessTokenTypes, ['jwt']);
    assert.deepEqual(loadConfig(validEnv({ MCP_ACCESS_TOKEN_TYPES: ' at+jwt , application/JWT ' })).accessTokenTypes, [
      'at+jwt',
      'application/jwt',
    ]);
  });

  it('refuses a list with no value or with something that is not a typ', () => {
    refusesValues('MCP_ACCESS_TOKEN_TYPES', {
      ' , ': 'MCP_ACCESS_TOKEN_TYPES must list at least one typ value, e.g. at+jwt or JWT',
      'at+jwt;JWT': 'MCP_ACCESS_TOKEN_TYPES must be a comma-separated list of typ values such as at+jwt or JWT (got "at+jwt;jwt")',
      'at jwt': 'MCP_ACCESS_TOKEN_TYPES must be a comma-separated list of typ values such as at+jwt or JWT (got "at jwt")',
    });
  });
});

describe('MCP_AUDIENCE, OIDC_SUBJECT_CLAIM and untyped tokens (Entra ID, Okta)', () => {
  it('keeps a URL audience as the resource itself (RFC 8707), and /mcp when unset', () => {
    const unset = loadConfig(validEnv());
    assert.equal(unset.audience, 'https://broker.example.com/mcp');
    assert.equal(unset.resource, 'https://broker.example.com/mcp');
    const url = loadConfig(validEnv({ MCP_AUDIENCE: 'https://api.example.com/mcp/' }));
    assert.equal(url.audience, 'https://api.example.com/mcp');
    assert.equal(url.resource, 'https://api.example.com/mcp');
  });

  it('accepts an identifier that is no URL (a GUID, an api:// URI) as the audience while the resource stays /mcp', () => {
    for (const id of ['6e0c2a4b-1f3d-4c5e-9a7b-0123456789ab', 'api://6e0c2a4b-1f3d-4c5e-9a7b-0123456789ab', 'api://default']) {
      const config = loadConfig(validEnv({ MCP_AUDIENCE: ` ${id} ` }));
      assert.equal(config.audience, id);
      assert.equal(config.resource, 'https://broker.example.com/mcp');
    }
  });

  it('refuses an http audience off loopback, an identifier with spaces, quotes or commas, and the page client id', () => {
    refuses(
      validEnv({ MCP_AUDIENCE: 'http://api.example.com/mcp' }),
      'MCP_AUDIENCE must use https:// (http:// is accepted only for loopback hosts)',
    );
    for (const bad of ['my api', 'a,b', 'say"', '-leading']) {
      refuses(
        validEnv({ MCP_AUDIENCE: bad }),
        `MCP_AUDIENCE must be an https URL or the identifier your identity provider writes in aud, such as a GUID or an api:// URI (got "${bad}")`,
      );
    }
    refuses(
      validEnv({ MCP_AUDIENCE: 'connect-broker', OIDC_CLIENT_ID: 'connect-broker' }),
      "MCP_AUDIENCE must not be OIDC_CLIENT_ID: the sign-in client's ID tokens carry that audience. Give the MCP API its own registration at the identity provider",
    );
  });

  it('reads the subject from sub by default, oid when set, and refuses any other claim', () => {
    assert.equal(loadConfig(validEnv()).subjectClaim, 'sub');
    assert.equal(loadConfig(validEnv({ OIDC_SUBJECT_CLAIM: '' })).subjectClaim, 'sub');
    assert.equal(loadConfig(validEnv({ OIDC_SUBJECT_CLAIM: 'oid' })).subjectClaim, 'oid');
    for (const bad of ['email', 'preferred_username', 'OID', 'uid']) {
      refuses(validEnv({ OIDC_SUBJECT_CLAIM: bad }), `OIDC_SUBJECT_CLAIM must be one of sub, oid (got "${bad}")`);
    }
  });

  it('takes none in MCP_ACCESS_TOKEN_TYPES only when listed', () => {
    assert.deepEqual(loadConfig(validEnv({ MCP_ACCESS_TOKEN_TYPES: 'at+jwt,None' })).accessTokenTypes, ['at+jwt', 'none']);
    assert.ok(!loadConfig(validEnv()).accessTokenTypes.includes('none'));
  });
});

describe('loadConfig: defaults', () => {
  it('defaults HOST, PORT, DATABASE_PATH, GitHub URLs, hold, link lifetime and audience', () => {
    const config = loadConfig(validEnv());
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 3000);
    assert.equal(config.database.path, './data/broker.db');
    assert.equal(config.github.webUrl.href, 'https://github.com/');
    assert.equal(config.github.apiUrl.href, 'https://api.github.com/');
    assert.equal(config.repeatHoldMs, 20_000);
    assert.equal(config.connectLinkTtlSeconds, 600);
    assert.equal(config.mcpUrl.href, 'https://broker.example.com/mcp');
    assert.equal(config.audience, 'https://broker.example.com/mcp');
    assert.equal(config.oidc.authMethod, 'client_secret_basic');
    assert.deepEqual(config.allowedHosts, []);
    assert.equal(config.trustProxy, false);
  });

  it('derives the audience as PUBLIC_URL + /mcp whatever the trailing slash', () => {
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://127.0.0.1:4000/' })).audience, 'http://127.0.0.1:4000/mcp');
    assert.equal(loadConfig(validEnv({ PUBLIC_URL: 'http://127.0.0.1:4000' })).audience, 'http://127.0.0.1:4000/mcp');
  });

  it('lets MCP_AUDIENCE override the audience (without a trailing slash) while the endpoint stays PUBLIC_URL/mcp', () => {
    const config = loadConfig(validEnv({ MCP_AUDIENCE: 'https://api.example.com/mcp/' }));
    assert.equal(config.audience, 'https://api.example.com/mcp');
    assert.equal(config.mcpUrl.href, 'https://broker.example.com/mcp');
    refuses(
      validEnv({ MCP_AUDIENCE: 'http://api.example.com/mcp' }),
      'MCP_AUDIENCE must use https:// (http:// is accepted only for loopback hosts)',
    );
  });

  it('takes HOST, DATABASE_PATH and REPEAT_HOLD_SECONDS when given', () => {
    const config = loadConfig(
      validEnv({ HOST: '0.0.0.0', DATABASE_PATH: '/var/lib/broker/db.sqlite', REPEAT_HOLD_SECONDS: '2.5', PORT: '8080' }),
    );
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.database.path, '/var/lib/broker/db.sqlite');
    assert.equal(config.repeatHoldMs, 2500);
    assert.equal(config.port, 8080);
  });

  it('selects PostgreSQL with DATABASE_URL, with pool and statement-timeout settings', () => {
    const sqlite = loadConfig(validEnv());
    assert.deepEqual(sqlite.database, { url: undefined, path: './data/broker.db', poolMax: 10, statementTimeoutMs: 5000 });
    const pg = loadConfig(
      validEnv({
        DATABASE_URL: 'postgres://broker:s3cret@db.internal:5432/broker',
        DATABASE_POOL_MAX: '25',
        DATABASE_STATEMENT_TIMEOUT_MS: '2000',
      }),
    );
    assert.equal(pg.database.url, 'postgres://broker:s3cret@db.internal:5432/broker');
    assert.equal(pg.database.poolMax, 25);
    assert.equal(pg.database.statementTimeoutMs, 2000);
  });

  it('refuses a DATABASE_URL that is not postgres:// without echoing it', () => {
    refusesValues('DATABASE_URL', {
      'mysql://root:hunter2@db/x': 'DATABASE_URL must start with postgres:// (got "mysql://…"); leave it unset for SQLite',
      'not a url hunter2': 'DATABASE_URL must be a URL such as postgres://user:password@host:5432/database',
    });
    refuses(validEnv({ DATABASE_POOL_MAX: '0' }), 'DATABASE_POOL_MAX must be an integer between 1 and 1000 (got "0")');
  });

  it('bounds pending connections and /mcp: PENDING_CONNECTIONS_PER_USER (default 20) and MCP_RATE_LIMIT_PER_MINUTE (default 600, 0 = off)', () => {
    const defaults = loadConfig(validEnv());
    assert.equal(defaults.pendingConnectionsPerUser, 20);
    assert.equal(defaults.mcpRateLimitPerMinute, 600);
    const set = loadConfig(validEnv({ PENDING_CONNECTIONS_PER_USER: '5', MCP_RATE_LIMIT_PER_MINUTE: '0' }));
    assert.equal(set.pendingConnectionsPerUser, 5);
    assert.equal(set.mcpRateLimitPerMinute, 0);
    refuses(
      validEnv({ PENDING_CONNECTIONS_PER_USER: '0' }),
      'PENDING_CONNECTIONS_PER_USER must be an integer between 1 and 1000 (got "0")',
    );
    refuses(validEnv({ MCP_RATE_LIMIT_PER_MINUTE: '-1' }), 'MCP_RATE_LIMIT_PER_MINUTE must be an integer between 0 and 1000000 (got "-1")');
  });

  it('turns /metrics on only with METRICS_TOKEN (at least 16 printable characters) or METRICS_PORT (1–65535)', () => {
    assert.deepEqual(loadConfig(validEnv()).metrics, { token: undefined, port: undefined });
    assert.deepEqual(loadConfig(validEnv({ METRICS_TOKEN: '', METRICS_PORT: '' })).metrics, { token: undefined, port: undefined });
    const token = 'a-metrics-bearer-0123456789';
    assert.deepEqual(loadConfig(validEnv({ METRICS_TOKEN: token })).metrics, { token, port: undefined });
    assert.deepEqual(loadConfig(validEnv({ METRICS_PORT: '9464' })).metrics, { token: undefined, port: 9464 });
    assert.deepEqual(loadConfig(validEnv({ METRICS_PORT: '9464', METRICS_TOKEN: token })).metrics, { token, port: 9464 });
    for (const bad of ['short-token', 'a token with spaces in it', 'ünïcode-token-0123456789'])
      refuses(validEnv({ METRICS_TOKEN: bad }), 'METRICS_TOKEN must be at least 16 printable ASCII characters without spaces');
    for (const bad of ['0', '65536', 'http'])
      refuses(validEnv({ METRICS_PORT: bad }), `METRICS_PORT must be an integer between 1 and 65535 (got "${bad}")`);
  });

  it('keeps the audit trail AUDIT_RETENTION_DAYS days (default 90, 0 = forever), refusing anything but a whole number of days up to 3650', () => {
    assert.equal(loadConfig(validEnv()).auditRetentionDays, 90);
    assert.equal(loadConfig(validEnv({ AUDIT_RETENTION_DAYS: '' })).auditRetentionDays, 90);
    assert.equal(loadConfig(validEnv({ AUDIT_RETENTION_DAYS: '0' })).auditRetentionDays, 0);
    assert.equal(loadConfig(validEnv({ AUDIT_RETENTION_DAYS: '1' })).auditRetentionDays, 1);
    assert.equal(loadConfig(validEnv({ AUDIT_RETENTION_DAYS: '3650' })).auditRetentionDays, 3650);
    for (const bad of ['-1', '3651', '1.5', '30d', 'forever'])
      refuses(validEnv({ AUDIT_RETENTION_DAYS: bad }), `AUDIT_RETENTION_DAYS must be an integer between 0 and 3650 (got "${bad}")`);
  });

  it('bounds what an upstream MCP server may answer: UPSTREAM_MAX_RESULT_BYTES (default 4 MiB)', () => {
    assert.equal(loadConfig(validEnv()).upstreamMaxResultBytes, 4 * 1024 * 1024);
    assert.equal(loadConfig(validEnv({ UPSTREAM_MAX_RESULT_BYTES: '65536' })).upstreamMaxResultBytes, 65536);
    refuses(
      validEnv({ UPSTREAM_MAX_RESULT_BYTES: '10' }),
      'UPSTREAM_MAX_RESULT_BYTES must be an integer between 1024 and 268435456 (got "10")',
    );
  });

  it('refuses out-of-range numbers, naming the variable', () => {
    refuses(validEnv({ REPEAT_HOLD_SECONDS: '51' }), 'REPEAT_HOLD_SECONDS must be a number between 0 and 50 (got "51")');
    refuses(validEnv({ PORT: 'http' }), 'PORT must be an integer between 0 and 65535 (got "http")');
  });
});

describe('ADMIN_ACTOR', () => {
  it('is unset by default (npm run admin then names the OS user), and taken trimmed when given', () => {
    assert.equal(loadConfig(validEnv()).adminActor, undefined);
    assert.equal(loadConfig(validEnv({ ADMIN_ACTOR: '  ' })).adminActor, undefined);
    assert.equal(loadConfig(validEnv({ ADMIN_ACTOR: ' ops@example.com ' })).adminActor, 'ops@example.com');
    assert.equal(loadConfig(validEnv({ ADMIN_ACTOR: 'Zoë Ops (on call)' })).adminActor, 'Zoë Ops (on call)');
  });

  it('refuses a name with control or invisible characters, or longer than 64 characters', () => {
    const message = 'ADMIN_ACTOR must be at most 64 letters, digits, spaces and punctuation (a login or an email address)';
    for (const bad of ['ops\nforged line', 'ops\u202Egro', 'ops\u200Bx', 'o'.repeat(65)]) refuses(validEnv({ ADMIN_ACTOR: bad }), message);
  });
});

describe('loadConfig: services (token exchange) in PROVIDERS_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'config-services-'));
  let n = 0;
  /** Writes `services` (YAML text of the list) to a file of its own and returns the env naming it. */
  function withServices(yaml: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const file = join(dir, `services-${++n}.yaml`);
    writeFileSync(file, `services:\n${yaml}`);
    return validEnv({ PROVIDERS_FILE: file, SERVICE_ISSUE_BOT_SECRET: 'issue-bot-secret-0123456789', ...extra });
  }
  const BOT = [
    '  - id: issue-bot',
    '    audiences: [https://bot.example.com/mcp]',
    '    auth: client_secret_basic',
    '    allow: { github: [public_repo, repo] }',
  ].join('\n');

  it('reads services alone (no providers:), the secret from SERVICE_<ID>_SECRET, displayName defaulting to the id', () => {
    const config = loadConfig(
      withServices(
        `${BOT}\n  - id: tracker-bot\n    displayName: Tracker\n    audiences: [https://t.example.com/mcp]\n    auth: private_key_jwt\n    jwksUri: https://t.example.com/jwks.json\n    allow: { github: [public_repo] }\n`,
      ),
    );
    assert.deepEqual(
      config.services.map((s) => [s.id, s.displayName, s.auth, s.secret, s.jwksUri?.href]),
      [
        ['issue-bot', 'issue-bot', 'client_secret_basic', 'issue-bot-secret-0123456789', undefined],
        ['tracker-bot', 'Tracker', 'private_key_jwt', undefined, 'https://t.example.com/jwks.json'],
      ],
    );
    assert.deepEqual(config.services[0]!.allow, { github: ['public_repo', 'repo'] });
    assert.deepEqual(
      config.providers.map((p) => p.definition.id),
      ['github'],
    );
  });

  it('has no services without the file or without a services list, and SERVICE_RATE_LIMIT_PER_MINUTE defaults to 600', () => {
    const config = loadConfig(validEnv());
    assert.deepEqual(config.services, []);
    assert.equal(config.serviceRateLimitPerMinute, 600);
    assert.equal(loadConfig(validEnv({ SERVICE_RATE_LIMIT_PER_MINUTE: '0' })).serviceRateLimitPerMinute, 0);
    refuses(
      validEnv({ SERVICE_RATE_LIMIT_PER_MINUTE: 'lots' }),
      'SERVICE_RATE_LIMIT_PER_MINUTE must be an integer between 0 and 1000000 (got "lots")',
    );
  });

  it('refuses a service id declared twice, one line naming the service', () => {
    refuses(withServices(`${BOT}\n${BOT}\n`), 'PROVIDERS_FILE services.issue-bot: the id is declared twice');
  });

  it('refuses a client_secret_basic service without its secret, naming the variable', () => {
    refuses(
      withServices(BOT, { SERVICE_ISSUE_BOT_SECRET: '' }),
      'SERVICE_ISSUE_BOT_SECRET is required for service "issue-bot" (auth client_secret_basic)',
    );
  });

  it('refuses a provider in allow that this broker does not connect to, and a scope it does not list', () => {
    refuses(
      withServices(BOT.replace('github: [public_repo, repo]', 'gitlab: [api]')),
      'PROVIDERS_FILE services.issue-bot.allow: "gitlab" is not a provider this broker connects to',
    );
    refuses(
      withServices(BOT.replace('public_repo, repo', 'public_repo, rule_the_world')),
      'PROVIDERS_FILE services.issue-bot.allow.github: "rule_the_world" is not a scope of github',
    );
  });

  it('refuses a plain-http jwksUri (loopback accepted), a private_key_jwt service without one, and an unknown field, one line naming the field', () => {
    const tracker = (uri: string) =>
      `  - id: tracker-bot\n    audiences: [https://t.example.com/mcp]\n    auth: private_key_jwt\n${uri}    allow: { github: [public_repo] }\n`;
    refuses(
      withServices(tracker('    jwksUri: http://t.example.com/jwks.json\n')),
      'PROVIDERS_FILE services.tracker-bot.jwksUri: must use https:// (http:// is accepted only for loopback hosts)',
    );
    assert.equal(loadConfig(withServices(tracker('    jwksUri: http://127.0.0.1:9999/jwks.json\n'))).services.length, 1);
    refuses(withServices(tracker('')), 'PROVIDERS_FILE services.tracker-bot.jwksUri: is required for private_key_jwt');
    assert.throws(
      () => loadConfig(withServices(`${BOT}\n    secret: in-the-file\n`)),
      (err: unknown) =>
        err instanceof ConfigError && /^PROVIDERS_FILE services\.issue-bot: /.test(err.message) && !/in-the-file/.test(err.message),
    );
  });

  it('takes a service audience that is an identifier (an Entra ID application id) as well as a URL, and refuses one with a space', () => {
    const guid = '0b5e1c2d-3f4a-4b6c-8d9e-0123456789ab';
    const config = loadConfig(withServices(BOT.replace('[https://bot.example.com/mcp]', `[https://bot.example.com/mcp, "${guid}"]`)));
    assert.deepEqual(config.services[0]!.audiences, ['https://bot.example.com/mcp', guid]);
    refuses(
      withServices(BOT.replace('[https://bot.example.com/mcp]', '["my bot"]')),
      'PROVIDERS_FILE services.issue-bot.audiences.0: must be URLs or identifiers such as a GUID or an api:// URI',
    );
  });

  it("refuses a service claiming the broker's own /mcp audience", () => {
    refuses(
      withServices(BOT.replace('https://bot.example.com/mcp', 'https://broker.example.com/mcp')),
      "PROVIDERS_FILE services.issue-bot.audiences: https://broker.example.com/mcp is the broker's own audience, not a service's",
    );
  });
});

describe('loadConfig: webhooks in PROVIDERS_FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'config-webhooks-'));
  let n = 0;
  const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
  /** Writes `text` (YAML) to a file of its own and returns the env naming it, with the audit-sink secret set. */
  function withFile(text: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
    const file = join(dir, `webhooks-${++n}.yaml`);
    writeFileSync(file, text);
    return validEnv({ PROVIDERS_FILE: file, WEBHOOK_AUDIT_SINK_SECRET: SECRET, ...extra });
  }
  const SINK = ['webhooks:', '  - id: audit-sink', '    url: https://hooks.example.com/broker'].join('\n');

  it('reads webhooks alone (no providers: or services:), every event by default, the secret decoded from WEBHOOK_<ID>_SECRET', () => {
    const config = loadConfig(withFile(`${SINK}\n`));
    assert.deepEqual(
      config.webhooks.map((w) => [w.id, w.url.href, w.events]),
      [
        // Every event, as docs/operations.md's webhook table lists them (test/readme-config.test.ts).
        ['audit-sink', 'https://hooks.example.com/broker', [...WEBHOOK_EVENT_TYPES]],
      ],
    );
    assert.deepEqual(config.webhooks[0]!.secret, Buffer.from(SECRET.slice('whsec_'.length), 'base64'));
    assert.deepEqual(
      config.providers.map((p) => p.definition.id),
      ['github'],
    );
    assert.deepEqual(config.services, []);
  });

  it('reads webhooks beside providers and services, with an event filter and loopback http (allowed by EGRESS_ALLOW)', () => {
    const config = loadConfig(
      withFile(
        [
          'services:',
          '  - id: issue-bot',
          '    audiences: [https://bot.example.com/mcp]',
          '    auth: private_key_jwt',
          '    jwksUri: https://bot.example.com/jwks.json',
          '    allow: { github: [repo] }',
          `${SINK}`,
          '    events: [connection.created, connection.revoked]',
          '  - id: local',
          '    url: http://127.0.0.1:9999/hooks',
        ].join('\n'),
        { WEBHOOK_LOCAL_SECRET: SECRET, EGRESS_ALLOW: '127.0.0.1' },
      ),
    );
    assert.deepEqual(
      config.webhooks.map((w) => [w.id, w.url.href, w.events.length]),
      [
        ['audit-sink', 'https://hooks.example.com/broker', 2],
        ['local', 'http://127.0.0.1:9999/hooks', WEBHOOK_EVENT_TYPES.length],
      ],
    );
    assert.deepEqual(config.webhooks[0]!.events, ['connection.created', 'connection.revoked']);
    assert.equal(config.services.length, 1);
    assert.deepEqual(loadConfig(validEnv()).webhooks, []);
  });

  it('refuses a missing or malformed secret, naming the variable and never echoing the value', () => {
    refuses(
      withFile(SINK, { WEBHOOK_AUDIT_SINK_SECRET: undefined }),
      'WEBHOOK_AUDIT_SINK_SECRET is required for webhook "audit-sink" (whsec_ and the base64 of 24 to 64 random bytes)',
    );
    for (const bad of [
      randomBytes(32).toString('base64'),
      `whsec_${randomBytes(8).toString('base64')}`,
      `whsec_${randomBytes(80).toString('base64')}`,
      'whsec_not base64!',
    ])
      refuses(
        withFile(SINK, { WEBHOOK_AUDIT_SINK_SECRET: bad }),
        'WEBHOOK_AUDIT_SINK_SECRET must be whsec_ followed by the base64 of 24 to 64 random bytes',
      );
  });

  it('refuses a plain-http or credentialed url, an unknown event, a duplicate id and an unknown field, one line naming the field', () => {
    refuses(
      withFile(SINK.replace('https://hooks', 'http://hooks')),
      'PROVIDERS_FILE webhooks.audit-sink.url: must use https:// (http:// is accepted only for loopback hosts)',
    );
    refuses(
      withFile(SINK.replace('https://hooks', 'https://user:pw@hooks')),
      'PROVIDERS_FILE webhooks.audit-sink.url: must not carry credentials or a fragment (the secret signs every request instead)',
    );
    assert.throws(
      () => loadConfig(withFile(`${SINK}\n    events: [connection.exploded]\n`)),
      (err: unknown) => err instanceof ConfigError && /^PROVIDERS_FILE webhooks\.audit-sink\.events\.0: /.test(err.message),
    );
    refuses(withFile(`${SINK}\n${SINK.split('\n').slice(1).join('\n')}\n`), 'PROVIDERS_FILE webhooks.audit-sink: the id is declared twice');
    assert.throws(
      () => loadConfig(withFile(`${SINK}\n    secret: in-the-file\n`)),
      (err: unknown) =>
        err instanceof ConfigError && /^PROVIDERS_FILE webhooks\.audit-sink: /.test(err.message) && !/in-the-file/.test(err.message),
    );
    refuses(withFile('webhooks: audit-sink\n'), 'PROVIDERS_FILE webhooks must be a list');
    refuses(
      withFile('hooks: []\n'),
      'PROVIDERS_FILE has unknown top-level key "hooks"; it may hold "providers", "services", "upstreams", "builtinTools", "webhooks", "policy"',
    );
    refuses(
      withFile('{}\n'),
      'PROVIDERS_FILE must hold a list of providers, or an object with any of "providers", "services", "upstreams", "builtinTools", "webhooks", "policy"',
    );
  });
});

describe('loadConfig: OpenTelemetry traces (OTEL_*)', () => {
  const tracing = (env: Record<string, string>) => loadConfig(validEnv(env)).tracing;

  it('is off by default, and named service mcp-connect-broker', () => {
    assert.deepEqual(tracing({}), { enabled: false, exporters: [], serviceName: 'mcp-connect-broker' });
  });

  it('turns on with an exporter named in OTEL_TRACES_EXPORTER, or with an OTLP endpoint alone', () => {
    assert.deepEqual(tracing({ OTEL_TRACES_EXPORTER: 'otlp' }).exporters, ['otlp']);
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'OTLP, console' }).enabled, true);
    assert.deepEqual(tracing({ OTEL_TRACES_EXPORTER: 'OTLP, console' }).exporters, ['otlp', 'console']);
    assert.deepEqual(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318' }), {
      enabled: true,
      exporters: ['otlp'],
      serviceName: 'mcp-connect-broker',
    });
    assert.equal(tracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example.com/v1/traces' }).enabled, true);
    assert.equal(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: ' broker-eu ' }).serviceName, 'broker-eu');
  });

  it('stays off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true (any case), whatever else is set', () => {
    assert.equal(tracing({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).enabled, false);
    for (const value of ['true', 'TRUE', 'True'])
      assert.equal(tracing({ OTEL_SDK_DISABLED: value, OTEL_TRACES_EXPORTER: 'otlp' }).enabled, false, value);
    assert.equal(tracing({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'otlp' }).enabled, true);
  });

  it('refuses an exporter that is not installed, none beside another, a boolean that is not one, and an endpoint that is not http(s) or carries credentials, without echoing it', () => {
    refusesValues('OTEL_TRACES_EXPORTER', {
      zipkin: 'OTEL_TRACES_EXPORTER must be otlp, console or none (got "zipkin"; no other exporter is installed)',
      'otlp,none': 'OTEL_TRACES_EXPORTER lists none beside another exporter',
    });
    refusesValues('OTEL_SDK_DISABLED', { yes: 'OTEL_SDK_DISABLED must be true or false (got "yes")' });
    refusesValues('OTEL_EXPORTER_OTLP_ENDPOINT', {
      'grpc://collector:4317': 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, such as http://otel-collector:4318',
    });
    refusesValues('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', {
      'https://user:s3cret-key@collector.example.com/v1/traces':
        'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must not carry credentials (put them in OTEL_EXPORTER_OTLP_HEADERS)',
    });
  });
});

describe('loadConfig: what a newcomer gets wrong first, all named at once', () => {
  const placeholder = (name: string) => `${name} is still a placeholder such as change-me (its value is not shown): set the real value`;

  it('refuses a placeholder for every secret and client id, not only the two keys, without echoing it', () => {
    for (const name of [
      'OIDC_CLIENT_ID',
      'OIDC_CLIENT_SECRET',
      'GITHUB_CLIENT_ID',
      'GITHUB_CLIENT_SECRET',
      'BROKER_SECRET',
      'TOKEN_ENCRYPTION_KEY',
    ])
      for (const value of ['change-me', 'CHANGEME', 'example', 'xxx', '<your secret>', 'change-me-change-me-change-me-change-me'])
        refuses(validEnv({ [name]: value }), placeholder(name));
    refuses(validEnv({ METRICS_TOKEN: 'change-me-please-0123' }), placeholder('METRICS_TOKEN'));
    refuses(validEnv({ SERVICE_ISSUE_BOT_SECRET: 'change-me' }), placeholder('SERVICE_ISSUE_BOT_SECRET'));
    refuses(validEnv({ GITLAB_CLIENT_ID: 'gitlab-app', GITLAB_CLIENT_SECRET: 'change-me' }), placeholder('GITLAB_CLIENT_SECRET'));
    // Real-looking values pass.
    assert.ok(loadConfig(validEnv({ OIDC_CLIENT_SECRET: 'an-example-of-nothing-9f3a', GITHUB_CLIENT_SECRET: 'x' })));
  });

  it('refuses an unknown LOG_LEVEL instead of reading it as info', () => {
    refuses(validEnv({ LOG_LEVEL: 'verbose' }), 'LOG_LEVEL must be one of debug, info, warn, error (got "verbose")');
    for (const level of ['debug', 'info', 'warn', 'error']) assert.ok(loadConfig(validEnv({ LOG_LEVEL: level })));
  });

  it('names a misspelt top-level key of PROVIDERS_FILE, with the section it probably meant', () => {
    const dir = mkdtempSync(join(tmpdir(), 'config-keys-'));
    const file = join(dir, 'providers.yaml');
    writeFileSync(file, 'servics: []\nupstreams: []\nwebhook: []\n');
    refuses(
      validEnv({ PROVIDERS_FILE: file }),
      'PROVIDERS_FILE has unknown top-level keys "servics" (did you mean "services"?), "webhook" (did you mean "webhooks"?); it may hold "providers", "services", "upstreams", "builtinTools", "webhooks", "policy"',
    );
  });

  it('stops naming every bad setting in one go: placeholders, a hex key, a log level and a missing variable', () => {
    assert.throws(
      () =>
        loadConfig(
          validEnv({
            OIDC_CLIENT_SECRET: 'change-me',
            GITHUB_CLIENT_SECRET: 'change-me',
            TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
            LOG_LEVEL: 'loud',
            PUBLIC_URL: undefined,
          }),
        ),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(
          err.problems.map((p) => /^[A-Z_]+/.exec(p)?.[0]),
          ['OIDC_CLIENT_SECRET', 'GITHUB_CLIENT_SECRET', 'PUBLIC_URL', 'LOG_LEVEL', 'TOKEN_ENCRYPTION_KEY'],
        );
        return true;
      },
    );
  });
});
