// The exchange phase's rows and targets: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exchangeRows } from '../lib/exchange-rows.js';
import type { LoadResult } from '../lib/load.js';
import { exchangeForm, exchangeSpec, servicesYaml } from '../phases/exchange.js';
import { loadResult } from './load-result.js';

const result = (target: string, connections: number, rps: number, p50: number, dirt = 0): LoadResult =>
  loadResult(target, connections, rps, p50, dirt);

describe('the exchange rows', () => {
  it('meets the throughput target at 80 % of the JWT baseline and the p50 target under 2 ms at c=1', () => {
    const rows = exchangeRows([
      { connections: 1, baseline: result('jwt baseline', 1, 1000, 0.5), exchange: result('broker exchange', 1, 800, 1.99) },
      { connections: 16, baseline: result('jwt baseline', 16, 1000, 5), exchange: result('broker exchange', 16, 799, 9) },
    ]);
    assert.deepEqual(
      rows.map((r) => [r.measure, r.met]),
      [
        ['JWT baseline, c=1', undefined],
        ['exchange, c=1', true],
        ['exchange p50, c=1', true],
        ['JWT baseline, c=16', undefined],
        ['exchange, c=16', false],
      ],
    );
    assert.match(rows[1]!.value, /800 req\/s = 80 % of JWT baseline/);
  });

  it('misses both targets when either side had errors, and the p50 target at 2 ms', () => {
    const rows = exchangeRows([
      { connections: 1, baseline: result('jwt baseline', 1, 1000, 0.5, 3), exchange: result('broker exchange', 1, 1000, 2) },
    ]);
    assert.equal(rows[0]!.value.endsWith('— ERRORS'), true);
    assert.equal(rows[1]!.met, false);
    assert.equal(rows[2]!.met, false);
  });
});

describe('the exchange requests', () => {
  it('posts the RFC 8693 form with the subject token in the body and Basic auth in the header', () => {
    const spec = exchangeSpec('Basic abc');
    const form = new URLSearchParams(spec.body('eyJ.x.y'));
    assert.equal(form.get('grant_type'), 'urn:ietf:params:oauth:grant-type:token-exchange');
    assert.equal(form.get('subject_token'), 'eyJ.x.y');
    assert.equal(form.get('audience'), 'github');
    assert.deepEqual(spec.headers('eyJ.x.y'), { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic abc' });
    assert.equal(new URLSearchParams(exchangeForm('t', { connect_request: 'cr', wait: '20' })).get('wait'), '20');
  });

  it('counts only a 200 with an access token and no refresh token as good', () => {
    const { ok } = exchangeSpec('Basic abc');
    assert.equal(ok(200, '{"access_token":"gho_x","token_type":"Bearer"}'), true);
    assert.equal(ok(200, '{"access_token":"gho_x","refresh_token":"ghr_y"}'), false);
    assert.equal(ok(400, '{"error":"interaction_required"}'), false);
    assert.match(servicesYaml(), /auth: client_secret_basic/);
  });
});
