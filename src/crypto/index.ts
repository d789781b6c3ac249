export { constantTimeEqual } from './compare.js';
export { deriveKey } from './keys.js';
export { hmacSha256Base64, mac, verifyMac } from './mac.js';
export { randomBelow, randomHandle, randomId, randomText, sha256Hex, sha256Base64url } from './random.js';
export { Sealer, SealError, keyIdFor, type Sealed, type SealContext, type OpenFailure } from './seal.js';
