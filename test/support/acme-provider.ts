import { providerDefinitionSchema, type ProviderDefinitionInput } from '../../src/providers/definition.js';
import { OAuthProvider } from '../../src/providers/oauth-provider.js';

/**
 * "Acme", a configured `oauth2` provider whose endpoints a suite serves itself at `base` (a loopback
 * server): `/authorize`, `/token` and RFC 7009 revocation at `/revoke`, with `identity` saying where
 * the account comes from after the code exchange.
 */
export function acmeProvider(base: string, identity: ProviderDefinitionInput['identity']): OAuthProvider {
  return new OAuthProvider({
    definition: providerDefinitionSchema.parse({
      id: 'acme',
      displayName: 'Acme',
      kind: 'oauth2',
      authorizationEndpoint: `${base}/authorize`,
      tokenEndpoint: `${base}/token`,
      identity,
      revocation: { kind: 'rfc7009', endpoint: `${base}/revoke` },
    }),
    clientId: 'acme-client',
    clientSecret: 'acme-secret',
    timeoutMs: 2000,
  });
}
