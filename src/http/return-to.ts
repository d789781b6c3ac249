/**
 * Turns an untrusted "where to go after sign-in" value into a same-origin path, or `fallback`.
 * Scheme-relative (`//evil`), backslash (`/\evil`) and absolute URLs are all refused, so sign-in
 * can never be used as an open redirect.
 */
export function safeReturnPath(value: unknown, base: URL, fallback = '/connections'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 2048) return fallback;
  if (!value.startsWith('/') || value.startsWith('//') || value.includes('\\') || /[\u0000-\u001f\u007f]/.test(value)) return fallback;
  let url: URL;
  try {
    url = new URL(value, base);
  } catch {
    return fallback;
  }
  if (url.origin !== base.origin) return fallback;
  const path = url.pathname + url.search;
  // Normalisation can turn "/.//evil" into "//evil": never hand out anything scheme-relative.
  return path.startsWith('//') || path.startsWith('/\\') ? fallback : path;
}
