import { TOLD_PREFIX } from '../store/index.js';

/**
 * Why a connect link settled `failed`, as kept in its `outcome_reason`: the provider's own error
 * code from the callback (RFC 6749 §4.1.2.1), or the broker's word for a code exchange it could
 * not complete. Only a bounded code is kept, never the provider's free text: the reason is repeated
 * to the assistant in the broker's voice. Only a provider's error is told to the held call; other
 * failures (transient, most often) are retried with a fresh link.
 */
const PROVIDER_ERROR = 'provider_error:';
export const CODE_EXCHANGE_FAILED = 'code_exchange_failed';

/** How long after a link failed a repeat that carries no link of its own (2025-11-25) is told so instead of given a new link. */
export const FAILURE_TOLD_WITHIN_MS = 120_000;

/** The reason to keep for a callback's `error`: the code itself when it looks like one, else `unrecognised`. */
export function providerErrorReason(error: string): string {
  return PROVIDER_ERROR + (/^[a-z][a-z0-9_]{0,39}$/.test(error) ? error : 'unrecognised');
}

export type FailureReason = { kind: 'provider_error'; code: string } | { kind: 'code_exchange_failed' } | { kind: 'unknown' };

/** Reads a failed link's outcome reason (told or not). */
export function failureReason(outcomeReason: string | null): FailureReason {
  const reason = outcomeReason?.startsWith(TOLD_PREFIX) ? outcomeReason.slice(TOLD_PREFIX.length) : outcomeReason;
  if (reason?.startsWith(PROVIDER_ERROR)) return { kind: 'provider_error', code: reason.slice(PROVIDER_ERROR.length) };
  if (reason === CODE_EXCHANGE_FAILED) return { kind: 'code_exchange_failed' };
  return { kind: 'unknown' };
}
