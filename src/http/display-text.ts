/**
 * Control, format (bidi overrides and isolates, zero-width joiners, U+FEFF...), lone surrogate and
 * line/paragraph separator characters. None of them is needed in a name a person reads, and the
 * bidi ones can make a name read differently from what it is ("\u202Eevil" shown as "live").
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
const HAS_INVISIBLE = new RegExp(INVISIBLE.source, 'u');

/**
 * Text chosen by someone else (an MCP client's name, a tool's purpose line) made fit to show a
 * person: invisible characters removed, whitespace runs collapsed, at most `max` code points.
 * Undefined when nothing visible is left.
 */
export function displayText(value: string | undefined, max = 200): string | undefined {
  if (value === undefined) return undefined;
  const visible = value
    .replace(/[\t\n\v\f\r]/g, ' ')
    .replace(INVISIBLE, '')
    .replace(/\s+/g, ' ')
    .trim();
  return [...visible].slice(0, max).join('').trim() || undefined;
}

/**
 * Whether an identifier (an issuer, a subject, an upstream account id) carries any of those
 * characters. Identifiers are compared and stored as they are, so they are refused, never cleaned:
 * PostgreSQL cannot store U+0000 in text, and an altered id would name someone else.
 */
export function hasInvisibleCharacters(value: string): boolean {
  return HAS_INVISIBLE.test(value);
}
