const LOOPBACK_HOSTNAMES = new Set(['localhost', '[::1]', '::1']);

/** True for the names and addresses that never leave the machine: `localhost`, `127.x.y.z`, `::1`. */
export function isLoopbackHostname(hostname: string): boolean {
  return LOOPBACK_HOSTNAMES.has(hostname) || /^127(\.\d{1,3}){3}$/.test(hostname);
}
