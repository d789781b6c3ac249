// What every bench server does around its handler: listen on 127.0.0.1 at a port the system picks,
// say so on stderr (`bench/lib/proc.ts` waits for that line), keep connections open as long as
// the load generator does, and stop on SIGTERM/SIGINT with every connection closed.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet } from 'jose';

export function serveOnLoopback(server: Server): void {
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stderr.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      server.close(() => process.exit(0));
      server.closeAllConnections();
    });
  }
}

/** The JWT baselines' check: the IdP's JWKS (discovered once), its issuer and the service's audience, from the environment. */
export async function subjectTokenCheck(): Promise<{ issuer: string; audience: string; jwks: ReturnType<typeof createRemoteJWKSet> }> {
  const issuer = process.env.OIDC_ISSUER!;
  const discovery = (await (await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`)).json()) as { jwks_uri: string };
  return { issuer, audience: process.env.AUDIENCE!, jwks: createRemoteJWKSet(new URL(discovery.jwks_uri)) };
}

/** What both JWT baselines answer to a verified token: constant, the shape of an exchange's answer. */
export const EXCHANGE_ANSWER = JSON.stringify({
  access_token: 'constant',
  issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
  token_type: 'Bearer',
});
