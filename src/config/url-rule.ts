import { z } from 'zod';
import { isLoopbackHostname } from '../net/loopback.js';

/**
 * The one rule for a URL the broker itself calls from the configuration: https, or http only to a
 * loopback host (development, tests). Used by `services:` (jwksUri) and `upstreams:` (url).
 */
export const httpsOrLoopbackUrl = z
  .string()
  .url()
  .refine((v) => {
    const u = new URL(v);
    return u.protocol === 'https:' || (u.protocol === 'http:' && isLoopbackHostname(u.hostname));
  }, 'must use https:// (http:// is accepted only for loopback hosts)');
