import type { Request, Response } from 'express';

/** What `/readyz` asks of the store (the broker's `Store` is one). */
export interface ReadinessStore {
  readonly kind: string;
  ping(): Promise<void>;
}

const READY_TIMEOUT_MS = 2_000;

/**
 * `/readyz`: ready while the store answers and takes writes and the identity provider answered its
 * last background check. A load balancer stops sending traffic to an instance whose database is away,
 * and resumes by itself once it is back (the pool reconnects on demand). The IdP's state is read from
 * memory (`IdentityProviderHealth`): a probe never makes a call to the IdP.
 */
export function readiness(store: ReadinessStore, identityProvider: { readonly state: string }) {
  return async (_req: Request, res: Response): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS);
    });
    res.set('Cache-Control', 'no-store');
    let database: 'ok' | 'unreachable' = 'ok';
    try {
      await Promise.race([store.ping(), timeout]);
    } catch {
      database = 'unreachable';
    } finally {
      clearTimeout(timer);
    }
    const checks = { database, identity_provider: identityProvider.state };
    if (database === 'ok' && checks.identity_provider === 'ok') {
      res.json({ status: 'ready', store: store.kind, checks });
      return;
    }
    const reason = database !== 'ok' ? 'database_unreachable' : `identity_provider_${checks.identity_provider}`;
    res.status(503).json({ status: 'not_ready', reason, store: store.kind, checks });
  };
}
