// src/mcp/tools/inputs.ts: the tools' input schemas are built once per process, not on every
// request (the tools are registered on a new server per request; a new zod object is compiled
// afresh by the SDK's validation each time).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NO_INPUT, providerInput } from '../src/mcp/tools/inputs.js';

describe('tool input schemas', () => {
  it('gives the same schema object for the same provider catalog and description, another for another', () => {
    const providers = new Map([
      ['github', {}],
      ['linear', {}],
    ]);
    const link = providerInput(providers, 'Which provider to link');
    assert.equal(providerInput(providers, 'Which provider to link'), link);
    assert.notEqual(providerInput(providers, 'Which provider to disconnect'), link);
    assert.notEqual(providerInput(new Map([['github', {}]]), 'Which provider to link'), link);
    assert.deepEqual(link.parse({ provider: 'linear' }), { provider: 'linear' });
    assert.equal(link.safeParse({ provider: 'gitlab' }).success, false);
    assert.deepEqual(NO_INPUT.parse({}), {});
  });
});
