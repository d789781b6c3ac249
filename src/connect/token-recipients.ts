import type { Config } from '../config/env.js';
import type { TokenRecipients } from './routes.js';

/**
 * Who receives each provider's tokens besides this server, as the configuration says: the upstream
 * MCP servers that call with the person's connection (`auth: provider`), and the services allowed to
 * exchange for it (`services: … allow:`). The consent page names them, so "your assistant never sees
 * it" is not read as "nobody else does".
 */
export function tokenRecipientsOf(config: Pick<Config, 'upstreams' | 'services'>): ReadonlyMap<string, TokenRecipients> {
  const byProvider = new Map<string, TokenRecipients>();
  const entry = (provider: string) => {
    let recipients = byProvider.get(provider);
    if (!recipients) byProvider.set(provider, (recipients = { upstreams: [], services: [] }));
    return recipients;
  };
  for (const upstream of config.upstreams)
    if (upstream.auth.kind === 'provider') entry(upstream.auth.provider).upstreams.push(upstream.displayName);
  for (const service of config.services)
    for (const provider of Object.keys(service.allow)) entry(provider).services.push(service.displayName);
  return byProvider;
}
