import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { ASYMMETRIC_ALGORITHMS } from '../auth/bearer.js';
import { constantTimeEqual, sha256Hex } from '../crypto/index.js';
import type { Store } from '../store/index.js';
import { ExchangeError } from './errors.js';
import { M } from './messages.js';
import type { ConfiguredService } from '../config/services.js';

export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** The longest a client assertion may live (exp − now, and exp − iat when present). */
export const MAX_ASSERTION_LIFETIME_SECONDS = 300;
const CLOCK_TOLERANCE_SECONDS = 5;
/** How long a used jti is kept beyond the last instant its assertion could be accepted. */
const USED_ASSERTION_MARGIN_SECONDS = 60;

export interface ClientAuthContext {
  services: ReadonlyMap<string, ConfiguredService>;
  store: Store;
  /** The audiences a client assertion may name: the token endpoint URL and the broker's issuer identifier. */
  assertionAudiences: string[];
}

/** A refusal that says only what the request itself shows (no credentials, a malformed header). */
const refuse = (description: string, basic: boolean) => new ExchangeError('invalid_client', description, { basicChallenge: basic });
/** A refusal of credentials: the one text for all of them; `why` goes to the log only. */
const refuseCredentials = (why: string, basic: boolean) =>
  new ExchangeError('invalid_client', M.clientAuthFailed, { basicChallenge: basic, detail: why });

/**
 * The `typ` values a client assertion may carry (RFC 10070, formerly draft-ietf-oauth-rfc7523bis):
 * its explicit type, or the generic `JWT` that RFC 7523 clients send; absent is allowed too. Any
 * other type is a JWT made for something else (an access token, a DPoP proof, …) and is refused.
 * Compared as media types: case-insensitive, `application/` implied (RFC 7515 §4.1.9).
 */
const ASSERTION_TYPES = new Set(['application/client-authentication+jwt', 'application/jwt']);

function assertionTypeFits(typ: unknown): boolean {
  if (typ === undefined) return true;
  if (typeof typ !== 'string') return false;
  const type = typ.toLowerCase();
  return ASSERTION_TYPES.has(type.includes('/') ? type : `application/${type}`);
}

/** `Basic base64(urlencode(id):urlencode(secret))` (RFC 6749 §2.3.1), or undefined when malformed. */
function parseBasic(header: string): { id: string; secret: string } | undefined {
  const m = /^Basic ([A-Za-z0-9+/]+={0,2})$/i.exec(header.trim());
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    const plus = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return { id: plus(decoded.slice(0, colon)), secret: plus(decoded.slice(colon + 1)) };
  } catch {
    return undefined;
  }
}

/**
 * The client a request names before anything is checked (the Basic user name, else the client
 * assertion's unverified `iss`): what the failure limit keys on, never who is authenticated.
 */
