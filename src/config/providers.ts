import { providerDefinitionSchema, type ProviderDefinition, type ProviderDefinitionInput } from '../providers/definition.js';
import { builtInDefinitions, type PresetContext } from '../providers/presets.js';
import { ConfigError } from './errors.js';
import { readConfigSections } from './file.js';
import { scopeList } from '../providers/scopes.js';

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

function readProvidersFile(path: string): ProviderDefinitionInput[] {
  // A file may hold any other section alone: no providers then.
  const list = readConfigSections(path).providers ?? [];
  if (!Array.isArray(list)) throw new ConfigError('PROVIDERS_FILE providers must be a list of providers');
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
    const scopes = scopesVar === undefined ? undefined : scopeList(scopesVar, { commas: true });
    for (const s of scopes ?? []) {
      if (definition.scopesApply && !definition.scopes.some((x) => x.name === s))
        throw new ConfigError(`${prefix}_SCOPES names "${s}", which provider "${definition.id}" does not list`);
    }
    configured.push({ definition, clientId, clientSecret, ...(scopes ? { scopes } : {}) });
  }
  return configured;
}
