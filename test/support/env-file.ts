// .env.example as the tests read it: `NAME=value` lines are set, `# NAME=value` lines show a
// variable that is off; every other comment is prose. Sections start with `# --- Title ---`.
import { randomBytes } from 'node:crypto';

export interface EnvEntry {
  name: string;
  value: string;
  set: boolean;
  section: string;
  line: number;
}

export function parseEnvFile(text: string): EnvEntry[] {
  const entries: EnvEntry[] = [];
  let section = '';
  text.split('\n').forEach((raw, i) => {
    const heading = /^# --- (.+?) -*$/.exec(raw);
    if (heading) {
      section = heading[1]!;
      return;
    }
    const entry = /^(# )?((?:[A-Z0-9_]|<ID>)+)=(.*)$/.exec(raw);
    if (entry) entries.push({ name: entry[2]!, value: entry[3]!, set: entry[1] === undefined, section, line: i + 1 });
    else if (raw !== '' && !raw.startsWith('#')) throw new Error(`.env line ${i + 1} is neither NAME=value nor a comment: ${raw}`);
  });
  return entries;
}

/** The variables a `.env` made from these entries sets. */
export function setVariables(entries: EnvEntry[]): Record<string, string> {
  return Object.fromEntries(entries.filter((e) => e.set).map((e) => [e.name, e.value]));
}

/**
 * Compose's interpolation of `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
 * `${VAR?error}` and `$$`, as the Compose specification describes it (unset, or empty for the `:`
 * forms); throws the error text of a `?` form, as `docker compose` refuses to start.
 */
export function interpolate(value: string, vars: Record<string, string | undefined>): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, name, colon, op, arg, bare) => {
      if (whole === '$$') return '$';
      if (bare) return vars[bare] ?? '';
      const current = vars[name as string];
      const missing = current === undefined || (colon === ':' && current === '');
      if (op === '-') return missing ? (arg as string) : current!;
      if (op === '?') {
        if (missing) throw new Error(`${name as string}: ${arg as string}`);
        return current!;
      }
      return current ?? '';
    },
  );
}

/** The variable names a compose value interpolates. */
export function interpolated(value: string): string[] {
  return [...value.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$(?!\$)([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => (m[1] ?? m[2])!);
}

/** What .env.example puts where a secret goes: the broker refuses it (too short, not a key). */
export const PLACEHOLDER = 'change-me';

/** What an operator does with the file: each placeholder (or empty secret) replaced with a value generated as its comment says. */
export function filledIn(vars: Record<string, string>): Record<string, string> {
  const generated: Record<string, () => string> = {
    BROKER_SECRET: () => randomBytes(48).toString('base64'),
    TOKEN_ENCRYPTION_KEY: () => randomBytes(32).toString('base64'),
    POSTGRES_PASSWORD: () => randomBytes(24).toString('hex'),
  };
  return Object.fromEntries(
    Object.entries(vars).map(([name, value]) => [
      name,
      value === PLACEHOLDER || value === '' ? (generated[name]?.() ?? randomBytes(20).toString('hex')) : value,
    ]),
  );
}
