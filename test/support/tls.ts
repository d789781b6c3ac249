// Test helper: TLS material for loopback https servers, from test/fixtures/tls/ (a self-signed
// certificate for 127.0.0.1, valid until 2126): read, not made, so no suite runs openssl.
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';

const FIXTURES = new URL('../fixtures/tls/', import.meta.url);

/** A self-signed certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1) and its key. */
export function selfSignedCertificate(): { key: Buffer; cert: Buffer } {
  return { key: readFileSync(new URL('loopback-key.pem', FIXTURES)), cert: readFileSync(new URL('loopback-cert.pem', FIXTURES)) };
}

/**
 * In the calling suite, lets this process's https requests accept the fixture's self-signed
 * certificate (code under test that makes its own requests takes no CA), restoring the setting after.
 */
export function acceptSelfSignedCertificates(): void {
  let previous: string | undefined;
  before(() => {
    previous = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  });
  after(() => {
    if (previous === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = previous;
  });
}

/**
 * A client ID metadata document (a public client named `clientName`, redirecting to `redirectUri`)
 * served over https on a loopback port, at the URL that is its own `client_id`.
 */
export async function serveClientMetadata(
  certificate: { key: Buffer; cert: Buffer },
  clientName: string,
  redirectUri: string,
): Promise<{ clientId: string; close(): Promise<void> }> {
  let clientId = '';
  const documents = createHttpsServer(certificate, (_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        client_id: clientId,
        client_name: clientName,
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
      }),
    );
  });
  await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
  clientId = `https://127.0.0.1:${(documents.address() as AddressInfo).port}/client.json`;
  return {
    clientId,
    close: async () => {
      documents.closeAllConnections();
      await new Promise<void>((resolve) => documents.close(() => resolve()));
    },
  };
}
