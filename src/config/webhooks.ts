import { z } from 'zod';
import { ConfigError } from './errors.js';
import { forEachEntry, readConfigSections } from './file.js';
import { httpsOrLoopbackUrl } from './url-rule.js';
import { envPrefix } from './providers.js';

/** Every event a webhook endpoint can receive (the Standard Webhooks `type` of its body). */
export const WEBHOOK_EVENT_TYPES = [
  'connection.created',
  'connection.refreshed',
  'connection.reauth_required',
  'connection.revoked',
  'connection.deleted',
  'exchange.refused',
  'approval.requested',
  'approval.decided',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** One receiver of the broker's signed events (PROVIDERS_FILE `webhooks:`). */
export interface ConfiguredWebhook {
  id: string;
  url: URL;
  /** The events it receives: every one unless the file names some. */
  events: WebhookEventType[];
  /** The decoded key of its `whsec_` secret, from `WEBHOOK_<ID>_SECRET`. */
  secret: Buffer;
}

/** Where an endpoint's signing secret comes from, as docs/configuration.md's table names it. */
export const WEBHOOK_SECRET_VARIABLE = 'WEBHOOK_<ID>_SECRET';

/** `audit-sink` → `WEBHOOK_AUDIT_SINK_SECRET`. */
export function webhookSecretVariable(id: string): string {
  return WEBHOOK_SECRET_VARIABLE.replace('<ID>', envPrefix(id));
}

const webhookSchema = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9-]{0,62}$/, 'lower-case letters, digits and -, starting with a letter'),
    url: httpsOrLoopbackUrl.refine((v) => {
      const u = new URL(v);
      return !u.username && !u.password && !u.hash;
    }, 'must not carry credentials or a fragment (the secret signs every request instead)'),
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1, 'must name at least one event (leave it out for every event)').optional(),
  })
  .strict();

/**
 * Standard Webhooks secrets are `whsec_` and the base64 of 24 to 64 random bytes; the key is the
 * decoded bytes. The value is never echoed.
 */
function decodeSecret(variable: string, value: string | undefined, id: string): Buffer {
  if (!value) throw new ConfigError(`${variable} is required for webhook "${id}" (whsec_ and the base64 of 24 to 64 random bytes)`);
  const encoded = value.startsWith('whsec_') ? value.slice('whsec_'.length) : '';
  const key = /^[A-Za-z0-9+/]+={0,2}$/.test(encoded) && encoded.length % 4 === 0 ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
  if (key.length < 24 || key.length > 64)
    throw new ConfigError(`${variable} must be whsec_ followed by the base64 of 24 to 64 random bytes`);
  return key;
}

/**
 * The endpoints declared in PROVIDERS_FILE's `webhooks:` list (none without the file or the list),
 * each problem one line naming the endpoint and the field; secrets only from the environment.
 */
export function loadWebhooks(env: NodeJS.ProcessEnv): ConfiguredWebhook[] {
  if (!env.PROVIDERS_FILE) return [];
  const webhooks: ConfiguredWebhook[] = [];
  forEachEntry('webhooks', readConfigSections(env.PROVIDERS_FILE).webhooks, webhookSchema, (w) => {
    const variable = webhookSecretVariable(w.id);
    webhooks.push({
      id: w.id,
      url: new URL(w.url),
      events: w.events ? [...new Set(w.events)] : [...WEBHOOK_EVENT_TYPES],
      secret: decodeSecret(variable, env[variable], w.id),
    });
  });
  return webhooks;
}
