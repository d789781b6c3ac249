// Test helper: the operator's identity provider (a real oidc-provider, see
// src/dev/identity-provider.ts) served over plain HTTP on 127.0.0.1.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createIdentityProvider } from '../../src/dev/identity-provider.js';
import type { IdentityProvider, IdpClient } from '../../src/dev/identity-provider.js';

export type { IdentityProvider, IdpClient };

export interface StartedIdp {
  issuer: string;
  port: number;
  idp: IdentityProvider;
  mintAccessToken: IdentityProvider['mintAccessToken'];
  /** Requests the provider has received so far (any path). */
  readonly requests: number;
  close(): Promise<void>;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export { freePort } from '../../src/dev/free-port.js';

/**
 * Start the identity provider with issuer `http://127.0.0.1:${port}`. Without `port` the server
 * binds port 0 first and the provider is created once the port is known (no race).
 */
export async function startIdp(opts: {
  clients: IdpClient[];
  resource: string;
  port?: number;
  endSession?: boolean;
  accountClaims?: (accountId: string) => Record<string, unknown>;
  profileClaims?: string[];
  pairwiseSubjects?: boolean;
}): Promise<StartedIdp> {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  let requests = 0;
  const server = createServer((req, res) => {
    requests += 1;
    if (handler) {
      handler(req, res);
      return;
    }
    res.statusCode = 503;
    res.end('identity provider starting');
  });
  const port = await listen(server, opts.port ?? 0);
  const issuer = `http://127.0.0.1:${port}`;
  let idp: IdentityProvider;
  try {
    idp = await createIdentityProvider({
      issuer,
      clients: opts.clients,
      resource: opts.resource,
      ...(opts.endSession === false ? { endSession: false } : {}),
      ...(opts.accountClaims ? { accountClaims: opts.accountClaims } : {}),
      ...(opts.profileClaims ? { profileClaims: opts.profileClaims } : {}),
      ...(opts.pairwiseSubjects ? { pairwiseSubjects: true } : {}),
    });
  } catch (err) {
    server.close();
    throw err;
  }
  handler = idp.callback();

  return {
    issuer,
    port,
    idp,
    mintAccessToken: (claims) => idp.mintAccessToken(claims),
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
