import { isIP } from 'node:net';
import { bareAddress, classifyAddress } from '../net/addresses.js';
import type { EgressAllowList, EgressRule } from '../net/egress-rule.js';
import { ConfigError } from './errors.js';
import type { ConfiguredWebhook } from './webhooks.js';

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** One EGRESS_ALLOW entry: a network (`address/prefix`), a single address, or a host name; undefined when it is none. */
function entry(raw: string): { host: string } | { network: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const [address = '', prefixText, ...rest] = raw.split('/');
  const bare = bareAddress(address);
  const family = isIP(bare);
  if (rest.length > 0) return undefined;
  if (family === 0) return prefixText === undefined && HOSTNAME.test(raw.toLowerCase()) ? { host: raw.toLowerCase() } : undefined;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return undefined;
  return { network: bare, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * EGRESS_ALLOW: comma-separated host names (exact, no wildcards), addresses and networks
 * (`10.20.0.0/16`, `fd12::/48`) the broker may reach although they are not public. Every entry
 * that is none of these is named in the one error.
 */
export function parseEgressAllow(value: string | undefined): EgressAllowList {
  const hosts: string[] = [];
  const cidrs: Array<{ network: string; prefix: number; family: 'ipv4' | 'ipv6' }> = [];
  const bad: string[] = [];
  for (const raw of (value ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const parsed = entry(raw);
    if (!parsed) bad.push(raw);
    else if ('host' in parsed) hosts.push(parsed.host);
    else cidrs.push(parsed);
  }
  if (bad.length > 0)
    throw new ConfigError(
      `EGRESS_ALLOW must be a comma-separated list of host names, addresses and networks such as 10.20.0.0/16 (not ${bad.map((b) => `"${b}"`).join(', ')})`,
    );
  return { hosts, cidrs };
}

/**
 * A webhook the egress rule refuses whatever its name resolves to (plain http to a host not
 * allowed, an address in a refused range) could never be delivered to: a start-up error naming it,
 * not an outbox of attempts that all fail.
 */
export function checkWebhookAddresses(webhooks: readonly ConfiguredWebhook[], rule: EgressRule): void {
  for (const w of webhooks) {
    const refused = rule.refuseUrl(w.url);
    if (!refused) continue;
    const what =
      refused === 'plain-http'
        ? 'uses plain http to a host the broker does not send to'
        : `is an address the broker does not send to (${classifyAddress(w.url.hostname) ?? 'not public'})`;
    throw new ConfigError(`PROVIDERS_FILE webhooks.${w.id}.url: ${what}; list it in EGRESS_ALLOW for an internal receiver`);
  }
}
