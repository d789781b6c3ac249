import { Router } from 'express';
import { clientDocumentPath, type McpAuthProvider } from './provider.js';

/**
 * Serves the broker's client ID metadata document for each `auth: mcp` upstream, at
 * `/oauth/clients/<upstream id>.json` (its `client_id` is that URL): what an authorization server
 * that supports client ID metadata documents fetches instead of a registration. Public data only.
 */
export function clientDocumentRoutes(providers: Iterable<McpAuthProvider>): Router {
  const router = Router({ caseSensitive: true, strict: true });
  for (const provider of providers) {
    const document = provider.clientMetadataDocument();
    if (!document) continue;
    router.get(clientDocumentPath(provider.id), (_req, res) => {
      res.set('Cache-Control', 'public, max-age=300').set('Access-Control-Allow-Origin', '*').json(document);
    });
  }
  return router;
}
