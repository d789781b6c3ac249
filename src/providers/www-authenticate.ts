/**
 * `WWW-Authenticate` parsing (RFC 9110 §11.6.1, §5.6): one or more challenges, each an auth-scheme
 * with either a token68 or comma-separated auth-params whose values are tokens or quoted strings
 * (with `\` escapes). Written here because no kept dependency exports a parser: oauth4webapi (a
 * dependency of openid-client) keeps its own internal, and the MCP client's
 * `extractWWWAuthenticateParams` matches a regular expression against the whole header (no
 * escapes, no telling one challenge's parameters from another's).
 */
import { scopeList } from './scopes.js';

/** One challenge: its scheme lowercased, parameter names lowercased, values unescaped. */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
  token68?: string;
}

/** Longer headers are not parsed (an upstream cannot make the broker chew on megabytes). */
export const MAX_HEADER_LENGTH = 8 * 1024;

const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
const TOKEN68_CHAR = /[A-Za-z0-9\-._~+/]/;

class Malformed extends Error {}

/**
 * Every challenge in `header`, in order; [] when the header is absent, too long or malformed
 * anywhere (an ambiguous challenge is no challenge: a parameter named twice counts as malformed,
 * RFC 9110 says each name occurs once per challenge).
 */
export function parseChallenges(header: string | null | undefined): Challenge[] {
  if (!header || header.length > MAX_HEADER_LENGTH) return [];
  try {
    return new Parser(header).challenges();
  } catch (err) {
    if (err instanceof Malformed) return [];
    throw err;
  }
}

class Parser {
  #i = 0;
  constructor(private readonly s: string) {}

  challenges(): Challenge[] {
    const out: Challenge[] = [];
    this.#skipListSeparators();
    while (this.#i < this.s.length) {
      const c = this.#challenge();
      // Parsed into a prototype-less object (a parameter named __proto__ is just a name), handed out as a plain one.
      out.push({ ...c, params: Object.fromEntries(Object.entries(c.params)) });
      this.#skipListSeparators();
    }
    return out;
  }

