import { randomHandle, randomText } from '../crypto/index.js';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';

/** Secrets `npm run dev` generates once and keeps, so a restart keeps sessions, tokens and sign-ins. */
export interface DevSecrets {
  brokerSecret: string;
  tokenEncryptionKey: string;
  pagesClientSecret: string;
  sandboxGitHubClientSecret: string;
  idpCookieKeys: string[];
  idpSigningJwk: Record<string, unknown>;
  /** The example issue service's client secret at the broker (SERVICE_ISSUE_SERVICE_SECRET). */
  exampleServiceSecret: string;
  /** The key the example service seals its requestState with. */
  exampleStateKey: string;
  /** The HMAC key of the sandbox GitHub MCP endpoint's own requestState (delete_repository's confirmation). */
  sandboxMcpStateKey: string;
}

/** Secrets added after the first dev-secrets.json files were written: filled in when missing, the others kept. */
const ADDED_LATER = ['exampleServiceSecret', 'exampleStateKey', 'sandboxMcpStateKey'] as const;

/** Reads `path`, or creates it (mode 0600) with fresh random secrets. */
export async function loadOrCreateDevSecrets(path: string): Promise<{ secrets: DevSecrets; created: boolean }> {
  if (existsSync(path)) {
    const secrets = JSON.parse(readFileSync(path, 'utf8')) as Partial<DevSecrets>;
    if (secrets.brokerSecret && secrets.tokenEncryptionKey && secrets.idpSigningJwk && secrets.idpCookieKeys?.length) {
      // A file from before the example service or the sandbox's MCP endpoint: add their secrets, keep the rest.
      const missing = ADDED_LATER.filter((name) => !secrets[name]);
      if (missing.length === 0) return { secrets: secrets as DevSecrets, created: false };
      const upgraded = { ...secrets, ...Object.fromEntries(missing.map((name) => [name, randomHandle()])) } as DevSecrets;
      write(path, upgraded);
      return { secrets: upgraded, created: false };
    }
  }
  const secrets: DevSecrets = {
    brokerSecret: randomHandle(),
    tokenEncryptionKey: randomText(32, 'base64'),
    pagesClientSecret: randomHandle(24),
    sandboxGitHubClientSecret: randomText(20, 'hex'),
    idpCookieKeys: [randomHandle()],
    idpSigningJwk: { ...(await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey)), alg: 'RS256', use: 'sig' },
    exampleServiceSecret: randomHandle(),
    exampleStateKey: randomHandle(),
    sandboxMcpStateKey: randomHandle(),
  };
  write(path, secrets);
  return { secrets, created: true };
}

function write(path: string, secrets: DevSecrets): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  renameSync(tmp, path);
  chmodSync(path, 0o600);
}
