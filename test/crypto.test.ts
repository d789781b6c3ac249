import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  constantTimeEqual,
  deriveKey,
  keyIdFor,
  mac,
  randomHandle,
  Sealer,
  SealError,
  sha256Base64url,
  sha256Hex,
  verifyMac,
  type OpenFailure,
  type SealContext,
  type Sealed,
} from '../src/crypto/index.js';

const ALICE: SealContext = { issuer: 'https://idp.example.com', subject: 'alice', provider: 'github' };
const SECRET = '{"accessToken":"gho_0123456789abcdefghijABCDEFGHIJ012345","scopes":["repo"]}';

/** Asserts that opening throws a SealError with `reason` and a message that reveals nothing else. */
function refusesToOpen(sealer: Sealer, sealed: Sealed, ctx: SealContext, reason: OpenFailure): void {
  assert.throws(
    () => sealer.open(sealed, ctx),
    (err: unknown) => {
      assert.ok(err instanceof SealError, `expected SealError, got ${String(err)}`);
      assert.equal(err.reason, reason);
      assert.equal(err.message, `sealed value could not be opened: ${reason}`);
      return true;
    },
  );
}

/** Flips one bit of the base64url part at `index` of a `v1.<iv>.<ct>.<tag>` value. */
function flipBit(value: string, index: number): string {
  const parts = value.split('.');
  const bytes = Buffer.from(parts[index]!, 'base64url');
  bytes[0] = bytes[0]! ^ 0x01;
  parts[index] = bytes.toString('base64url');
  return parts.join('.');
}

describe('Sealer (AES-256-GCM, bound to principal and provider)', () => {
  const key = randomBytes(32);
  const sealer = new Sealer([key]);

  it('opens what it sealed, with the same context', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    assert.equal(sealer.open(sealed, ALICE), SECRET);
    assert.equal(sealer.open(sealer.seal('', ALICE), ALICE), '', 'the empty string round-trips too');
  });

  it('stores a v1.<iv>.<ciphertext>.<tag> value under the key id, without the plaintext', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    assert.equal(sealed.keyId, keyIdFor(key));
    assert.match(sealed.keyId, /^k[0-9a-f]{12}$/);
    const parts = sealed.value.split('.');
    assert.equal(parts.length, 4);
    assert.equal(parts[0], 'v1');
    assert.equal(Buffer.from(parts[1]!, 'base64url').length, 12, '96-bit IV');
    assert.equal(Buffer.from(parts[3]!, 'base64url').length, 16, '128-bit tag');
    assert.ok(!sealed.value.includes('gho_'));
    assert.ok(!Buffer.from(parts[2]!, 'base64url').toString('latin1').includes('gho_'));
  });

  it('seals the same plaintext differently every time (random IV)', () => {
    const one = sealer.seal(SECRET, ALICE);
    const two = sealer.seal(SECRET, ALICE);
    assert.notEqual(one.value, two.value);
    assert.notEqual(one.value.split('.')[1], two.value.split('.')[1]);
    assert.equal(sealer.open(one, ALICE), sealer.open(two, ALICE));
  });

  it('refuses a tampered ciphertext, IV or tag with reason "tampered"', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    for (const index of [1, 2, 3]) refusesToOpen(sealer, { ...sealed, value: flipBit(sealed.value, index) }, ALICE, 'tampered');
  });

  it('refuses a value moved to another subject, provider or issuer with reason "tampered"', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    refusesToOpen(sealer, sealed, { ...ALICE, subject: 'mallory' }, 'tampered');
    refusesToOpen(sealer, sealed, { ...ALICE, provider: 'gitlab' }, 'tampered');
    refusesToOpen(sealer, sealed, { ...ALICE, issuer: 'https://other-idp.example.com' }, 'tampered');
  });

  it('binds the context unambiguously: fields that would collide if naively joined do not open each other', () => {
    // Joined with ';' these read the same: "…;alice;github;x" — the length prefixes must keep them apart.
    const sealed = sealer.seal(SECRET, { issuer: 'https://idp.example.com', subject: 'alice;github', provider: 'x' });
    refusesToOpen(sealer, sealed, { issuer: 'https://idp.example.com', subject: 'alice', provider: 'github;x' }, 'tampered');
  });

  it('refuses a value under a key id it does not hold with reason "unknown_key"', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    refusesToOpen(sealer, { ...sealed, keyId: 'k000000000000' }, ALICE, 'unknown_key');
    refusesToOpen(new Sealer([randomBytes(32)]), sealed, ALICE, 'unknown_key');
  });

  it('refuses values of the wrong shape with reason "malformed"', () => {
    const sealed = sealer.seal(SECRET, ALICE);
    refusesToOpen(sealer, { ...sealed, value: sealed.value.replace(/^v1\./, 'v2.') }, ALICE, 'malformed');
    refusesToOpen(sealer, { ...sealed, value: sealed.value.split('.').slice(0, 3).join('.') }, ALICE, 'malformed');
    refusesToOpen(sealer, { ...sealed, value: '' }, ALICE, 'malformed');
    const parts = sealed.value.split('.');
    refusesToOpen(sealer, { ...sealed, value: [parts[0], parts[1], parts[2], parts[3]!.slice(0, 10)].join('.') }, ALICE, 'malformed');
  });

  it('rotates keys: a ring [new, old] opens values sealed under the old key and seals under the new one', () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const before = new Sealer([oldKey]);
    const legacy = before.seal(SECRET, ALICE);

    const ring = new Sealer([newKey, oldKey]);
    assert.equal(ring.keyId, keyIdFor(newKey));
    assert.equal(ring.open(legacy, ALICE), SECRET);
    const fresh = ring.seal(SECRET, ALICE);
    assert.equal(fresh.keyId, keyIdFor(newKey));
    assert.notEqual(fresh.keyId, legacy.keyId);
    refusesToOpen(before, fresh, ALICE, 'unknown_key');
  });

  it('refuses an empty key ring and keys that are not 32 bytes', () => {
    assert.throws(() => new Sealer([]), { name: 'RangeError', message: 'Sealer needs at least one key' });
    assert.throws(() => new Sealer([randomBytes(16)]), { name: 'RangeError', message: 'AES-256-GCM keys must be 32 bytes' });
    assert.throws(() => new Sealer([randomBytes(32), randomBytes(33)]), {
      name: 'RangeError',
      message: 'AES-256-GCM keys must be 32 bytes',
    });
  });

  it('gives different keys different ids', () => {
    assert.notEqual(keyIdFor(randomBytes(32)), keyIdFor(randomBytes(32)));
    assert.equal(keyIdFor(key), keyIdFor(Buffer.from(key)));
  });
});

