/**
 * Scope strings as lists and back: the one place a `scope` value is split or joined. RFC 6749 §3.3
 * separates scopes by spaces; `commas: true` also splits on commas and any white space, for the
 * places that take GitHub's "repo,user" token responses or what an operator writes in a variable.
 */
export function scopeList(value: string | null | undefined, { commas = false }: { commas?: boolean } = {}): string[] {
  if (!value) return [];
  return value.split(commas ? /[\s,]+/ : ' ').filter(Boolean);
}

/** A list of scopes as one RFC 6749 §3.3 scope string (space-separated), as it is stored and sent. */
export function scopeString(scopes: readonly string[]): string {
  return scopes.join(' ');
}
