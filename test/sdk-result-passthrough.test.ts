// The one workaround that touches @modelcontextprotocol/server's private members
// (src/gateway/sdk-result-passthrough.ts): it holds against the installed SDK, and says so loudly
// when an upgrade removes what it relies on. That upstream results then pass through unchanged is
// test/gateway-forward.test.ts's matter.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Server } from '@modelcontextprotocol/server';
import { passToolResultsThrough } from '../src/gateway/sdk-result-passthrough.js';

describe('passing tools/call results through the SDK server', () => {
  it('finds the internals it relies on in the installed SDK, and replaces the tools/call wrapper only', () => {
    const server = new Server({ name: 't', version: '0' }, { capabilities: { tools: {} } });
    const internals = server as unknown as { _wrapHandler: (method: string, handler: unknown) => unknown };
    const before = internals._wrapHandler;
    passToolResultsThrough(server);
    assert.notEqual(internals._wrapHandler, before);
    const handler = async () => ({ content: [{ type: 'a-block-newer-than-the-sdk', data: 1 }] });
    assert.equal(typeof internals._wrapHandler('tools/call', handler), 'function');
    assert.equal(typeof internals._wrapHandler('tools/list', handler), 'function');
  });

  it('throws naming the SDK when those internals are gone, instead of validating results silently', () => {
    const changed = Object.create(null) as Server;
    assert.throws(() => passToolResultsThrough(changed), /@modelcontextprotocol\/server changed its internals/);
  });
});
