// What the stand-in tests (github-standin, sandbox-github) do as a browser on a GitHub-style
// authorize page: build the query, then read back the fields of the form it answers with (unescapeHtml serves the IdP suite too).

/** The authorize query a client sends; `scope: null` leaves the parameter out, `challenge` adds PKCE (S256). */
export function authorizeQuery(opts: {
  clientId: string;
  redirectUri: string;
  scope?: string | null;
  state?: string;
  challenge?: string;
}): URLSearchParams {
  const q = new URLSearchParams({
    client_id: opts.clientId,
    redirect_uri: opts.redirectUri,
    scope: opts.scope ?? 'repo read:user',
    state: opts.state ?? 'st<"&>',
  });
  if (opts.scope === null) q.delete('scope');
  if (opts.challenge) {
    q.set('code_challenge', opts.challenge);
    q.set('code_challenge_method', 'S256');
  }
  return q;
}

/** Undoes the five entities the broker's and the stand-ins' pages escape. */
export const unescapeHtml = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** The hidden and text inputs of an authorize page, unescaped, ready to be posted back. */
export function formFields(html: string): URLSearchParams {
  const fields = new URLSearchParams();
  for (const m of html.matchAll(/<input type="(?:hidden|text)"[^>]*name="([^"]*)" value="([^"]*)">/g))
    fields.set(unescapeHtml(m[1]!), unescapeHtml(m[2]!));
  return fields;
}
