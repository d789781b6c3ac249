/**
 * Calls in flight per (principal, upstream), on this instance: one user's slow calls cannot take
 * every pooled connection to an upstream, so other users' calls never queue behind them.
 */
export class InFlightCalls {
  readonly #counts = new Map<string, number>();

  /** A slot for `key` when fewer than `cap` are taken, with the function that gives it back (once); else undefined. */
  take(key: string, cap: number): (() => void) | undefined {
    const taken = this.#counts.get(key) ?? 0;
    if (taken >= cap) return undefined;
    this.#counts.set(key, taken + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left > 0) this.#counts.set(key, left);
      else this.#counts.delete(key);
    };
  }
}
