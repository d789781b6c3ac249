// The verified-token cache of AccessTokenVerifier for the token exchange's subject tokens
// (verifyForAudiences): a repeat is answered without verifying again, but only for the same
// audience list, never across to the broker's own audience, and not past the token's `exp`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AccessTokenVerifier } from '../src/auth/bearer.js';
import { OidcClient } from '../src/auth/oidc-client.js';
import { startIdp, type StartedIdp } from './support/idp.js';

const BROKER = 'http://127.0.0.1:1/mcp';
const BOT = ['https://bot.example.com/mcp'];
const TRACKER = ['https://tracker.example.com/mcp'];

describe('verifyForAudiences remembers what it verified', () => {
  let idp: StartedIdp;
  let verifier: AccessTokenVerifier;
  /** How many full verifications ran (each asks the OIDC client for the issuer). */
  let verifications = 0;

  before(async () => {
    idp = await startIdp({ clients: [], resource: BROKER });
    const oidc = new OidcClient({
      issuer: new URL(idp.issuer),
      clientId: 'broker',
      clientSecret: 'unused-secret',
      authMethod: 'client_secret_basic',
    });
    const issuer = oidc.issuer.bind(oidc);
    oidc.issuer = () => {
      verifications += 1;
      return issuer();
    };
    verifier = new AccessTokenVerifier(oidc, BROKER);
  });
  after(() => idp.close());

  it('answers a repeat of the same token for the same audiences without verifying it again', async () => {
    const token = await idp.mintAccessToken({ sub: 'alice', aud: BOT[0], expiresInSeconds: 600 });
    const first = await verifier.verifyForAudiences(token, BOT);
    const n = verifications;
    const again = await verifier.verifyForAudiences(token, BOT);
    assert.equal(verifications, n, 'the repeat was not verified again');
    assert.deepEqual(again, first);
  });

  it('keys by the audience list: the same token for another list is verified afresh and refused', async () => {
    const token = await idp.mintAccessToken({ sub: 'bob', aud: BOT[0], expiresInSeconds: 600 });
    await verifier.verifyForAudiences(token, BOT);
    const n = verifications;
    await assert.rejects(verifier.verifyForAudiences(token, TRACKER), /aud/);
    await assert.rejects(verifier.verifyAccessToken(token), /aud/, 'never answers for the broker’s own audience');
    assert.equal(verifications, n + 2);
  });

  it('keys both callers the same way: a "token" spelled like a service cache key is verified afresh and refused', async () => {
    const token = await idp.mintAccessToken({ sub: 'dora', aud: BOT[0], expiresInSeconds: 600 });
    await verifier.verifyForAudiences(token, BOT);
    await assert.rejects(verifier.verifyAccessToken(`${JSON.stringify(BOT)}\n${token}`));
  });

  it('does not cross from the broker’s own cache to a service’s audiences', async () => {
    const token = await idp.mintAccessToken({ sub: 'carol', aud: BROKER, expiresInSeconds: 600 });
    await verifier.verifyAccessToken(token);
    await assert.rejects(verifier.verifyForAudiences(token, BOT), /aud/);
  });

  it('keeps no failure, and drops a success at its exp', async () => {
    const foreign = await idp.mintAccessToken({ sub: 'dave', aud: TRACKER[0], expiresInSeconds: 600 });
    await assert.rejects(verifier.verifyForAudiences(foreign, BOT));
    const n = verifications;
    await assert.rejects(verifier.verifyForAudiences(foreign, BOT));
    assert.equal(verifications, n + 1, 'a refusal is checked again');
    const short = await idp.mintAccessToken({ sub: 'erin', aud: BOT[0], expiresInSeconds: 1 });
    await verifier.verifyForAudiences(short, BOT);
    await sleep(1100);
    const m = verifications;
    await verifier.verifyForAudiences(short, BOT).catch(() => undefined);
    assert.equal(verifications, m + 1, 'past its exp the token is verified again');
  });
});
