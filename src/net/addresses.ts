import { BlockList, isIP } from 'node:net';

/** What an IP address is, as far as where the broker may connect is concerned. */
export type AddressClass = 'loopback' | 'private' | 'link-local' | 'cgnat' | 'ula' | 'multicast' | 'unspecified' | 'reserved' | 'public';

const RANGES: ReadonlyArray<readonly [AddressClass, string, number, 'ipv4' | 'ipv6']> = [
  ['unspecified', '0.0.0.0', 8, 'ipv4'],
  ['loopback', '127.0.0.0', 8, 'ipv4'],
  ['private', '10.0.0.0', 8, 'ipv4'],
  ['private', '172.16.0.0', 12, 'ipv4'],
  ['private', '192.168.0.0', 16, 'ipv4'],
  ['link-local', '169.254.0.0', 16, 'ipv4'],
  ['cgnat', '100.64.0.0', 10, 'ipv4'],
  ['multicast', '224.0.0.0', 4, 'ipv4'],
  // IETF protocol assignments, the documentation and benchmarking nets, 240/4 and broadcast: never a public service.
  ['reserved', '192.0.0.0', 24, 'ipv4'],
  ['reserved', '192.0.2.0', 24, 'ipv4'],
  ['reserved', '198.18.0.0', 15, 'ipv4'],
  ['reserved', '198.51.100.0', 24, 'ipv4'],
  ['reserved', '203.0.113.0', 24, 'ipv4'],
  ['reserved', '240.0.0.0', 4, 'ipv4'],
  ['unspecified', '::', 128, 'ipv6'],
  ['loopback', '::1', 128, 'ipv6'],
  ['link-local', 'fe80::', 10, 'ipv6'],
  ['ula', 'fc00::', 7, 'ipv6'],
  ['multicast', 'ff00::', 8, 'ipv6'],
  ['reserved', '2001:db8::', 32, 'ipv6'],
  // Site-local (deprecated, still routed internally by some networks).
  ['private', 'fec0::', 10, 'ipv6'],
];

const LISTS = new Map<AddressClass, BlockList>();
for (const [kind, network, prefix, family] of RANGES) {
  let list = LISTS.get(kind);
  if (!list) LISTS.set(kind, (list = new BlockList()));
  list.addSubnet(network, prefix, family);
}

/**
 * The IPv4 address an IPv6 one stands for, when it is one of the forms that reach an IPv4 host
 * (`::ffff:a.b.c.d` mapped, `::a.b.c.d` compatible, 64:ff9b::/96 NAT64), else undefined.
 */
function embeddedIPv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower)?.[1];
  if (dotted) return dotted;
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return undefined;
  const hi = parseInt(hex[1]!, 16);
  const lo = parseInt(hex[2]!, 16);
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/** Strips the brackets of a URL's IPv6 host and an IPv6 zone (`fe80::1%eth0`). */
export function bareAddress(host: string): string {
  const unbracketed = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const zone = unbracketed.indexOf('%');
  return zone >= 0 && isIP(unbracketed.slice(0, zone)) === 6 ? unbracketed.slice(0, zone) : unbracketed;
}

/** The class of an IP address (v4, v6, or v4 inside v6); `undefined` for something that is no IP address. */
export function classifyAddress(address: string): AddressClass | undefined {
  const bare = bareAddress(address);
  const family = isIP(bare);
  if (family === 0) return undefined;
  const v4 = family === 6 ? embeddedIPv4(bare) : bare;
  const [ip, type] = v4 && isIP(v4) === 4 ? [v4, 'ipv4' as const] : [bare, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
  for (const [kind, list] of LISTS) if (list.check(ip, type)) return kind;
  return 'public';
}
