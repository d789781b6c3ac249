import type { Principal } from '../auth/principal.js';
import { mac, verifyMac } from '../crypto/index.js';

/**
 * The `connect_request` a service repeats the exchange with: the pending connection's id with a MAC
 * over it, the service and the principal. Another service or user presenting it fails the MAC.
 */
export class ConnectRequests {
  constructor(private readonly key: Buffer) {}

  issue(pendingId: string, serviceId: string, principal: Principal): string {
    return `${pendingId}.${mac(this.key, serviceId, principal.issuer, principal.subject, pendingId)}`;
  }

  /** The pending id, when `value` was issued to exactly this service and principal. */
  open(value: string, serviceId: string, principal: Principal): string | undefined {
    const dot = value.indexOf('.');
    if (dot <= 0 || value.length > 200) return undefined;
    const id = value.slice(0, dot);
    return verifyMac(this.key, value.slice(dot + 1), serviceId, principal.issuer, principal.subject, id) ? id : undefined;
  }
}
