// Test helper: TLS material made at test time with the openssl command line (no library needed).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/** A self-signed certificate for 127.0.0.1, made with the openssl command line (no library needed). */
export function selfSignedCertificate(): { key: Buffer; cert: Buffer } | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'idp-cimd-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
