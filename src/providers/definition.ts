import { z } from 'zod';

const url = z.string().url();
const fieldPath = z.string().regex(/^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$/, 'a dotted field path such as data.viewer.id');

/** Where the upstream account's stable id and login come from after the code exchange. */
const identitySchema = z.discriminatedUnion('source', [
  z.object({ source: z.literal('id_token'), idField: fieldPath.default('sub'), loginField: fieldPath.default('preferred_username') }),
  z.object({ source: z.literal('userinfo'), idField: fieldPath.default('sub'), loginField: fieldPath.default('preferred_username') }),
  z.object({
    source: z.literal('api'),
    url,
    method: z.enum(['GET', 'POST']).default('GET'),
    /** JSON body for POST (e.g. a GraphQL query). */
    body: z.unknown().optional(),
    headers: z.record(z.string(), z.string()).default({}),
    idField: fieldPath,
    loginField: fieldPath,
  }),
  z.object({ source: z.literal('token_response'), idField: fieldPath, loginField: fieldPath }),
]);

const revocationSchema = z.discriminatedUnion('kind', [
  /** RFC 7009; for `oidc` providers the endpoint may come from discovery. */
  z.object({ kind: z.literal('rfc7009'), endpoint: url.optional() }),
  /** GitHub: `DELETE /applications/{client_id}/grant` with Basic client credentials. */
  z.object({ kind: z.literal('github-grant'), apiUrl: url }),
  z.object({ kind: z.literal('none') }),
]);

/** A URL a kind always has: refused, when missing, with the words of `message` rather than zod's "expected string". */
const requiredUrl = (message: string) => z.string({ error: (issue) => (issue.input === undefined ? message : undefined) }).url();

// Fields every kind shares, in two parts so a definition's issues are listed in the order it reads:
// id, name, kind and its endpoints, then the rest.
const names = {
  id: z.string().regex(/^[a-z][a-z0-9-]{1,31}$/, 'lower-case letters, digits and -, starting with a letter'),
  displayName: z.string().min(1).max(60),
};

const shared = {
  /** Every scope the provider may be asked for, with words a person can judge; `destructive` ones are flagged on the consent page. */
  scopes: z.array(z.object({ name: z.string().min(1), description: z.string().min(1), destructive: z.boolean().optional() })).default([]),
  /** What a plain connect asks for; defaults to every scope listed. */
  defaultScopes: z.array(z.string()).optional(),
  /** Broader scopes that include narrower ones: `{ "public_repo": ["repo"] }` means repo grants public_repo. */
  impliedBy: z.record(z.string(), z.array(z.string())).default({}),
  /** Providers whose tokens carry no scopes (GitHub Apps) set false: scope checks are skipped. */
  scopesApply: z.boolean().default(true),
  scopeSeparator: z.enum([' ', ',']).default(' '),
  /**
   * Asking for more scopes later: `union` sends everything already granted plus the new scopes
   * (tokens carry exactly what was requested, as at GitHub; the provider only prompts for the new
   * ones), `missing` sends only the new scopes (the provider merges grants, e.g. Google with
   * include_granted_scopes).
   */
  incrementalScopes: z.enum(['union', 'missing']).default('union'),
  pkce: z.boolean().default(true),
  authorizeParams: z.record(z.string(), z.string()).default({}),
  clientAuth: z.enum(['client_secret_basic', 'client_secret_post']).default('client_secret_post'),
  identity: identitySchema,
  revocation: revocationSchema.default({ kind: 'none' }),
  refresh: z
    .object({
      /** Refresh this long before expiry. */
      skewSeconds: z.number().int().min(0).max(3600).default(120),
      /** Each refresh returns a new refresh token and kills the old one (GitHub Apps, Atlassian, GitLab). */
      rotates: z.boolean().default(false),
    })
    .default({ skewSeconds: 120, rotates: false }),
  /** Token endpoint errors arrive as HTTP 200 with an `error` member (GitHub). */
  tokenErrorsAsHttp200: z.boolean().default(false),
  /**
   * New tokens replicate asynchronously (GitHub): one minted or refreshed in the last minute may
   * be refused once with 401. Wait this long and try once more before calling it dead; 0 = never.
   */
  freshTokenRetryMs: z.number().int().min(0).max(10_000).default(0),
  /** Documentation only: whether our test suite exercises it against a stand-in. */
  status: z.enum(['tested', 'untested']).default('untested'),
  docs: z.string().optional(),
};

/** `oidc`: discovery at `<issuer>/.well-known/openid-configuration`. */
const oidcDefinitionSchema = z.object({
  ...names,
  kind: z.literal('oidc'),
  issuer: requiredUrl('an oidc provider needs an issuer'),
  ...shared,
});

/** `oauth2`: explicit endpoints. */
const oauth2DefinitionSchema = z.object({
  ...names,
  kind: z.literal('oauth2'),
  authorizationEndpoint: requiredUrl('an oauth2 provider needs an authorizationEndpoint'),
  tokenEndpoint: requiredUrl('an oauth2 provider needs a tokenEndpoint'),
  ...shared,
});

/**
 * A provider, declared as data. Built-in presets and the operator's PROVIDERS_FILE share this
 * schema; client secrets never live here (they come from `<ID>_CLIENT_ID` / `<ID>_CLIENT_SECRET`).
 */
export const providerDefinitionSchema = z
  .discriminatedUnion('kind', [oauth2DefinitionSchema, oidcDefinitionSchema], {
    // The words an operator saw when kind was an enum, not zod's "Invalid discriminator value".
    error: (issue) => (issue.code === 'invalid_union' ? 'Invalid option: expected one of "oauth2"|"oidc"' : undefined),
  })
  .superRefine((d, ctx) => {
    if (d.identity.source === 'id_token' && d.kind !== 'oidc')
      ctx.addIssue({ code: 'custom', path: ['identity'], message: 'id_token identity needs kind oidc' });
    for (const s of d.defaultScopes ?? []) {
      if (!d.scopes.some((x) => x.name === s))
        ctx.addIssue({ code: 'custom', path: ['defaultScopes'], message: `default scope "${s}" is not listed in scopes` });
    }
  });

export type ProviderDefinition = z.output<typeof providerDefinitionSchema>;
export type ProviderDefinitionInput = z.input<typeof providerDefinitionSchema>;

/** Reads `a.b.c` out of a JSON value. */
export function pick(value: unknown, path: string): unknown {
  let v = value;
  for (const part of path.split('.')) {
    if (!v || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}