  #challenge(): Challenge {
    const scheme = this.#token().toLowerCase();
    const challenge: Challenge = { scheme, params: Object.create(null) as Record<string, string> };
    // auth-scheme [ 1*SP ( token68 / #auth-param ) ]
    if (!this.#spaces()) return this.#endOfItem(challenge);
    if (this.#atItemEnd()) return challenge;
    const token68 = this.#tryToken68();
    if (token68 !== undefined) {
      challenge.token68 = token68;
      return this.#endOfItem(challenge);
    }
    for (;;) {
      const start = this.#i;
      const name = this.#token().toLowerCase();
      this.#ows();
      if (this.s[this.#i] !== '=') {
        // Not a parameter: the next challenge's scheme (only after a comma).
        this.#i = start;
        return challenge;
      }
      this.#i += 1;
      this.#ows();
      const value = this.s[this.#i] === '"' ? this.#quoted() : this.#token();
      if (Object.prototype.hasOwnProperty.call(challenge.params, name)) throw new Malformed();
      challenge.params[name] = value;
      this.#ows();
      if (this.#i >= this.s.length) return challenge;
      if (this.s[this.#i] !== ',') throw new Malformed();
      this.#skipListSeparators();
      if (this.#i >= this.s.length) return challenge;
      // After a comma: another parameter of this challenge, or the next challenge.
      const save = this.#i;
      this.#token();
      this.#ows();
      const isParam = this.s[this.#i] === '=';
      this.#i = save;
      if (!isParam) return challenge;
    }
  }

  /** A token68, if what follows is exactly one (then the item ends). */
  #tryToken68(): string | undefined {
    let j = this.#i;
    while (j < this.s.length && TOKEN68_CHAR.test(this.s[j]!)) j += 1;
    if (j === this.#i) return undefined;
    while (j < this.s.length && this.s[j] === '=') j += 1;
    let k = j;
    while (k < this.s.length && (this.s[k] === ' ' || this.s[k] === '\t')) k += 1;
    if (k < this.s.length && this.s[k] !== ',') return undefined;
    // `name=value` continues past the "="s, so it is a parameter; a lone `name=` has no value, so it is a token68.
    const text = this.s.slice(this.#i, j);
    this.#i = j;
    return text;
  }

  #endOfItem(c: Challenge): Challenge {
    this.#ows();
    if (this.#i < this.s.length && this.s[this.#i] !== ',') throw new Malformed();
    return c;
  }

  #atItemEnd(): boolean {
    return this.#i >= this.s.length || this.s[this.#i] === ',';
  }

  #token(): string {
    const start = this.#i;
    while (this.#i < this.s.length && TCHAR.test(this.s[this.#i]!)) this.#i += 1;
    if (this.#i === start) throw new Malformed();
    return this.s.slice(start, this.#i);
  }

  #quoted(): string {
    this.#i += 1; // the opening DQUOTE
    let out = '';
    while (this.#i < this.s.length) {
      const c = this.s[this.#i]!;
      if (c === '"') {
        this.#i += 1;
        return out;
      }
      if (c === '\\') {
        const next = this.s[this.#i + 1];
        if (next === undefined || !isQuotedPairChar(next)) throw new Malformed();
        out += next;
        this.#i += 2;
        continue;
      }
      if (!isQdText(c)) throw new Malformed();
      out += c;
      this.#i += 1;
    }
    throw new Malformed(); // unterminated
  }

  #spaces(): boolean {
    const start = this.#i;
    while (this.s[this.#i] === ' ') this.#i += 1;
    return this.#i > start;
  }

  #ows(): void {
    while (this.s[this.#i] === ' ' || this.s[this.#i] === '\t') this.#i += 1;
  }

  /** `#rule` lists allow empty elements: any run of commas and whitespace. */
  #skipListSeparators(): void {
    while (this.s[this.#i] === ',' || this.s[this.#i] === ' ' || this.s[this.#i] === '\t') this.#i += 1;
  }
}

/** qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
function isQdText(c: string): boolean {
  const n = c.charCodeAt(0);
  return n === 0x09 || n === 0x20 || n === 0x21 || (n >= 0x23 && n <= 0x5b) || (n >= 0x5d && n <= 0x7e) || (n >= 0x80 && n <= 0xff);
}

/** quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ) */
function isQuotedPairChar(c: string): boolean {
  const n = c.charCodeAt(0);
  return n === 0x09 || n === 0x20 || (n >= 0x21 && n <= 0x7e) || (n >= 0x80 && n <= 0xff);
}

/** RFC 6749 §3.3 scope-token = 1*( %x21 / %x23-5B / %x5D-7E ) */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/** A challenge naming more scopes than this, or longer ones, is refused as a whole (bounded links and pages). */
export const MAX_CHALLENGED_SCOPES = 32;
export const MAX_SCOPE_LENGTH = 128;

/**
 * `scopes` without duplicates when every one is an RFC 6749 §3.3 scope-token within the bounds
 * above, else none: what an upstream names is asked for, and shown on the consent page, exactly or not at all.
 */
export function scopeTokens(scopes: readonly string[]): string[] {
  return boundedScopeTokens(scopes) ?? [];
}

function boundedScopeTokens(scopes: readonly string[]): string[] | undefined {
  const unique = [...new Set(scopes.filter(Boolean))];
  return unique.length <= MAX_CHALLENGED_SCOPES && unique.every((s) => s.length <= MAX_SCOPE_LENGTH && SCOPE_TOKEN.test(s))
    ? unique
    : undefined;
}

/** What an RFC 6750 §3 Bearer challenge says. */
export interface BearerChallenge {
  error?: string;
  scope?: string[];
  resourceMetadata?: string;
  description?: string;
}

/**
 * The first Bearer challenge in `header`, if any. `scope` is the space-separated list split into
 * scope tokens (RFC 6749 §3.3), left out when any token breaks that grammar or the list is over
 * the bounds above: a scope the broker cannot repeat exactly is not asked for.
 */
export function bearerChallenge(header: string | null | undefined): BearerChallenge | undefined {
  const bearer = parseChallenges(header).find((c) => c.scheme === 'bearer');
  if (!bearer) return undefined;
  const p = bearer.params;
  const out: BearerChallenge = {};
  if (p.error !== undefined) out.error = p.error;
  if (p.error_description !== undefined) out.description = p.error_description;
  if (p.resource_metadata !== undefined) out.resourceMetadata = p.resource_metadata;
  if (p.scope !== undefined) {
    const scopes = boundedScopeTokens(scopeList(p.scope));
    if (scopes) out.scope = scopes;
  }
  return out;
}
