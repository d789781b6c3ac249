// RFC 8693 token exchange requests as the operator's services send them to the broker's
// /oauth/token: client_secret_basic, a form body, GitHub as the audience unless the form says otherwise.

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/**
 * POSTs a token exchange to `<publicUrl>/oauth/token` as `service`, with the grant type, an access
 * token as the subject token's type and `audience: github`, then `form` (which may override them).
 */
export async function postTokenExchange(
  publicUrl: string,
  service: { id: string; secret: string },
  form: Record<string, string>,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${publicUrl}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${service.id}:${service.secret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: TOKEN_EXCHANGE_GRANT, subject_token_type: ACCESS_TOKEN_TYPE, audience: 'github', ...form }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}
