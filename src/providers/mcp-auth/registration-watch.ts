/** When flows started with one dynamic registration count as lost: how many, each how long without coming back. */
export interface LostRegistrationRule {
  flows: number;
  afterMs: number;
}

export const DEFAULT_LOST_REGISTRATION: LostRegistrationRule = { flows: 2, afterMs: 60_000 };

/** Starts remembered per registration: enough to judge the rule, not one per user. */
const MAX_STARTS = 16;

/**
 * Watches whether the authorization server still knows a dynamic registration. A server that lost
 * it (an in-memory one restarted) shows its own `invalid_client` page and never sends the browser
 * back, so the broker hears nothing: once `rule.flows` flows started with the registration have
 * gone `rule.afterMs` without any browser coming back since it was made (or since this process
 * started), it is taken as lost and the next connect registers anew. One browser coming back,
 * whatever the server answered, shows the server knows it.
 */
export class RegistrationWatch {
  #clientId: string | undefined;
  #known = false;
  #starts: number[] = [];

  constructor(
    private readonly rule: LostRegistrationRule = DEFAULT_LOST_REGISTRATION,
    private readonly now: () => number = Date.now,
  ) {}

  /** A flow starts with `clientId`: true when the flows before it show the registration is lost (then this one is not counted). */
  started(clientId: string): boolean {
    if (clientId !== this.#clientId) {
      this.#clientId = clientId;
      this.#known = false;
      this.#starts = [];
    }
    if (this.#known) return false;
    const now = this.now();
    if (this.#starts.filter((t) => now - t >= this.rule.afterMs).length >= this.rule.flows) return true;
    if (this.#starts.length < MAX_STARTS) this.#starts.push(now);
    return false;
  }

  /** A browser came back from the server: the registration in use works. */
  returned(): void {
    if (this.#clientId !== undefined) this.#known = true;
  }
}
