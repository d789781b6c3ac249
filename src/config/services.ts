import { z } from 'zod';
import { isAudienceIdentifier } from './audience.js';
import { ConfigError } from './errors.js';
import { forEachEntry, readConfigSections } from './file.js';
import { envPrefix } from './providers.js';
import { httpsOrLoopbackUrl } from './url-rule.js';

export type ServiceAuthMethod = 'client_secret_basic' | 'private_key_jwt';

/** One of the operator's own MCP servers, allowed to exchange its users' tokens at /oauth/token. */
export interface ConfiguredService {
  /** Its `client_id` at the token endpoint. */
  id: string;
  /** Shown on the consent page and /connections; the id when unset. */
  displayName: string;
  /** The resources its own users' tokens are issued for: a subject token must carry one of them. */
  audiences: string[];
  auth: ServiceAuthMethod;
  /** `SERVICE_<ID>_SECRET`, for `client_secret_basic`. */
  secret?: string;
  /** Where its public keys are, for `private_key_jwt`. */
  jwksUri?: URL;
  /** Provider id → the most scopes it may obtain there. */
  allow: Record<string, string[]>;
}

const httpsUrl = httpsOrLoopbackUrl;

const serviceSchema = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9-]{1,62}$/, 'lower-case letters, digits and -, starting with a letter'),
    displayName: z.string().min(1).max(60).optional(),
    // A URL, or an identifier an IdP writes in aud instead (an Entra ID application id), as MCP_AUDIENCE takes.
    audiences: z
      .array(
        z.string().refine((v) => URL.canParse(v) || isAudienceIdentifier(v), 'must be URLs or identifiers such as a GUID or an api:// URI'),
      )
      .min(1, 'must name at least one audience'),
    auth: z.enum(['client_secret_basic', 'private_key_jwt']),
    jwksUri: httpsUrl.optional(),
    allow: z.record(z.string(), z.array(z.string().min(1))),
  })
  .strict()
  .refine((s) => s.auth !== 'private_key_jwt' || s.jwksUri !== undefined, { message: 'is required for private_key_jwt', path: ['jwksUri'] })
  .refine((s) => s.auth !== 'client_secret_basic' || s.jwksUri === undefined, {
    message: 'applies only to private_key_jwt',
    path: ['jwksUri'],
  });

/** Where a service's client secret comes from, as docs/configuration.md's table names it. */
export const SERVICE_SECRET_VARIABLE = 'SERVICE_<ID>_SECRET';

/** `issue-bot` → `SERVICE_ISSUE_BOT_SECRET`. */
export function serviceSecretVariable(id: string): string {
  return SERVICE_SECRET_VARIABLE.replace('<ID>', envPrefix(id));
}

/**
 * The services declared in PROVIDERS_FILE's `services:` list (none without the file or the list).
 * Every problem is one line naming the service and the field; secrets come only from the
 * environment, and a provider a service may use must be one this instance connects to.
 * @param brokerAudience the broker's own `/mcp` resource, which no service may claim.
 */
export function loadServices(
  env: NodeJS.ProcessEnv,
  providers: ReadonlyMap<string, { scopes: readonly string[] | undefined }>,
  brokerAudience: string | undefined,
): ConfiguredService[] {
  if (!env.PROVIDERS_FILE) return [];
  const services: ConfiguredService[] = [];
  forEachEntry('services', readConfigSections(env.PROVIDERS_FILE).services, serviceSchema, (s, named) => {
    if (brokerAudience !== undefined && s.audiences.includes(brokerAudience))
      throw new ConfigError(`PROVIDERS_FILE ${named}.audiences: ${brokerAudience} is the broker's own audience, not a service's`);
    for (const [provider, scopes] of Object.entries(s.allow)) {
      const known = providers.get(provider);
      if (!known) throw new ConfigError(`PROVIDERS_FILE ${named}.allow: "${provider}" is not a provider this broker connects to`);
      const unknown = known.scopes ? scopes.find((x) => !known.scopes!.includes(x)) : undefined;
      if (unknown) throw new ConfigError(`PROVIDERS_FILE ${named}.allow.${provider}: "${unknown}" is not a scope of ${provider}`);
    }
    let secret: string | undefined;
    if (s.auth === 'client_secret_basic') {
      secret = env[serviceSecretVariable(s.id)];
      if (!secret) throw new ConfigError(`${serviceSecretVariable(s.id)} is required for service "${s.id}" (auth client_secret_basic)`);
      if (secret.length < 16) throw new ConfigError(`${serviceSecretVariable(s.id)} must be at least 16 characters`);
    }
    services.push({
      id: s.id,
      displayName: s.displayName ?? s.id,
      audiences: s.audiences,
      auth: s.auth,
      ...(secret !== undefined ? { secret } : {}),
      ...(s.jwksUri ? { jwksUri: new URL(s.jwksUri) } : {}),
      allow: s.allow,
    });
  });
  return services;
}
