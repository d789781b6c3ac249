// Known, harmless notes of libraries are silenced where the library is loaded, so that what a run
// prints is worth reading: a fresh process (a module prints its load-time notes once) loads the
// development IdP (oidc-provider) and starts one, and prints nothing on stderr.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runNode } from '../support/node-process.js';

const IDP = new URL('../../src/dev/identity-provider.ts', import.meta.url).href;

describe('library notes', () => {
  it('loads and starts the development IdP (oidc-provider, its in-memory storage) with nothing on stderr', async () => {
    const code = [
      `const { createIdentityProvider } = await import(${JSON.stringify(IDP)});`,
      `const idp = await createIdentityProvider({ issuer: 'http://127.0.0.1:9', resource: 'http://127.0.0.1:9/mcp', clients: [] });`,
      `console.log(typeof idp.provider.callback);`,
    ].join(' ');
    const run = await runNode(
      ['--import', 'tsx', '--input-type=module', '-e', code],
      { PATH: process.env.PATH ?? '' },
      { timeoutMs: 60_000 },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout.trim(), 'function');
    assert.equal(run.stderr, '');
  });
});
