// Test helper: a user connects an `auth: mcp` upstream through the broker's pages and the upstream's
// own authorization server (test/support/mcp-auth-upstream.ts), as a person would in a browser.
import assert from 'node:assert/strict';
import type { Browser, Page } from './browser.js';
import { signIn, type Stack } from './stack.js';

export interface UpstreamProvider {
  /** The upstream's id: the provider id and the `/connections/<id>/connect` path. */
  id: string;
  displayName: string;
}

const TRACKER: UpstreamProvider = { id: 'tracker', displayName: 'Tracker' };

/** Signs `user` in to the broker, starts the upstream's connection from /connections and consents; returns the page after. */
export async function startUpstreamConnect(browser: Browser, stack: Stack, user: string, provider = TRACKER): Promise<Page> {
  await signIn(browser, stack, user);
  const list = await browser.open(`${stack.publicUrl}/connections`);
  const consent = await browser.submit(list, { match: new RegExp(`^/connections/${provider.id}/connect$`) });
  assert.equal(consent.status, 200, consent.html);
  assert.ok(consent.html.includes(`Connect ${provider.displayName}`), consent.html);
  return browser.submit(consent, { button: 'allow' });
}

/** The whole browser side: the broker's pages, then the upstream AS's sign-in (at `issuer`) as `upstreamLogin`. */
export async function connectUpstream(
  browser: Browser,
  stack: Stack,
  issuer: string,
  user: string,
  upstreamLogin: string,
  provider = TRACKER,
): Promise<Page> {
  const atUpstream = await startUpstreamConnect(browser, stack, user, provider);
  assert.ok(atUpstream.url.startsWith(issuer), `at the upstream AS ${issuer}: ${atUpstream.trail.join(' -> ')}`);
  assert.match(atUpstream.html, /Development sign-in/);
  const done = await browser.submit(atUpstream, { fields: { login: upstreamLogin } });
  return { ...done, trail: [...atUpstream.trail, ...done.trail] };
}
