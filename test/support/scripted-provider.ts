import type { Provider, ProviderTokens } from '../../src/providers/provider.js';

/** A GitHub-like provider whose token refresh the test scripts; every other upstream call is unused. */
export function scriptedProvider(refresh: (tokens: ProviderTokens) => Promise<ProviderTokens>): Provider {
  return {
    id: 'github',
    displayName: 'GitHub',
    sandbox: false,
    scopes: [],
    defaultScopes: [],
    scopesApply: false,
    authorizationOrigin: 'https://github.test',
    refreshSkewMs: 60_000,
    freshTokenRetryMs: 0,
    prepare: async () => undefined,
    missingScopes: () => [],
    withoutImplied: (scopes) => scopes,
    scopesToRequest: (asked) => asked,
    buildAuthorizationUrl: () => Promise.reject(new Error('unused')),
    completeAuthorization: () => Promise.reject(new Error('unused')),
    refresh,
    revoke: async () => ({ revoked: true }),
  };
}
