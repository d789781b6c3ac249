/**
 * An `aud` identifier that is no URL: what an identity provider may write instead of a resource URL,
 * such as an Entra ID application id (a GUID) or an `api://…` Application ID URI. Visible ASCII,
 * at most 255 characters, starting with a letter or digit; no quotes, backslashes or commas (the
 * configuration lists are comma-separated), and never an http(s) URL, which is parsed as one.
 */
export function isAudienceIdentifier(value: string): boolean {
  return /^[A-Za-z0-9][\x21-\x7e]{0,254}$/.test(value) && !/["\\,]/.test(value) && !/^https?:/i.test(value);
}
