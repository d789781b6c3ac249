import { ProviderError } from '../provider.js';

/**
 * Maps a GitHub REST API failure onto our error codes. A 403 is a rate limit only when GitHub says
 * so in its headers; otherwise it is a permission problem, never a broken connection.
 */
export function githubApiError(response: Response, body: Record<string, unknown>, action: string): ProviderError {
  const message = typeof body.message === 'string' ? body.message : `HTTP ${response.status}`;
  const retryAfter = Number(response.headers.get('retry-after'));
  const remaining = response.headers.get('x-ratelimit-remaining');
  const reset = Number(response.headers.get('x-ratelimit-reset'));
  const isRateLimit =
    response.status === 429 ||
    (response.status === 403 && (remaining === '0' || (Number.isFinite(retryAfter) && retryAfter > 0) || /rate limit/i.test(message)));
  if (isRateLimit) {
    const wait =
      Number.isFinite(retryAfter) && retryAfter > 0
        ? retryAfter
        : Number.isFinite(reset) && reset > 0
          ? Math.max(1, Math.ceil(reset - Date.now() / 1000))
          : 60;
    return new ProviderError(
      'rate_limited',
      `GitHub's rate limit was reached while trying to ${action}; try again in about ${wait} s.`,
      message,
      wait,
    );
  }
  switch (response.status) {
    case 401:
      return new ProviderError('unauthorized', `GitHub no longer accepts the linked account's token; reconnect GitHub.`, message);
    case 403:
      return new ProviderError('forbidden', `GitHub refused to ${action}: ${message}.`, message);
    case 404:
      return new ProviderError(
        'not_found',
        `GitHub could not find that (or the linked account cannot see it): could not ${action}.`,
        message,
      );
    case 410:
    case 422:
      return new ProviderError('invalid_request', `GitHub could not ${action}: ${message}.`, JSON.stringify(body.errors ?? null));
    default:
      return new ProviderError(
        'unavailable',
        `GitHub had a problem (HTTP ${response.status}) while trying to ${action}; try again in a moment.`,
        message,
      );
  }
}
