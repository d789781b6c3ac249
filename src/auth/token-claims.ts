/**
 * How the broker reads a verified token's claims, in one place for every path that takes a
 * principal or scopes from one (the `/mcp` bearer check, the token exchange's subject token, the
 * page sign-in's ID token), so that the same person is the same principal on each of them.
 */
import { scopeList } from '../providers/scopes.js';

/**
 * Claims that may name a principal's subject. `sub` is OpenID Connect's; Microsoft Entra ID's `sub`
 * is pairwise per application (the page client's ID token and the API's access token disagree),
 * while its `oid` is the user's object id, the same in both (with the `profile` scope), and as
 * immutable. Mutable claims (`email`, `preferred_username`, `upn`) are not offered: a renamed or
 * recycled address would hand one person's connections to another.
 */
export const SUBJECT_CLAIMS = ['sub', 'oid'] as const;
export type SubjectClaim = (typeof SUBJECT_CLAIMS)[number];

/** The `MCP_ACCESS_TOKEN_TYPES` entry that stands for a token without a `typ` header (Okta's custom authorization servers). */
export const UNTYPED = 'none';

/**
 * Claims only ID tokens carry (OpenID Connect Core 3.1.3.6 and 3.3.2.11, FAPI's `s_hash`): a JWT with
 * any of them is an ID token, whatever its `typ` says or does not say.
 */
export const ID_TOKEN_CLAIMS = ['nonce', 'at_hash', 'c_hash', 's_hash'] as const;

/** The subject `claim` names in verified `claims`: a non-empty string, else undefined (the token names no one). */
export function subjectOf(claims: Record<string, unknown>, claim: SubjectClaim): string | undefined {
  const value = claims[claim];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The scopes a verified access token grants: `scope` (RFC 9068 and RFC 8693: one space-separated
 * string), or, only where `scope` is absent, `scp` — a space-separated string (Entra ID) or an array
 * of strings (Okta). A claim of any other shape grants nothing.
 */
export function tokenScopes(claims: Record<string, unknown>): string[] {
  const raw = claims.scope !== undefined ? claims.scope : claims.scp;
  if (typeof raw === 'string') return scopeList(raw);
  if (Array.isArray(raw) && raw.every((s): s is string => typeof s === 'string')) return raw.filter(Boolean);
  return [];
}
