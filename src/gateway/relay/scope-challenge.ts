import { requireConnection, toolError, type ConnectionGate, type ConnectionNeed } from '../../mcp/index.js';
import type { Provider } from '../../providers/provider.js';
import { M } from './messages.js';
import { bearerChallenge } from '../../providers/www-authenticate.js';
import { scopeList } from '../../providers/scopes.js';

export { bearerChallenge, parseChallenges, type BearerChallenge, type Challenge } from '../../providers/www-authenticate.js';

/**
 * Exactly the scopes to ask the user for after an upstream's scope challenge: those of the
 * upstream's base scopes and of the challenged ones that the granted scopes do not cover (a
 * broader granted scope covers the narrower, as the provider defines). Scopes the provider does not
 * describe count like any other.
 */
export function scopesToAskFor(
  provider: Pick<Provider, 'missingScopes'>,
  grantedScopes: string[],
  upstreamBaseScopes: string[],
  challengedScopes: string[],
): string[] {
  return provider.missingScopes(grantedScopes, [...new Set([...upstreamBaseScopes, ...challengedScopes])]);
}

/**
 * The scopes an upstream's challenge asks for that the operator did not allow it (`allowed`: its
 * `scopes.required` and `scopes.allow`; a broader allowed scope covers the narrower), in the
 * challenge's order: any of them makes the challenge a tool error, never a consent link, since the
 * widened token would serve every other upstream and service holding that connection.
 */
export function scopesNotAllowed(
  provider: Pick<Provider, 'missingScopes'>,
  allowed: string[],
  wwwAuthenticate: string | null | undefined,
): string[] {
  const challenged = bearerChallenge(wwwAuthenticate)?.scope ?? [];
  // missingScopes skips the check for providers whose tokens carry no scopes: so does this.
  return provider.missingScopes(allowed, challenged);
}

/**
 * What the forwarder answers when an upstream refused a call with 403 and a `WWW-Authenticate`
 * scope challenge: the incremental-scope elicitation (the built-in tools' gate, so the same link,
 * hold and decline rules) for exactly the scopes the connection lacks among `need.scopes` and the
 * challenged ones; `ok: true` only if the connection already has them all — which, after a
 * refusal, means the upstream named nothing we can fix, so that is a tool error naming the upstream.
 * @param upstream the upstream's id, as errors name it.
 * @throws {ProviderError} as requireConnection does (the provider unreachable for a refresh).
 */
export async function scopeChallengeGate(
  need: ConnectionNeed,
  wwwAuthenticate: string | null | undefined,
  upstream: string = need.provider.id,
): Promise<ConnectionGate> {
  const { deps, provider } = need;
  const challenged = bearerChallenge(wwwAuthenticate)?.scope ?? [];
  const nothing: ConnectionGate = { ok: false, result: toolError(M.insufficientScopeNamedNothing(upstream)) };
  // Only what the challenge names decides whether the user can fix it (the base scopes were checked before the call).
  const row = await deps.connections.find(need.call.principal, provider.id);
  const granted = row?.status === 'active' ? scopeList(row.scopes) : [];
  if (row?.status === 'active' && scopesToAskFor(provider, granted, [], challenged).length === 0) return nothing;
  const gate = await requireConnection({ ...need, scopes: [...new Set([...(need.scopes ?? []), ...challenged])] });
  return gate.ok ? nothing : gate;
}
