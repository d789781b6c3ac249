import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal.js';
import type { Logger } from '../log.js';
import { ProviderError, type Provider } from '../providers/provider.js';
import { lastUsedIsDue } from './last-used.js';
import type { OpenConnection, Usable } from './refresh.js';
import type { ProviderTokens, TokenVerdict } from '../providers/provider.js';

/** What decides whether a refused token is dead: the provider's word, or `not_checked` where the refuser's word is final. */
export type RefusalVerdict = TokenVerdict | 'not_checked';

/**
 * Who a token is sent to, which decides whose refusal marks the connection for reconnecting:
 * - `provider`: the provider's own API (a built-in tool): its 401 is the provider's word;
 * - `audience`: a server the token was issued for by its own authorization server (an `auth: mcp`
 *   upstream): its 401 is the last word too;
 * - `third_party`: a server holding a token another party issued (a `provider:` upstream): only the
 *   provider's own refusal counts (its `checkAccessToken`), since the connection serves everyone else.
 */
export type TokenAudience = { kind: 'provider' } | { kind: 'audience'; id: string } | { kind: 'third_party'; id: string };

/** What the connection core needs to run {@link useConnection}. */
export interface UseDeps {
  connections: {
    refreshRejected(owner: Principal, provider: Provider, rejected: ProviderTokens): Promise<Usable | undefined>;
    markReauthRequired(owner: Principal, provider: string, reason: string): Promise<void>;
    touch(owner: Principal, provider: string): Promise<void>;
  };
  log: Logger;
}

export interface UseRequest<T> {
  principal: Principal;
  provider: Provider;
  connection: OpenConnection;
  audience: TokenAudience;
  /** Sends the token. A thrown ProviderError `unauthorized` is a refusal of the token. */
  send(accessToken: string): Promise<T>;
  /** Whether an answer `send` returned is a refusal of the token (an HTTP 401). */
  refused?(answer: T): boolean;
}

/**
 * - `answered`: the server answered (anything but a refusal of the token);
 * - `reconnect`: the token is dead, and the connection is now marked `reauth_required`: ask the person again;
 * - `refused`: a third party refused a token the provider still accepts (or could not judge): the
 *   connection stays as it is, and the call fails naming that server.
 * `last` is the final refusal: the answer `send` returned, or the error it threw.
 */
export type UseOutcome<T> =
  | { kind: 'answered'; answer: T }
  | { kind: 'reconnect'; verdict: RefusalVerdict; last: { answer: T } | { error: ProviderError } }
  | { kind: 'refused'; verdict: RefusalVerdict; last: { answer: T } | { error: ProviderError } };

/** A token minted or refreshed this recently may be refused once while it replicates at the provider. */
const FRESH_TOKEN_MS = 60_000;

type Attempt<T> = { ok: true; answer: T } | { ok: false; last: { answer: T } | { error: ProviderError } };

/**
 * The one policy for a refused token, shared by the built-in tools and the gateway (the token
 * exchange hands the token over, and refreshes through the same refresher before it does):
 * 1. the provider's own API refused a token minted under a minute ago: wait out its replication
 *    (`freshTokenRetryMs`) and send it once more;
 * 2. still refused: one single-flight refresh (the pair another caller refreshed meanwhile counts)
 *    and one more send with the new token;
 * 3. still refused: whose word is it? The provider's (or the token's own audience's) marks the
 *    connection `reauth_required` (never deleted); a third party's only when the provider refuses
 *    the token too.
 * A use that was answered records the connection's last use (at most once per interval).
 * @throws {ProviderError} `unavailable` when the provider cannot be reached to refresh; any error
 * `send` throws other than a refusal.
 */
export async function useConnection<T>(deps: UseDeps, req: UseRequest<T>): Promise<UseOutcome<T>> {
  const { principal, provider, connection } = req;
  let token = connection.tokens.accessToken;
  let attempt = await sendOnce(req, token);

  const fresh = Date.now() - connection.row.updated_at < FRESH_TOKEN_MS;
  if (!attempt.ok && req.audience.kind === 'provider' && fresh && provider.freshTokenRetryMs > 0) {
    await sleep(provider.freshTokenRetryMs);
    attempt = await sendOnce(req, token);
  }
  if (!attempt.ok) {
    const refreshed = await deps.connections.refreshRejected(principal, provider, connection.tokens);
    if (refreshed?.kind === 'ok' && refreshed.connection.tokens.accessToken !== token) {
      token = refreshed.connection.tokens.accessToken;
      attempt = await sendOnce(req, token);
    }
  }
  if (attempt.ok) {
    if (lastUsedIsDue(connection.row.last_used_at)) void deps.connections.touch(principal, provider.id).catch(() => undefined);
    return { kind: 'answered', answer: attempt.answer };
  }

  const verdict = await verdictOn(req.audience, provider, token, deps.log);
  if (verdict !== 'refused' && verdict !== 'not_checked') return { kind: 'refused', verdict, last: attempt.last };
  await deps.connections.markReauthRequired(principal, provider.id, req.audience.kind === 'provider' ? 'api_401' : 'upstream_401');
  return { kind: 'reconnect', verdict, last: attempt.last };
}

async function sendOnce<T>(req: UseRequest<T>, token: string): Promise<Attempt<T>> {
  try {
    const answer = await req.send(token);
    return req.refused?.(answer) ? { ok: false, last: { answer } } : { ok: true, answer };
  } catch (err) {
    if (err instanceof ProviderError && err.code === 'unauthorized') return { ok: false, last: { error: err } };
    throw err;
  }
}

/** Whether a refusal that survived the retries means the token is dead (see {@link TokenAudience}). */
async function verdictOn(audience: TokenAudience, provider: Provider, token: string, log: Logger): Promise<RefusalVerdict> {
  if (audience.kind !== 'third_party') return 'not_checked';
  const verdict = provider.checkAccessToken ? await provider.checkAccessToken(token) : 'unknown';
  log.warn('upstream_token_refused', { upstream: audience.id, provider: provider.id, provider_verdict: verdict });
  return verdict;
}
