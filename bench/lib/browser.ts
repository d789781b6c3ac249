// Browser timing for the completion measurements: a held repeat, the browser's trip through the
// IdP, our consent page and GitHub's authorize form, and how long after the provider callback the
// held repeat answers.
import { setTimeout as sleep } from 'node:timers/promises';
import { InterceptingBrowser, type Browser, type BrowserRequestInit, type Page } from '../../test/support/browser.js';
import type { StartedIdp } from '../../test/support/idp.js';
import { COMPLETION_SAMPLES } from './settings.js';
import { ms, round, summary } from './stats.js';
import { connectRequest, expectComplete, firstCall, repeatCall } from './wire.js';

/** A browser pinned to one broker process (like a load balancer would route it) that notes when the provider callback starts and finishes. */
class TimedBrowser extends InterceptingBrowser {
  callbackStartedAt = 0;
  callbackDoneAt = 0;

  constructor(
    private readonly publicOrigin: string,
    private readonly backendOrigin: string,
  ) {
    super();
  }

  protected override async intercept(u: URL, _init: BrowserRequestInit, send: (target?: string) => Promise<Response>): Promise<Response> {
    const target = u.origin === this.publicOrigin ? new URL(u.pathname + u.search, this.backendOrigin).href : undefined;
    const isCallback = u.pathname === '/connect/github/callback';
    if (isCallback) this.callbackStartedAt = performance.now();
    const res = await send(target);
    if (isCallback) this.callbackDoneAt = performance.now();
    return res;
  }
}

/** Signs in at the IdP and consents on our page, stopping at GitHub's authorize form. */
async function upToGitHub(browser: Browser, link: string, user: string): Promise<Page> {
  let page = await browser.open(link);
  if (/Development sign-in/.test(page.html)) page = await browser.submit(page, { fields: { login: user } });
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${page.html.slice(0, 300)}`);
  page = await browser.submit(page, { button: 'allow' });
  if (!/GitHub stand-in/.test(page.html)) throw new Error(`expected the GitHub authorize page, got ${page.status} ${page.url}`);
  return page;
}

export interface CompletionSamples {
  /** ms from the browser receiving the callback page to the held repeat returning its result. */
  afterDone: number[];
  /** ms from the browser sending the callback request to the held repeat returning its result. */
  afterStart: number[];
}

/**
 * What is held: `start` asks on behalf of `sub` (holding `token`) and returns the connect link and
 * `held`, which sends the held repeat and resolves once it answered for `sub` (throwing otherwise).
 */
export interface HeldFlow {
  start(token: string, sub: string): Promise<{ link: string; held: () => Promise<void> }>;
}

/** The MCP flow: `github_whoami` on `heldOn`, then its repeat with the requestState, held until it completes for `sub`. */
export const mcpFlow = (heldOn: string): HeldFlow => ({
  async start(token, sub) {
    const { link, requestState } = connectRequest(await firstCall(heldOn, token));
    return {
      link,
      held: async () => {
        const result = expectComplete(await repeatCall(heldOn, token, requestState), 'held repeat');
        if (result.structuredContent.login !== sub) throw new Error(`held repeat answered for ${result.structuredContent.login}`);
      },
    };
  },
});

/**
 * COMPLETION_SAMPLES (after 2 warm-up) of: a first call on `heldOn` (or `flow`'s first request), the browser part up to GitHub's
 * authorize form on `callbackOn`, the repeat sent to `heldOn` and held, and 150 ms later the
 * authorization submitted, so the provider callback lands on `callbackOn`.
 */
export async function completionSamples(
  idp: StartedIdp,
  publicUrl: string,
  heldOn: string,
  callbackOn: string,
  subPrefix: string,
  flow: HeldFlow = mcpFlow(heldOn),
  /** The access token for `sub` (the exchange's subject tokens carry the service's audience). */
  mint: (sub: string) => Promise<string> = (sub) => idp.mintAccessToken({ sub, expiresInSeconds: 3600 }),
): Promise<CompletionSamples> {
  const afterDone: number[] = [];
  const afterStart: number[] = [];
  for (let i = 0; i < COMPLETION_SAMPLES + 2; i++) {
    const sub = `${subPrefix}-${i}`;
    const token = await mint(sub);
    const { link, held: hold } = await flow.start(token, sub);
    const browser = new TimedBrowser(publicUrl, callbackOn);
    const authorize = await upToGitHub(browser, link, sub);
    let answeredAt = 0;
    const held = hold().then(() => {
      answeredAt = performance.now();
    });
    await sleep(150);
    if (answeredAt) throw new Error('the repeat was not held');
    const done = await browser.submit(authorize, { button: 'authorize', fields: { login: sub } });
    if (done.status !== 200 || !/Connected/.test(done.html)) throw new Error(`callback page: ${done.status}`);
    await held;
    if (i < 2) continue; // warm-up
    afterDone.push(answeredAt - browser.callbackDoneAt);
    afterStart.push(answeredAt - browser.callbackStartedAt);
  }
  return { afterDone, afterStart };
}

/** The results.json record, the summary and the row text of one completion measurement. */
export function completionFigures({ afterDone, afterStart }: CompletionSamples) {
  const s = summary(afterDone);
  const st = summary(afterStart);
  return {
    s,
    record: {
      fromCallbackFinished: { ...s, p50: round(s.p50), p99: round(s.p99), mean: round(s.mean), max: round(s.max) },
      fromCallbackStarted: { p50: round(st.p50), p99: round(st.p99) },
    },
    value: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)} after the callback page arrived (${ms(st.p50)} / ${ms(st.p99)} after it was requested)`,
  };
}
