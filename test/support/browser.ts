// The cookie-keeping HTTP browser lives with the development tools (npm run demo uses it too).
import { Browser } from '../../src/dev/http-browser.js';

export { Browser, formSubmission, parseForms, textOf, type FormChoice, type FormSpec, type Page } from '../../src/dev/http-browser.js';

/** What a Browser request carries besides its URL. */
export type BrowserRequestInit = NonNullable<Parameters<Browser['request']>[1]>;

/**
 * A Browser whose every request passes through `intercept`, which may send it elsewhere (one
 * instance behind a proxy) and note when it went out or was answered: the scale-out suite steers
 * with it, the completion bench times the provider callback with it.
 */
export abstract class InterceptingBrowser extends Browser {
  override request(url: string, init: BrowserRequestInit = {}): Promise<Response> {
    return this.intercept(new URL(url), init, (target = url) => super.request(target, init));
  }

  /** `send()` makes the request as asked; `send(target)` makes it to `target` instead. */
  protected abstract intercept(url: URL, init: BrowserRequestInit, send: (target?: string) => Promise<Response>): Promise<Response>;
}
