// The one OAuth client adapter (src/providers/oauth-client.ts) and the one scope splitter
// (src/providers/scopes.ts): what both kinds of provider read from a token response.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Configuration } from 'openid-client';
import { grantError, tokensFrom, type OAuthServer } from '../src/providers/oauth-client.js';
import { ProviderError } from '../src/providers/provider.js';
import { scopeList, scopeString } from '../src/providers/scopes.js';

const config = new Configuration({ issuer: 'https://as.example', token_endpoint: 'https://as.example/token' }, 'client');

function server(scopeCommas: boolean, keepScopes: OAuthServer['keepScopes'] = (granted) => granted): OAuthServer {
  return { config, name: 'Example', scopeCommas, keepScopes, keepsRefreshToken: true };
}

describe('scope strings', () => {
  it('split on spaces only, unless commas are asked for', () => {
    assert.deepEqual(scopeList('repo  read:org '), ['repo', 'read:org']);
    assert.deepEqual(scopeList('repo,user'), ['repo,user']);
    assert.deepEqual(scopeList('repo, user\tgist', { commas: true }), ['repo', 'user', 'gist']);
    assert.deepEqual(scopeList(''), []);
    assert.deepEqual(scopeList(undefined), []);
    assert.deepEqual(scopeList(null, { commas: true }), []);
    assert.equal(scopeString(['repo', 'user']), 'repo user');
    assert.deepEqual(scopeList(scopeString(['a', 'b:c'])), ['a', 'b:c']);
  });
});

describe('token responses', () => {
  const response = { access_token: 'at', token_type: 'bearer', refresh_token: 'rt', expires_in: 60 } as const;

  it('read the granted scopes by the provider’s syntax, and take the requested ones when none are listed', () => {
    assert.deepEqual(tokensFrom(server(true), { ...response, scope: 'repo,user' }, ['x']).scopes, ['repo', 'user']);
    assert.deepEqual(tokensFrom(server(false), { ...response, scope: 'a,b c' }, ['x']).scopes, ['a,b', 'c']);
    assert.deepEqual(tokensFrom(server(false), { ...response, scope: '' }, ['x']).scopes, ['x']);
    assert.deepEqual(tokensFrom(server(false), response, ['x', 'y']).scopes, ['x', 'y']);
  });

  it('keep what the provider keeps, the refresh token, and an expiry from expires_in', () => {
    const before = Date.now();
    const tokens = tokensFrom(
      server(false, (granted, requested) => granted.filter((s) => s !== 'openid' || requested.includes('openid'))),
      { ...response, scope: 'openid issues' },
      ['issues'],
    );
    assert.deepEqual(tokens.scopes, ['issues']);
    assert.equal(tokens.refreshToken, 'rt');
    assert.ok(tokens.expiresAt! >= before + 60_000 && tokens.expiresAt! <= Date.now() + 60_000);
    assert.equal(tokensFrom(server(false), { ...response, expires_in: 0 }, []).expiresAt, undefined);
  });
});

describe('grant errors', () => {
  it('pass a ProviderError through and call anything else unreadable, never quoting it to people', () => {
    const own = new ProviderError('rate_limited', 'slow down');
    assert.equal(grantError(own, 'code', 'Example'), own);
    const other = grantError(new TypeError('secret-ish detail'), 'refresh', 'Example');
    assert.equal(other.code, 'unavailable');
    assert.doesNotMatch(other.message, /secret-ish/);
    assert.match(other.detail ?? '', /TypeError: secret-ish detail/);
  });
});