describe('constantTimeEqual', () => {
  it('is true only for identical strings, whatever their lengths', () => {
    assert.equal(constantTimeEqual('s3cret-token', 's3cret-token'), true);
    assert.equal(constantTimeEqual('', ''), true);
    assert.equal(constantTimeEqual('s3cret-token', 's3cret-tokeN'), false);
    assert.equal(constantTimeEqual('s3cret-token', 's3cret'), false, 'a prefix is not equal');
    assert.equal(constantTimeEqual('s3cret', 's3cret-token'), false);
    assert.equal(constantTimeEqual('', 'x'), false);
    assert.equal(constantTimeEqual('é', 'e\u0301'), false, 'compares bytes, not normalised text');
  });
});

describe('mac / verifyMac', () => {
  const key = randomBytes(32);

  it('makes a 256-bit base64url tag that verifies with the same key and parts', () => {
    const tag = mac(key, 'pending-id', 'github');
    assert.match(tag, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(verifyMac(key, tag, 'pending-id', 'github'), true);
    assert.equal(mac(key, 'pending-id', 'github'), tag, 'deterministic');
  });

  it('keeps parts apart: ["ab","c"] and ["a","bc"] give different tags', () => {
    assert.notEqual(mac(key, 'ab', 'c'), mac(key, 'a', 'bc'));
    assert.equal(verifyMac(key, mac(key, 'ab', 'c'), 'a', 'bc'), false);
    assert.notEqual(mac(key, 'a:1;', 'b'), mac(key, 'a', '1;b'));
    assert.notEqual(mac(key, 'ab'), mac(key, 'ab', ''));
    assert.notEqual(mac(key), mac(key, ''));
  });

  it('refuses a tag made with another key, for other parts, or altered', () => {
    const tag = mac(key, 'x');
    assert.equal(verifyMac(randomBytes(32), tag, 'x'), false);
    assert.equal(verifyMac(key, tag, 'y'), false);
    assert.equal(verifyMac(key, tag.slice(0, -1) + (tag.endsWith('A') ? 'B' : 'A'), 'x'), false);
    assert.equal(verifyMac(key, '', 'x'), false);
  });
});

describe('deriveKey', () => {
  const secret = randomBytes(32);

  it('derives a different 32-byte key for each purpose, deterministically', () => {
    const csrf = deriveKey(secret, 'csrf');
    const link = deriveKey(secret, 'connect-link');
    const state = deriveKey(secret, 'request-state');
    for (const k of [csrf, link, state]) assert.equal(k.length, 32);
    assert.notDeepEqual(csrf, link);
    assert.notDeepEqual(link, state);
    assert.notDeepEqual(csrf, state);
    assert.deepEqual(deriveKey(secret, 'csrf'), csrf);
    assert.notDeepEqual(csrf, secret);
  });

  it('derives different keys from different secrets for the same purpose', () => {
    assert.notDeepEqual(deriveKey(secret, 'csrf'), deriveKey(randomBytes(32), 'csrf'));
  });

  it('makes a tag for one purpose useless for another', () => {
    const tag = mac(deriveKey(secret, 'csrf'), 'session-hash');
    assert.equal(verifyMac(deriveKey(secret, 'connect-link'), tag, 'session-hash'), false);
  });
});

describe('randomHandle and digests', () => {
  it('draws handles of at least 43 base64url characters, unique over 1000 draws', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const handle = randomHandle();
      assert.match(handle, /^[A-Za-z0-9_-]{43,}$/);
      seen.add(handle);
    }
    assert.equal(seen.size, 1000);
  });

  it('scales the handle with the requested entropy', () => {
    assert.equal(randomHandle(16).length, 22);
    assert.equal(randomHandle(64).length, 86);
  });

  it('hashes with SHA-256 in hex and base64url', () => {
    assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.equal(
      sha256Base64url('abc'),
      Buffer.from('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'hex').toString('base64url'),
    );
  });
});