export function claimedClientId(authorization: string | undefined, form: ReadonlyMap<string, string>): string | undefined {
  if (authorization !== undefined && /^basic\s/i.test(authorization.trim())) return parseBasic(authorization)?.id;
  const assertion = form.get('client_assertion');
  if (assertion === undefined) return undefined;
  try {
    const iss = decodeJwt(assertion).iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Authenticates the calling service: `client_secret_basic` (constant-time compare) or
 * `private_key_jwt` (RFC 7523, keys from the service's jwksUri, single-use `jti` in the shared
 * store). A service must use the method it is declared with.
 * @throws {ExchangeError} `invalid_client` (401) for every failure, with one text for every refusal
 * of credentials (the reason in `detail`), `invalid_request` for two methods at once.
 */
export class ClientAuthenticator {
  readonly #jwks = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

  constructor(private readonly ctx: ClientAuthContext) {}

  async authenticate(authorization: string | undefined, form: ReadonlyMap<string, string>): Promise<ConfiguredService> {
    const assertion = form.get('client_assertion');
    const assertionType = form.get('client_assertion_type');
    const usesBasic = authorization !== undefined && /^basic\s/i.test(authorization.trim());
    if (usesBasic && (assertion !== undefined || assertionType !== undefined)) throw new ExchangeError('invalid_request', M.twoAuthMethods);
    if (form.has('client_secret')) throw refuse(M.clientSecretInForm, false);
    const service = usesBasic
      ? this.#basic(authorization!)
      : assertion !== undefined || assertionType !== undefined
        ? await this.#assertion(assertionType, assertion)
        : undefined;
    if (!service) throw refuse(M.noClientAuth, true);
    const clientId = form.get('client_id');
    if (clientId !== undefined && clientId !== service.id) throw refuseCredentials('client_id names another client', usesBasic);
    return service;
  }

  #basic(header: string): ConfiguredService {
    const credentials = parseBasic(header);
    if (!credentials) throw refuse(M.badBasic, true);
    const service = this.ctx.services.get(credentials.id);
    if (!service) throw refuseCredentials('unknown client id', true);
    if (service.auth !== 'client_secret_basic') throw refuseCredentials(`registered for ${service.auth}, sent client_secret_basic`, true);
    if (!constantTimeEqual(service.secret!, credentials.secret)) throw refuseCredentials('wrong client secret', true);
    return service;
  }

  async #assertion(type: string | undefined, assertion: string | undefined): Promise<ConfiguredService> {
    if (type !== JWT_BEARER_ASSERTION) throw refuse(M.assertionType, false);
    if (!assertion) throw refuseCredentials('empty client assertion', false);
    // Which service's keys to check it with: the claimed issuer, verified below against those keys.
    let claimed: unknown;
    let typ: unknown;
    try {
      claimed = decodeJwt(assertion).iss;
      typ = decodeProtectedHeader(assertion).typ;
    } catch {
      throw refuseCredentials('the client assertion is not a JWT', false);
    }
    if (!assertionTypeFits(typ)) throw refuseCredentials(`the client assertion's typ is ${JSON.stringify(typ)}`, false);
    const service = typeof claimed === 'string' ? this.ctx.services.get(claimed) : undefined;
    if (!service) throw refuseCredentials('unknown client id (the assertion iss)', false);
    if (service.auth !== 'private_key_jwt') throw refuseCredentials(`registered for ${service.auth}, sent private_key_jwt`, false);
    let exp: number;
    let iat: number | undefined;
    let jti: string;
    try {
      const { payload } = await jwtVerify(assertion, this.#keys(service), {
        issuer: service.id,
        subject: service.id,
        audience: this.ctx.assertionAudiences,
        algorithms: ASYMMETRIC_ALGORITHMS,
        requiredClaims: ['exp', 'jti'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
      });
      exp = payload.exp!;
      iat = payload.iat;
      jti = String(payload.jti);
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw refuseCredentials('the client assertion has expired', false);
      if (err instanceof joseErrors.JWKSTimeout || !(err instanceof joseErrors.JOSEError) || err instanceof joseErrors.JWKSInvalid)
        throw refuseCredentials("the client's keys could not be fetched from its jwksUri", false);
      throw refuseCredentials(`the client assertion is not valid (${err.code})`, false);
    }
    const now = Date.now() / 1000;
    const limit = MAX_ASSERTION_LIFETIME_SECONDS + CLOCK_TOLERANCE_SECONDS;
    if (exp - now > limit || (iat !== undefined && exp - iat > limit))
      throw refuseCredentials('the client assertion lives longer than 5 minutes', false);
    // Kept in the store every instance shares until well past the last instant jose would accept it
    // (exp + leeway): a replay verified just before that instant but stored just after must still
    // find the row, not an expired one it may take over.
    const fresh = await this.ctx.store.clientAssertions.use(
      sha256Hex(`${service.id}\n${jti}`),
      (exp + CLOCK_TOLERANCE_SECONDS + USED_ASSERTION_MARGIN_SECONDS) * 1000,
    );
    if (!fresh) throw refuseCredentials('the client assertion (its jti) was already used', false);
    return service;
  }

  #keys(service: ConfiguredService): ReturnType<typeof createRemoteJWKSet> {
    let keys = this.#jwks.get(service.id);
    if (!keys) {
      keys = createRemoteJWKSet(service.jwksUri!, { timeoutDuration: 5000, cooldownDuration: 30_000, cacheMaxAge: 600_000 });
      this.#jwks.set(service.id, keys);
    }
    return keys;
  }
}
