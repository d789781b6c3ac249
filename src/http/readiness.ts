import type { Request, Response } from 'express';
import type { Store } from '../store/index.js';

const READY_TIMEOUT_MS = 2_000;

/**
 * `/readyz`: ready while the store answers and takes writes. A load balancer stops sending traffic to an instance
 * whose database is away, and resumes by itself once it is back (the pool reconnects on demand).
 */
export function readiness(store: Store) {
  return async (_req: Request, res: Response): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS);
    });
    res.set('Cache-Control', 'no-store');
    try {
      await Promise.race([store.ping(), timeout]);
      res.json({ status: 'ready', store: store.kind });
    } catch {
      res.status(503).json({ status: 'not_ready', reason: 'database_unreachable', store: store.kind });
    } finally {
      clearTimeout(timer);
    }
  };
}
