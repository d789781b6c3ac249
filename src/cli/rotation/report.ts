/** What `npm run rotate-keys` did: rotate-keys.ts fills it in, rotation/messages.ts words it (both import it from here). */
export interface RotationCounts {
  resealed: number;
  /** Rows changed by someone else between read and write (a refresh, a new registration): they already use the current key. */
  skippedConcurrent: number;
  /** Rows sealed under a key that is no longer in the ring: they cannot be re-encrypted. */
  unreadable: number;
}

export interface RotationReport extends RotationCounts {
  currentKeyId: string;
  /** The counts above are the connections' (provider tokens); these, the client secrets of the broker's `auth: mcp` registrations. */
  clientSecrets: RotationCounts & { unreadableIssuers: string[] };
  /** Every key still sealing a row of any table the ring seals (connections and client secrets together), byte order. */
  keysInUse: Array<{ key_id: string; n: number }>;
  /** True only when no row of any of those tables is sealed under another key than the current one. */
  olderKeysRemovable: boolean;
}
