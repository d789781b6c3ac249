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

/** The name to show for a principal, from its verified claims (access token or ID token). */
export function displayNameFrom(claims: Record<string, unknown>): string | undefined {
  for (const key of ['preferred_username', 'name', 'email']) {
    const v = claims[key];
    if (typeof v === 'string' && v) return v;
  }
  return undefined;
}

export function samePrincipal(a: { issuer: string; subject: string }, b: { issuer: string; subject: string }): boolean {
  return a.issuer === b.issuer && a.subject === b.subject;
}
