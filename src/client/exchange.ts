// The service's side of the broker's RFC 8693 token endpoint: one POST, client authentication by
// client_secret_basic or private_key_jwt (RFC 7523), and the answer sorted into the few outcomes
// a tool has to act on. Nothing here logs or returns the subject token, the secret or an assertion.
import { SignJWT, type JWK } from 'jose';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** The broker holds a repeat at most this long (the issue's bound). */
export const MAX_WAIT_SECONDS = 50;
const ASSERTION_LIFETIME_SECONDS = 60;

export type ClientAuth =
  | { method: 'client_secret_basic'; clientId: string; clientSecret: string }
  | { method: 'private_key_jwt'; clientId: string; privateKey: CryptoKey | JWK; keyId?: string; algorithm: string };

export interface ExchangeRequest {
  subjectToken: string;
  provider: string;
  scopes: readonly string[];
  connectRequest?: string;
  /** A repeat that waits on an approval the policy asked for (there is no connect request to name). */
  holdForApproval?: boolean;
  waitSeconds?: number;
}

export type ExchangeOutcome =
  | { kind: 'token'; accessToken: string; scope: string[]; expiresIn?: number; login?: string }
  | {
      kind: 'interaction_required';
      reason: string;
      missingScopes: string[];
      connectUri: string;
      connectRequest: string;
    }
  /** The operator's policy wants people to approve this exchange first: `approvalUri` is the requester's status page. */
  | { kind: 'approval_required'; approvalUri: string }
  | { kind: 'access_denied'; reason: string; description?: string }
  | { kind: 'error'; error: string; description?: string; status: number; retryAfterSeconds?: number };

export interface ExchangeTransport {
  tokenEndpoint: URL;
  auth: ClientAuth;
  fetch: typeof globalThis.fetch;
  timeoutMs: number;
}

/** RFC 6749 §2.3.1: client id and secret are form-urlencoded before they are joined for Basic. */
function basic(clientId: string, clientSecret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(clientSecret)}`).toString('base64')}`;
}

async function assertion(auth: Extract<ClientAuth, { method: 'private_key_jwt' }>, audience: string): Promise<string> {
  const jti = globalThis.crypto.randomUUID();
  return new SignJWT({})
    .setProtectedHeader({ alg: auth.algorithm, typ: 'JWT', ...(auth.keyId ? { kid: auth.keyId } : {}) })
    .setIssuer(auth.clientId)
    .setSubject(auth.clientId)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime(`${ASSERTION_LIFETIME_SECONDS}s`)
    .setJti(jti)
    .sign(auth.privateKey);
}

export async function exchange(t: ExchangeTransport, req: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeOutcome> {
  const form = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE_GRANT,
    subject_token: req.subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    audience: req.provider,
  });
  if (req.scopes.length) form.set('scope', req.scopes.join(' '));
  if (req.connectRequest) form.set('connect_request', req.connectRequest);
  const holds = !!req.connectRequest || !!req.holdForApproval;
  if (holds && req.waitSeconds) form.set('wait', String(Math.min(MAX_WAIT_SECONDS, Math.max(0, Math.floor(req.waitSeconds)))));
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (t.auth.method === 'client_secret_basic') headers.authorization = basic(t.auth.clientId, t.auth.clientSecret);
  else {
    form.set('client_id', t.auth.clientId);
    form.set('client_assertion_type', JWT_BEARER_ASSERTION);
    form.set('client_assertion', await assertion(t.auth, t.tokenEndpoint.href));
  }

  // The held repeat may take up to `wait` seconds on the broker's side.
  const timeout = AbortSignal.timeout(t.timeoutMs + (holds ? (req.waitSeconds ?? 0) * 1000 : 0));
  let res: Response;
  try {
    res = await t.fetch(t.tokenEndpoint, {
      method: 'POST',
      headers,
      body: form.toString(),
      redirect: 'error',
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (err) {
    const aborted = signal?.aborted === true;
    return {
      kind: 'error',
      error: aborted ? 'aborted' : 'unreachable',
      description: aborted ? undefined : err instanceof Error && err.name === 'TimeoutError' ? 'timed out' : 'no answer',
      status: 0,
    };
  }
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = await res.json();
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON (a proxy's page, an HTML 502): sorted below by status alone.
  }
  return classify(res, body);
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);

function classify(res: Response, body: Record<string, unknown>): ExchangeOutcome {
  if (res.status === 200) {
    const accessToken = str(body.access_token);
    if (!accessToken) return { kind: 'error', error: 'invalid_response', description: 'no access_token in the answer', status: 200 };
    const expiresIn = typeof body.expires_in === 'number' && Number.isFinite(body.expires_in) ? body.expires_in : undefined;
    // The broker's extra member (RFC 6749 §5.1): the provider account's login, never a secret.
    const login = str(body.account_login);
    return {
      kind: 'token',
      accessToken,
      scope: (str(body.scope) ?? '').split(' ').filter(Boolean),
      ...(expiresIn !== undefined ? { expiresIn } : {}),
      ...(login ? { login } : {}),
    };
  }
  const error = str(body.error) ?? (res.status === 429 ? 'rate_limited' : res.status >= 500 ? 'server_error' : 'invalid_response');
  if (error === 'interaction_required' && str(body.reason) === 'approval_required') {
    const approvalUri = str(body.approval_uri);
    if (approvalUri && /^https?:$/.test(safeProtocol(approvalUri))) return { kind: 'approval_required', approvalUri };
    return {
      kind: 'error',
      error: 'invalid_response',
      description: 'approval_required without a usable approval link',
      status: res.status,
    };
  }
  if (error === 'interaction_required') {
    const connectUri = str(body.connect_uri);
    const connectRequest = str(body.connect_request);
    if (connectUri && connectRequest && /^https?:$/.test(safeProtocol(connectUri)))
      return {
        kind: 'interaction_required',
        reason: str(body.reason) ?? 'not_connected',
        missingScopes: strings(body.missing_scopes),
        connectUri,
        connectRequest,
      };
    return {
      kind: 'error',
      error: 'invalid_response',
      description: 'interaction_required without a usable connect link',
      status: res.status,
    };
  }
  if (error === 'access_denied')
    return {
      kind: 'access_denied',
      reason: str(body.reason) ?? 'denied',
      ...(str(body.error_description) ? { description: str(body.error_description) } : {}),
    };
  const retryAfter = Number(res.headers.get('retry-after'));
  return {
    kind: 'error',
    error,
    ...(str(body.error_description) ? { description: str(body.error_description) } : {}),
    status: res.status,
    ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
  };
}

function safeProtocol(uri: string): string {
  try {
    return new URL(uri).protocol;
  } catch {
    return '';
  }
}
