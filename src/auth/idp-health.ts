import type { Logger } from '../log.js';
import type { AccessTokenVerifier } from './bearer.js';
import type { OidcClient } from './oidc-client.js';
import { backgroundFailure } from '../observability/process-guards.js';

/** `checking` until the first check has finished. */
export type IdpState = 'checking' | 'ok' | 'unreachable';

export interface IdpHealthOptions {
  /** First retry after a failed check; doubles on each further failure up to `retryMaxMs`. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** How often a reachable IdP is checked again. */
  refreshMs?: number;
}

/**
 * Whether the operator's identity provider answers: its discovery document and its JWKS, checked at
 * start-up and then in the background (with backoff while it fails). `/readyz` reads `state` from
 * here, so a probe never calls the IdP; the log says at error level what failed, naming OIDC_ISSUER.
 */
export class IdentityProviderHealth {
  #state: IdpState = 'checking';
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #first: Promise<void> | undefined;
  #closed = false;
  readonly #retryMinMs: number;
  readonly #retryMaxMs: number;
  readonly #refreshMs: number;

  constructor(
    private readonly idp: OidcClient,
    private readonly verifier: AccessTokenVerifier,
    private readonly issuer: string,
    private readonly log: Logger,
    { retryMinMs = 1000, retryMaxMs = 60_000, refreshMs = 60_000 }: IdpHealthOptions = {},
  ) {
    this.#retryMinMs = retryMinMs;
    this.#retryMaxMs = retryMaxMs;
    this.#refreshMs = refreshMs;
  }

  get state(): IdpState {
    return this.#state;
  }

  /** Runs the first check (resolving when it has finished, whatever its outcome) and keeps checking. */
  start(): Promise<void> {
    this.#first ??= this.#check();
    return this.#first;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  async #check(): Promise<void> {
    let step: 'discovery' | 'jwks' = 'discovery';
    try {
      await this.idp.configuration();
      step = 'jwks';
      await this.verifier.reloadKeys();
      if (this.#failures > 0) this.log.info('identity_provider_reachable', { issuer: this.issuer, afterFailures: this.#failures });
      this.#state = 'ok';
      this.#failures = 0;
      this.#schedule(this.#refreshMs);
    } catch (err) {
      this.#failures += 1;
      const retryInMs = Math.min(this.#retryMaxMs, this.#retryMinMs * 2 ** (this.#failures - 1));
      // Loud once (at start-up, or when a working IdP goes away), then a warning per retry.
      const level = this.#failures === 1 ? 'error' : 'warn';
      this.log[level]('identity_provider_unreachable', {
        variable: 'OIDC_ISSUER',
        issuer: this.issuer,
        failed: step === 'discovery' ? 'discovery (/.well-known/openid-configuration)' : 'jwks (the jwks_uri of the discovery document)',
        message: describe(err),
        retryInSeconds: retryInMs / 1000,
        consequence: 'sign-in and MCP access tokens cannot be checked; /readyz answers 503 until this succeeds',
      });
      this.#state = 'unreachable';
      this.#schedule(retryInMs);
    }
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => this.#check().catch(backgroundFailure('idp_health_check')), ms);
    this.#timer.unref();
  }
}

/** The error and its causes' codes (`fetch failed (ECONNREFUSED)`): what an operator can act on. */
function describe(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    parts.push(depth === 0 ? e.message : typeof code === 'string' ? code : e.message);
  }
  return parts.length ? parts.filter((p, i) => p && parts.indexOf(p) === i).join(': ') : String(err);
}
