import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LAST_USED_EVERY_MS, lastUsedIsDue, UsageMarks } from '../src/connections/index.js';

const ALICE = { issuer: 'https://idp.example', subject: 'alice' };

describe('last-used marks', () => {
  it('a row is due when never marked or marked more than a minute ago', () => {
    const now = 1_000_000;
    assert.equal(lastUsedIsDue(null, now), true);
    assert.equal(lastUsedIsDue(now - LAST_USED_EVERY_MS, now), false);
    assert.equal(lastUsedIsDue(now - LAST_USED_EVERY_MS - 1, now), true);
  });

  it('a service usage is due once a minute per principal, provider and service', () => {
    const marks = new UsageMarks();
    const t = 5_000_000;
    assert.equal(marks.due(ALICE, 'github', 'bot', t), true);
    assert.equal(marks.due(ALICE, 'github', 'bot', t + 1_000), false);
    assert.equal(marks.due(ALICE, 'github', 'other-bot', t + 1_000), true, 'another service');
    assert.equal(marks.due({ ...ALICE, subject: 'bob' }, 'github', 'bot', t + 1_000), true, 'another principal');
    assert.equal(marks.due(ALICE, 'github', 'bot', t + LAST_USED_EVERY_MS + 1), true, 'a minute later');
  });

  it('a forgotten mark (its write failed) is due again at once', () => {
    const marks = new UsageMarks();
    assert.equal(marks.due(ALICE, 'github', 'bot', 1), true);
    marks.forget(ALICE, 'github', 'bot');
    assert.equal(marks.due(ALICE, 'github', 'bot', 2), true);
  });

  it('stays bounded: past its size the oldest marks are dropped', () => {
    const marks = new UsageMarks(3);
    for (const s of ['a', 'b', 'c', 'd']) marks.due({ ...ALICE, subject: s }, 'github', 'bot', 10);
    assert.equal(marks.due({ ...ALICE, subject: 'a' }, 'github', 'bot', 11), true, 'the oldest was forgotten');
    assert.equal(marks.due({ ...ALICE, subject: 'd' }, 'github', 'bot', 11), false);
  });
});
