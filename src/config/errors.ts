/** Thrown when the environment cannot describe a working service: one line per problem, each naming its variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  /** Every problem found, one line each (a single one for most throws). */
  readonly problems: readonly string[];

  constructor(problems: string | readonly string[]) {
    const lines = typeof problems === 'string' ? [problems] : [...problems];
    super(lines.join('\n'));
    this.problems = lines;
  }
}

/**
 * Gathers every configuration problem, so one start-up names them all instead of one per restart.
 * Each variable's parse step runs through `take`; a refused step yields a placeholder that never
 * leaves `loadConfig`, because `throwIfAny` runs before the configuration is assembled.
 */
export class ConfigProblems {
  readonly #lines: string[] = [];
  readonly #variables = new Set<string>();

  /** Records one problem; a second one about the same variable (a consequence of the first) is dropped. */
  add(message: string): void {
    const variable = /^[A-Z][A-Z0-9_]*/.exec(message)?.[0] ?? message;
    if (this.#variables.has(variable)) return;
    this.#variables.add(variable);
    this.#lines.push(message);
  }

  take<T>(parse: () => T): T {
    try {
      return parse();
    } catch (err) {
      if (err instanceof ConfigError) err.problems.forEach((p) => this.add(p));
      // Anything else after a recorded problem is that problem's consequence (a placeholder was used).
      else if (this.#lines.length === 0) throw err;
      return undefined as unknown as T;
    }
  }

  throwIfAny(): void {
    if (this.#lines.length > 0) throw new ConfigError(this.#lines);
  }
}
