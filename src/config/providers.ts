import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { providerDefinitionSchema, type ProviderDefinition, type ProviderDefinitionInput } from '../providers/definition.js';
import { builtInDefinitions, type PresetContext } from '../providers/presets.js';
import { ConfigError } from './errors.js';

export interface ConfiguredProvider {
  definition: ProviderDefinition;
  clientId: string;
  clientSecret: string;
  /** `<ID>_SCOPES`, replacing the definition's default scopes. */
  scopes?: string[];
}

/** What each provider's variables are called after its prefix: `GITLAB_CLIENT_ID`, `GITLAB_CLIENT_SECRET`, `GITLAB_SCOPES`. */
export const PROVIDER_VARIABLE_SUFFIXES = ['CLIENT_ID', 'CLIENT_SECRET', 'SCOPES'] as const;

/** `gitlab-self` → `GITLAB_SELF`: the prefix of a provider's environment variables. */
export function envPrefix(id: string): string {
  return id.toUpperCase().replace(/-/g, '_');
}

/** PROVIDERS_FILE parsed (YAML or JSON), with one-line errors. */
export function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new ConfigError(`PROVIDERS_FILE cannot be read (${path})`);
  }
  let data: unknown;
  try {
    data = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      `PROVIDERS_FILE is not valid ${/\.ya?ml$/i.test(path) ? 'YAML' : 'JSON'}: ${err instanceof Error ? err.message.split('\n')[0] : ''}`,
    );
  }
  return data;
}

function readProvidersFile(path: string): ProviderDefinitionInput[] {
  const data = readConfigFile(path);
  // A file may declare services alone (see src/exchange/services.ts): no providers then.
  const holdsServicesOnly =
    !Array.isArray(data) &&
    (data as { providers?: unknown })?.providers === undefined &&
    Array.isArray((data as { services?: unknown })?.services);
  const list = Array.isArray(data) ? data : holdsServicesOnly ? [] : (data as { providers?: unknown })?.providers;
  if (!Array.isArray(list)) throw new ConfigError('PROVIDERS_FILE must hold a list of providers (or an object with a "providers" list)');
  return list as ProviderDefinitionInput[];
}

function validate(input: ProviderDefinitionInput, where: string): ProviderDefinition {
  const parsed = providerDefinitionSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new ConfigError(`${where}${issue.path.length ? `.${issue.path.join('.')}` : ''}: ${issue.message}`);
}

/**
 * The providers this instance connects to: the built-in presets plus PROVIDERS_FILE (whose entries
 * replace a preset of the same id). GitHub is always on; any other provider is on when its
 * `<ID>_CLIENT_ID` and `<ID>_CLIENT_SECRET` are set, and a provider declared in the file must have them.
 */
export function loadProviders(env: NodeJS.ProcessEnv, ctx: PresetContext): ConfiguredProvider[] {
  const definitions = new Map<string, { definition: ProviderDefinition; fromFile: boolean }>();
  for (const input of builtInDefinitions(ctx))
    definitions.set(input.id, { definition: validate(input, `built-in provider ${input.id}`), fromFile: false });
  if (env.PROVIDERS_FILE) {
    readProvidersFile(env.PROVIDERS_FILE).forEach((input, i) => {
      const definition = validate(input, `PROVIDERS_FILE providers[${i}]`);
      definitions.set(definition.id, { definition, fromFile: true });
    });
  }
  const configured: ConfiguredProvider[] = [];
  for (const { definition, fromFile } of definitions.values()) {
    const prefix = envPrefix(definition.id);
    const variable = (suffix: (typeof PROVIDER_VARIABLE_SUFFIXES)[number]): string | undefined => env[`${prefix}_${suffix}`];
    const clientId = variable('CLIENT_ID');
    const clientSecret = variable('CLIENT_SECRET');
    if (!clientId || !clientSecret) {
      if (fromFile)
        throw new ConfigError(
          `${prefix}_CLIENT_ID and ${prefix}_CLIENT_SECRET are required for provider "${definition.id}" from PROVIDERS_FILE`,
        );
      continue;
    }
    const scopesVar = variable('SCOPES');
    const scopes = scopesVar === undefined ? undefined : scopesVar.split(/[\s,]+/).filter(Boolean);
    for (const s of scopes ?? []) {
      if (definition.scopesApply && !definition.scopes.some((x) => x.name === s))
        throw new ConfigError(`${prefix}_SCOPES names "${s}", which provider "${definition.id}" does not list`);
    }
    configured.push({ definition, clientId, clientSecret, ...(scopes ? { scopes } : {}) });
  }
  return configured;
}
