// The exchange phase's rows and targets: `node --import tsx --test bench/test/*.test.ts`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exchangeRows } from '../lib/exchange-rows.js';
import type { LoadResult } from '../lib/load.js';
import { exchangeForm, exchangeSpec, servicesYaml } from '../phases/exchange.js';
import { loadResult } from './load-result.js';

const result = (target: string, connections: number, rps: number, p50: number, dirt = 0): LoadResult =>
  loadResult(target, connections, rps, p50, dirt);

const at = (c: number, bareRps: number, exchangeRps: number, exchangeP50: number, dirt = 0) => ({
  connections: c,
  bare: result('jwt bare', c, bareRps, 0.4),
  baseline: result('jwt baseline', c, bareRps / 2, 0.5, dirt),
  exchange: result('broker exchange', c, exchangeRps, exchangeP50),
  limitsOff: result('exchange, limits off', c, exchangeRps * 1.25, exchangeP50),
});

describe('the exchange rows', () => {
  it('meets the throughput target at 80 % of the node:http baseline with the default limits, and the p50 target under 2 ms at c=1', () => {
    const rows = exchangeRows([at(1, 1000, 800, 1.99), at(16, 1000, 799, 9)], 1_000_000);
    assert.deepEqual(
      rows.map((r) => [r.measure, r.met]),
      [
        ['JWT baseline, node:http, c=1', undefined],
        ['JWT baseline, Express, c=1', undefined],
        ['exchange, default limits, c=1', true],
        ['exchange, limits off, c=1', undefined],
        ['exchange p50, default limits, c=1', true],
        ['JWT baseline, node:http, c=16', undefined],
        ['JWT baseline, Express, c=16', undefined],
        ['exchange, default limits, c=16', false],
        ['exchange, limits off, c=16', undefined],
      ],
    );
    assert.match(rows[2]!.value, /^800 req\/s = 80 % of node:http, 160 % of Express/);
    assert.match(rows[2]!.value, /the one service 48000\/min \(its limit set to 1000000\)/);
    assert.match(rows[3]!.value, /^1000 req\/s = 100 % of node:http/);
    assert.equal(rows[3]!.target, undefined, 'the limits-off row is beside the target, not against it');
  });

  it('misses both targets when either side had errors, and the p50 target at 2 ms', () => {
    const dirtyBare = { ...at(1, 1000, 1000, 1), bare: result('jwt bare', 1, 1000, 0.4, 3) };
    const rows = exchangeRows([dirtyBare], 1_000_000);
    assert.equal(rows[0]!.value.endsWith('— ERRORS'), true);
    assert.equal(rows[2]!.met, false);
    assert.equal(rows[4]!.met, false);
    assert.equal(exchangeRows([at(1, 1000, 1000, 2)], 1_000_000)[4]!.met, false);
  });

  it('says when the one service reached the per-service limit', () => {
    assert.match(exchangeRows([at(1, 1000, 800, 1)], 600)[2]!.value, /its limit set to 600, REACHED/);
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
