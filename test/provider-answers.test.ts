// A provider's answer is read up to MAX_PROVIDER_ANSWER_BYTES: a larger one is "unavailable",
// never read whole into memory.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_PROVIDER_ANSWER_BYTES, readJson } from '../src/providers/http.js';
import { ProviderError } from '../src/providers/provider.js';

describe('provider answers', () => {
  it('reads a JSON object within the bound', async () => {
    assert.deepEqual(await readJson(new Response('{"login":"octocat"}'), 'GitHub'), { login: 'octocat' });
  });

  it('answers an answer over the bound as unavailable, saying so only in the log detail', async () => {
    const huge = `{"login":"${'x'.repeat(MAX_PROVIDER_ANSWER_BYTES)}"}`;
    await assert.rejects(readJson(new Response(huge), 'GitHub'), (err: unknown) => {
      assert.ok(err instanceof ProviderError);
      assert.equal(err.code, 'unavailable');
      assert.match(err.message, /^GitHub sent an unreadable answer/);
      assert.match(err.detail ?? '', /over 1048576 bytes/);
      return true;
    });
  });
});
