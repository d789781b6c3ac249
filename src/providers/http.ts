import { readBounded } from '../http/bounded-read.js';
import { tracedFetch } from '../observability/tracing.js';
import { ProviderError } from './provider.js';

/**
 * A fetch that gives up after `timeoutMs` and turns network failures into `unavailable`; while
 * tracing is on, in a span `provider <operation>` (our own words, e.g. `github user`). The trace is
 * not carried on: a provider is a third party, and `traceparent` would tell it our trace ids.
 */
export async function fetchWithTimeout(
  url: URL | string,
  init: RequestInit,
  timeoutMs: number,
  label: string,
  operation: string = label,
): Promise<Response> {
  try {
    return await tracedFetch(`provider ${operation}`, { 'broker.provider': label }, url, {
      ...init,
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    throw new ProviderError(
      'unavailable',
      `${label} did not answer${timedOut ? ' in time' : ''}. Please try again in a moment.`,
      err instanceof Error ? err.message : String(err),
    );
  }
}

/** The most a provider's answer may be: token responses and user records are a few KB. */
export const MAX_PROVIDER_ANSWER_BYTES = 1024 * 1024;

/** Reads a JSON body, treating anything unparsable (or over {@link MAX_PROVIDER_ANSWER_BYTES}) as the provider being unavailable. */
export async function readJson(response: Response, label: string): Promise<Record<string, unknown>> {
  const body = await readBounded(response, MAX_PROVIDER_ANSWER_BYTES);
  const text = body === undefined ? '' : body.toString('utf8');
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new ProviderError(
    'unavailable',
    `${label} sent an unreadable answer. Please try again in a moment.`,
    body === undefined
      ? `HTTP ${response.status}, over ${MAX_PROVIDER_ANSWER_BYTES} bytes`
      : `HTTP ${response.status}, ${text.length} bytes`,
  );
}
