import { BlockList, isIP } from 'node:net';
import { isLoopbackHostname } from './loopback.js';
import { bareAddress, classifyAddress, type AddressClass } from './addresses.js';

/** What an operator lets the broker reach beyond the public internet (EGRESS_ALLOW): host names and networks. */
export interface EgressAllowList {
  /** Lower-case host names, matched exactly (no wildcards). */
  hosts: readonly string[];
  /** Networks, `address/prefix`, v4 or v6. */
  cidrs: ReadonlyArray<{ network: string; prefix: number; family: 'ipv4' | 'ipv6' }>;
}

export const NOTHING_ALLOWED: EgressAllowList = { hosts: [], cidrs: [] };

/** Where a request is going: the URL's host name (as written) and the port it connects to. */
export interface EgressTarget {
  protocol: string;
  hostname: string;
  port: string;
}

/** Why the rule refuses a destination: a short code for logs, never text from a document. */
export type EgressRefusal = 'plain-http' | `${Exclude<AddressClass, 'public'>}-address` | 'not-an-address';

/**
 * The one rule for every address the broker did not take from its own configuration (what an
 * upstream's documents, headers or registrations name, and webhook receivers): https only, and
 * the connected address must be public, unless the operator allows the host or its network
 * (EGRESS_ALLOW); development mode allows loopback too. Plain http is accepted only to a host the
 * operator allowed (an internal deployment's own services, loopback in development).
 */
export class EgressRule {
  readonly #hosts: ReadonlySet<string>;
  readonly #networks = new BlockList();
  readonly #loopback: boolean;
  readonly #origins: ReadonlySet<string>;

  constructor(allow: EgressAllowList = NOTHING_ALLOWED, options: { loopback?: boolean; origins?: readonly string[] } = {}) {
    this.#hosts = new Set(allow.hosts.map((h) => h.toLowerCase()));
    for (const c of allow.cidrs) this.#networks.addSubnet(c.network, c.prefix, c.family);
    this.#loopback = options.loopback ?? false;
    this.#origins = new Set(options.origins ?? []);
    this.allow = allow;
  }

  readonly allow: EgressAllowList;

  /** The rule a configuration describes (`Config.egress`). */
  static from(settings: { allow: EgressAllowList; loopback: boolean }): EgressRule {
    return new EgressRule(settings.allow, { loopback: settings.loopback });
  }

  /** This rule, with one more origin (`scheme://host:port`) that is reachable whatever its address: a configured upstream's own. */
  withOrigin(origin: string): EgressRule {
    return new EgressRule(this.allow, { loopback: this.#loopback, origins: [...this.#origins, new URL(origin).origin] });
  }

  /** Loopback is allowed (development mode). */
  get allowsLoopback(): boolean {
    return this.#loopback;
  }

  #originOf(target: EgressTarget): string | undefined {
    return URL.parse(`${target.protocol}//${target.hostname}${target.port ? `:${target.port}` : ''}`)?.origin;
  }

  #namedAllowed(target: EgressTarget): boolean {
    const origin = this.#originOf(target);
    return (origin !== undefined && this.#origins.has(origin)) || this.#hosts.has(bareAddress(target.hostname).toLowerCase());
  }

  /** Why `address` (an IP) is not in the networks the operator allows, or undefined when it is reachable. */
  #addressRefusal(address: string): EgressRefusal | undefined {
    const bare = bareAddress(address);
    const kind = classifyAddress(bare);
    if (!kind) return 'not-an-address';
    if (kind === 'public') return undefined;
    if (kind === 'loopback' && this.#loopback) return undefined;
    if (this.#networks.check(bare, isIP(bare) === 6 ? 'ipv6' : 'ipv4')) return undefined;
    return `${kind}-address`;
  }

  /**
   * Checked before anything is sent: the scheme, and the address when the host is an IP literal.
   * A named host is checked again on every address it resolves to ({@link refuseConnection}).
   */
  refuseUrl(url: URL): EgressRefusal | undefined {
    const target = { protocol: url.protocol, hostname: url.hostname, port: url.port };
    const literal = isIP(bareAddress(url.hostname)) !== 0;
    const plainHttpAllowed =
      this.#namedAllowed(target) || (literal ? this.#plainHttpAddress(url.hostname) : this.#loopback && isLoopbackHostname(url.hostname));
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && plainHttpAllowed)) return 'plain-http';
    if (literal && !this.#namedAllowed(target)) return this.#addressRefusal(url.hostname);
    return undefined;
  }

  /** A literal address plain http may go to: one the operator allowed by network, or loopback in development (never a public one). */
  #plainHttpAddress(address: string): boolean {
    const bare = bareAddress(address);
    const kind = classifyAddress(bare);
    if (kind === 'loopback' && this.#loopback) return true;
    return kind !== undefined && this.#networks.check(bare, isIP(bare) === 6 ? 'ipv6' : 'ipv4');
  }

  /** Checked on the address the socket connects (or is about to connect) to, so a name resolving somewhere else on the next lookup gains nothing. */
  refuseConnection(target: EgressTarget, address: string): EgressRefusal | undefined {
    if (this.#namedAllowed(target)) return undefined;
    return this.#addressRefusal(address);
  }
}
