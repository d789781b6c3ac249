import { displayText, hasInvisibleCharacters } from '../http/display-text.js';

declare const verified: unique symbol;

/**
 * A user of the broker as the operator's identity provider names them: `sub` is unique only per
 * issuer, so the pair is the identity. Only code that has verified a token or a session may make
 * one (see `principalFromVerifiedClaims`), never tool arguments or client metadata.
 */
export interface Principal {
  readonly issuer: string;
  readonly subject: string;
  /** A display name from the IdP, for pages only; never used to decide anything. */
  readonly name: string;
  readonly [verified]: true;
}

export function principalFromVerifiedClaims(issuer: string, subject: string, name?: string): Principal {
  return { issuer, subject, name: name || subject } as Principal;
}

/**
 * The name to show for a principal, from its verified claims (access token or ID token), without
 * control or invisible characters (the IdP may send a NUL, which PostgreSQL cannot store).
 */
export function displayNameFrom(claims: Record<string, unknown>): string | undefined {
  for (const key of ['preferred_username', 'name', 'email']) {
    const v = claims[key];
    const shown = typeof v === 'string' ? displayText(v) : undefined;
    if (shown) return shown;
  }
  return undefined;
}

/** Why an issuer or subject cannot name a principal, or undefined when it can; `claim` is where the subject came from. */
export function identityProblem(issuer: string, subject: string, claim = 'sub'): string | undefined {
  if (hasInvisibleCharacters(issuer)) return 'The identity provider sent an issuer (iss) with control or invisible characters.';
  if (hasInvisibleCharacters(subject)) return `The identity provider sent a subject (${claim}) with control or invisible characters.`;
  return undefined;
}

export function samePrincipal(a: { issuer: string; subject: string }, b: { issuer: string; subject: string }): boolean {
  return a.issuer === b.issuer && a.subject === b.subject;
}
