import type { ConfiguredUpstream } from '../config/upstreams.js';
import type { Logger } from '../log.js';
import type { Provider, TokenVerdict } from '../providers/provider.js';

/** What decides whether a token an upstream refused is dead: the provider's word, or `not_checked`. */
export type RefusalVerdict = TokenVerdict | 'not_checked';

/**
 * After an upstream refused a user's token (401, and again after the single-flight refresh): whether
 * the connection itself is dead. A `provider:` upstream is a third party holding a token another
 * party issued, so only the provider's own refusal marks the connection (GitHub's `GET /user`, a
 * userinfo endpoint); an `auth: mcp` upstream is the token's audience and its authorization server
 * issued it, so its 401 is the last word (`not_checked`), as it always was.
 */
export async function upstreamRefusalVerdict(
  upstream: ConfiguredUpstream,
  provider: Provider,
  accessToken: string,
  log: Logger,
): Promise<RefusalVerdict> {
  if (upstream.auth.kind === 'mcp') return 'not_checked';
  const verdict = provider.checkAccessToken ? await provider.checkAccessToken(accessToken) : 'unknown';
  log.warn('upstream_token_refused', { upstream: upstream.id, provider: provider.id, provider_verdict: verdict });
  return verdict;
}

/** Whether the connection is marked `reauth_required` after `verdict`: only a token its issuer refuses. */
export function connectionIsDead(verdict: RefusalVerdict): boolean {
  return verdict === 'refused' || verdict === 'not_checked';
}
