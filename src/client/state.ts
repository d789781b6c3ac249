// The requestState the helper hands the client between rounds: sealed with AES-256-GCM through Web
// Crypto (globalThis.crypto.subtle), so the client can neither read nor change it. The helper ships
// on its own, without the broker's src/crypto/, hence Web Crypto rather than node:crypto.
//
// Wire: `mcbs1.` + base64url(iv ‖ ciphertext ‖ tag). The additional data binds it to the principal
// (iss, sub of the verified subject token): a state replayed by another user does not open. The
// tool, the digest of its arguments and the expiry sit inside and are compared after opening.

const PREFIX = 'mcbs1.';
const IV_BYTES = 12;
const HKDF_INFO = 'mcp-connect-broker/client request-state v1';
/** A sealed state larger than this is refused before any decryption is tried. */
const MAX_STATE_CHARS = 8192;

/** What one round carries to the next. Never a token. */
export interface SealedPayload {
  /** The tool the state belongs to. */
  tool: string;
  /** base64url SHA-256 of the canonical JSON of the tool's arguments. */
  args: string;
  provider: string;
  scopes: string[];
  /** What the next round waits on: the person finishing a connect link, or an approval of this call. */
  awaiting: Awaiting;
  /** Expiry, seconds since the epoch. */
  exp: number;
}

/**
 * A connect link the person is finishing (the broker's opaque connect_request id), or the approval
 * of this call (the broker finds the request by the call itself, so there is no id to carry).
 */
export type Awaiting = { kind: 'connect'; connectRequest: string } | { kind: 'approval' };

export interface Principal {
  issuer: string;
  subject: string;
}

/** Why a state was refused; reaches only the service's `onError`, never the client. */
export type StateRefusal = 'malformed' | 'sealed' | 'expired' | 'tool' | 'args';

export class StateError extends Error {
  override name = 'StateError';
  constructor(readonly reason: StateRefusal) {
    super(`requestState refused: ${reason}`);
  }
}

const encoder = new TextEncoder();

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('mcp-connect-broker/client needs Web Crypto (globalThis.crypto.subtle): Node 20 or later');
  return s;
}

export function toBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  return new Uint8Array(Buffer.from(text, 'base64url'));
}

/** The AES-GCM key, derived with HKDF-SHA-256 from the service's `stateKey` (≥ 32 bytes). */
export async function stateCipherKey(stateKey: string | Uint8Array): Promise<CryptoKey> {
  const raw = new Uint8Array(typeof stateKey === 'string' ? encoder.encode(stateKey) : stateKey);
  if (raw.byteLength < 32) throw new RangeError('stateKey must be at least 32 bytes');
  const base = await subtle().importKey('raw', raw, 'HKDF', false, ['deriveKey']);
  return subtle().deriveKey(
    { name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: encoder.encode(HKDF_INFO) },
    base,
    { name: 'AES-GCM', length: 256 },
    false,
    ['encrypt', 'decrypt'],
  );
}

function additionalData(principal: Principal): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${PREFIX}\0${principal.issuer}\0${principal.subject}`);
}

export async function seal(key: CryptoKey, principal: Principal, payload: SealedPayload): Promise<string> {
  const iv = globalThis.crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const plain = encoder.encode(JSON.stringify(payload));
  const sealed = new Uint8Array(await subtle().encrypt({ name: 'AES-GCM', iv, additionalData: additionalData(principal) }, key, plain));
  const out = new Uint8Array(iv.byteLength + sealed.byteLength);
  out.set(iv, 0);
  out.set(sealed, iv.byteLength);
  return PREFIX + toBase64Url(out);
}

/**
 * Opens a state for `principal` and checks it belongs to this `tool` with these arguments, unexpired.
 * Throws StateError otherwise.
 */
export async function open(
  key: CryptoKey,
  principal: Principal,
  state: string,
  expect: { tool: string; args: string } | undefined,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<SealedPayload> {
  if (state.length > MAX_STATE_CHARS || !state.startsWith(PREFIX)) throw new StateError('malformed');
  const bytes = fromBase64Url(state.slice(PREFIX.length));
  if (!bytes || bytes.byteLength <= IV_BYTES + 16) throw new StateError('malformed');
  let plain: ArrayBuffer;
  try {
    plain = await subtle().decrypt(
      { name: 'AES-GCM', iv: bytes.subarray(0, IV_BYTES), additionalData: additionalData(principal) },
      key,
      bytes.subarray(IV_BYTES),
    );
  } catch {
    // Tampered, sealed with another key, or for another principal: AES-GCM cannot tell which.
    throw new StateError('sealed');
  }
  const payload = parsePayload(new TextDecoder().decode(plain));
  if (!payload) throw new StateError('malformed');
  if (payload.exp <= nowSeconds) throw new StateError('expired');
  if (expect && payload.tool !== expect.tool) throw new StateError('tool');
  if (expect && payload.args !== expect.args) throw new StateError('args');
  return payload;
}

function parsePayload(text: string): SealedPayload | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const p = v as Record<string, unknown>;
  const ok =
    typeof p.tool === 'string' &&
    typeof p.args === 'string' &&
    typeof p.provider === 'string' &&
    Array.isArray(p.scopes) &&
    p.scopes.every((s) => typeof s === 'string') &&
    typeof p.exp === 'number';
  const awaiting = ok ? awaitingOf(p) : undefined;
  return awaiting
    ? ({ tool: p.tool, args: p.args, provider: p.provider, scopes: p.scopes, awaiting, exp: p.exp } as SealedPayload)
    : undefined;
}

function awaitingOf(p: Record<string, unknown>): Awaiting | undefined {
  const a = p.awaiting as Record<string, unknown> | null | undefined;
  if (a && typeof a === 'object') {
    if (a.kind === 'approval') return { kind: 'approval' };
    if (a.kind === 'connect' && typeof a.connectRequest === 'string' && a.connectRequest !== '')
      return { kind: 'connect', connectRequest: a.connectRequest };
    return undefined;
  }
  // A state sealed before `awaiting` (it lives minutes): a connect_request id, or '' for an approval.
  if (typeof p.connectRequest !== 'string') return undefined;
  return p.connectRequest === '' ? { kind: 'approval' } : { kind: 'connect', connectRequest: p.connectRequest };
}

/** JSON with object keys sorted at every level, so equal arguments give equal digests. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export async function argsDigest(args: unknown): Promise<string> {
  const digest = await subtle().digest('SHA-256', encoder.encode(canonicalJson(args ?? {})));
  return toBase64Url(new Uint8Array(digest));
}
