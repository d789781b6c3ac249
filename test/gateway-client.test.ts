import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ConfiguredUpstream } from '../src/config/upstreams.js';
import { UpstreamClient } from '../src/gateway/upstream-client.js';
import { createLogger } from '../src/log.js';
import { startUpstreamServer, type UpstreamServer } from './support/upstream-server.js';

function clientFor(server: UpstreamServer, timeoutMs = 10_000): UpstreamClient {
  const upstream: ConfiguredUpstream = {
    id: 'unit',
    url: new URL(server.url),
    auth: { kind: 'none' },
    scopes: [],
    toolPrefix: 'unit_',
    tools: {},
    timeoutMs,
    displayName: 'unit',
  };
  return new UpstreamClient(upstream, {
    maxResultBytes: 64 * 1024,
    clientInfo: { name: 'broker', version: '0' },
    log: createLogger('error'),
  });
}

describe('the upstream client on its own', () => {
  let modern: UpstreamServer;
  before(async () => {
    modern = await startUpstreamServer({ era: 'modern', anonymous: true });
  });
  after(() => modern.close());

  it('does not take a server error at server/discover for the 2025-11-25 era: the next call learns 2026-07-28', async () => {
    const client = clientFor(modern);
    modern.faults.discover500 = true;
    const first = await client.request('tools/call', { name: 'echo', arguments: { text: 'a' } }, { key: 'k', token: undefined });
    assert.deepEqual([first.kind, first.kind === 'failed' ? first.reason : undefined], ['failed', 'http_error']);
    assert.equal(client.era, undefined, 'not guessed');
    const second = await client.request('tools/call', { name: 'echo', arguments: { text: 'b' } }, { key: 'k', token: undefined });
    assert.equal(second.kind, 'result');
    assert.equal(client.era, 'modern');
    assert.ok(!modern.requests.some((r) => r.method === 'initialize'), 'never an initialize to a 2026-07-28 server');
  });

  it('classifies input_required, JSON-RPC errors and an answer over the byte bound', async () => {
    const client = clientFor(modern);
    const ask = await client.request(
      'tools/call',
      { name: 'confirm', arguments: {} },
      { key: 'k', token: undefined, capabilities: { elicitation: { form: {} } } },
    );
    assert.equal(ask.kind, 'input_required');
    assert.equal(ask.kind === 'input_required' ? ask.requestState : undefined, 'upstream-opaque-state');
    const unknown = await client.request('tools/call', { name: 'nosuch', arguments: {} }, { key: 'k', token: undefined });
    assert.deepEqual([unknown.kind, unknown.kind === 'rpc_error' ? unknown.code : undefined], ['rpc_error', -32602]);
    const big = await client.request('tools/call', { name: 'big', arguments: {} }, { key: 'k', token: undefined });
    assert.deepEqual([big.kind, big.kind === 'failed' ? big.reason : undefined], ['failed', 'too_large']);
  });
});
