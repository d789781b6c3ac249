// Type tests, checked by `npm run typecheck` (the first step of npm test and npm run check), never
// run: a Principal comes only from a verified token or session, so a plain issuer/subject pair taken
// from input cannot open, save or list anyone's tokens. Each @ts-expect-error fails the type-check
// the day the line it guards compiles.
import { principalFromVerifiedClaims, type Principal } from '../../src/auth/principal.js';
import type { ConnectionService } from '../../src/connections/index.js';

export function opensOnlyForAVerifiedPrincipal(service: ConnectionService): void {
  const forged = { issuer: 'https://idp.example', subject: 'alice' };
  // @ts-expect-error a plain object is not a Principal: only a verified token or session makes one
  void service.open(forged, 'github');
  // @ts-expect-error nor may one be listed for it
  void service.list(forged);
  // @ts-expect-error nor is an object built by hand with the same fields
  const copied: Principal = { issuer: forged.issuer, subject: forged.subject };
  void copied;
  const verified = principalFromVerifiedClaims('https://idp.example', 'alice');
  void service.open(verified, 'github');
}
