// The suite helper every broker suite uses (test/support/suite.ts): started before the first test,
// read through while tests run, closed once after the last, loud when read too early.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { useSuite } from './support/suite.js';

class Fixture {
  closed = 0;
  private readonly secret = 'inside';
  constructor(readonly url: string) {}
  get upper(): string {
    return this.url.toUpperCase();
  }
  reveal(): string {
    return this.secret;
  }
  async close(): Promise<void> {
    this.closed += 1;
  }
}

const made: Fixture[] = [];
let earlyRead: unknown;

describe('useSuite', () => {
  const fixture = useSuite('the fixture', async () => {
    const f = new Fixture('http://127.0.0.1:1/mcp');
    made.push(f);
    return f;
  });
  try {
    void fixture.url;
  } catch (err) {
    earlyRead = err;
  }

  it('throws, naming the fixture, when read while the suite is being declared', () => {
    assert.ok(earlyRead instanceof Error);
    assert.match(earlyRead.message, /^the fixture is read before the suite started it/);
  });

  it('reads through to what start gave: fields, getters, and methods bound to it', () => {
    assert.equal(made.length, 1);
    assert.equal(fixture.url, 'http://127.0.0.1:1/mcp');
    assert.equal(fixture.upper, 'HTTP://127.0.0.1:1/MCP');
    const { reveal } = fixture;
    assert.equal(reveal(), 'inside');
    assert.ok('closed' in fixture);
  });
});

describe('after a suite that used useSuite', () => {
  it('started its fixture once and closed it once', () => {
    assert.equal(made.length, 1);
    assert.equal(made[0]!.closed, 1);
  });
});
