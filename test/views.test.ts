// Render check for the ejs views: escaping, CSP-safety (no scripts/inline styles),
// labelled controls, one <h1> per page, and the expected forms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import ejs from 'ejs';

const viewsDir = fileURLToPath(new URL('../views/', import.meta.url));

const HOSTILE = '<script>alert(1)</script>';
const HOSTILE_ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt;';
const ATTR_BREAK = '"><img src=x onerror=alert(1)>';

const base = {
  productName: `Broker ${HOSTILE}`,
  title: `Title ${HOSTILE}`,
  viewer: { name: `Mallory ${HOSTILE}`, subject: `sub-${HOSTILE}`, issuer: 'https://idp.example' },
  csrfToken: `csrf${ATTR_BREAK}`,
};

type Locals = Record<string, unknown>;

const pages: Record<string, Locals> = {
  approval: {
    ...base,
    id: `apr${ATTR_BREAK}`,
    formAction: `/approvals/apr${ATTR_BREAK}`,
    status: 'denied',
    reason: `no ${HOSTILE}`,
    applies: true,
    isRequester: false,
    canDecide: true,
    quorum: 2,
    approvals: 1,
    tool: `tool${HOSTILE}`,
    upstream: `up${HOSTILE}`,
    clientName: `Claude ${HOSTILE}`,
    provider: 'github',
    account: `octo${HOSTILE}`,
    rule: `rule${HOSTILE}`,
    service: `svc${HOSTILE}`,
    requester: { issuer: 'https://idp.example', subject: `sub${HOSTILE}`, name: `Rita ${HOSTILE}`, email: `rita${ATTR_BREAK}` },
    args: JSON.stringify({ repo: HOSTILE, attr: ATTR_BREAK }, null, 2),
    createdAt: '2025-01-02T03:04:05.000Z',
    expiresAt: '2025-01-02T03:19:05.000Z',
    decisions: [{ name: `Mia ${HOSTILE}`, subject: 'mia', verdict: 'deny', reason: `because ${HOSTILE}`, at: '2025-01-02T03:05:05.000Z' }],
    maxReason: 500,
  },
  approvals: {
    ...base,
    toDecide: [
      {
        id: 'a',
        href: `/approvals/a${ATTR_BREAK}`,
        tool: `tool${HOSTILE}`,
        upstream: '',
        clientName: HOSTILE,
        requester: HOSTILE,
        account: HOSTILE,
        provider: 'github',
        status: 'pending',
        createdAt: '2025-01-02T03:04:05.000Z',
      },
    ],
    mine: [
      {
        id: 'b',
        href: '/approvals/b',
        tool: HOSTILE,
        upstream: '',
        clientName: '',
        requester: 'me',
        account: '',
        provider: '',
        status: 'used',
        createdAt: '2025-01-02T03:04:05.000Z',
      },
    ],
  },
  consent: {
    ...base,
    provider: { id: 'github', displayName: `GitHub ${HOSTILE}` },
    scopes: [
      { name: `repo${ATTR_BREAK}`, description: `Read and write your repositories ${HOSTILE}` },
      { name: 'read:user', description: 'Read your profile' },
    ],
    handle: `h${ATTR_BREAK}`,
    formAction: `/connect/github${ATTR_BREAK}`,
  },
  'wrong-account': {
    ...base,
    providerName: `GitHub ${HOSTILE}`,
    switchAction: `/auth/switch${ATTR_BREAK}`,
    returnTo: `/connect/github?x=${ATTR_BREAK}`,
  },
  connected: { ...base, providerName: `GitHub ${HOSTILE}`, login: `octo${HOSTILE}`, sandbox: true },
  home: { ...base, providers: [`GitHub ${HOSTILE}`, 'GitLab'], mcpUrl: `http://127.0.0.1:3000/mcp${ATTR_BREAK}` },
  message: {
    ...base,
    heading: `Link expired ${HOSTILE}`,
    message: `Ask again ${HOSTILE}`,
    detail: `ref ${HOSTILE}`,
    action: { href: `/connections${ATTR_BREAK}`, label: `Go ${HOSTILE}` },
  },
  connections: {
    ...base,
    connections: [
      {
        providerId: 'github',
        providerName: `GitHub ${HOSTILE}`,
        login: `octo${HOSTILE}`,
        scopes: ['repo', HOSTILE],
        connectedAt: '2025-01-02T03:04:05.000Z',
        lastUsedAt: null,
      },
      {
        providerId: 'gitlab',
        providerName: 'GitLab',
        login: 'octo',
        scopes: [],
        connectedAt: '2025-01-02T03:04:05.000Z',
        lastUsedAt: '2025-02-03T04:05:06.000Z',
      },
    ],
    available: [
      { id: 'github', displayName: 'GitHub', connected: true },
      { id: 'gitlab', displayName: 'GitLab', connected: true },
      { id: 'bitbucket', displayName: `Bitbucket ${HOSTILE}`, connected: false },
    ],
  },
};

// Minimal variants: optional locals absent (no viewer, no csrf, no detail/action, empty lists).
const minimal: Record<string, Locals> = {
  message: { productName: 'Broker', title: 'Signed out', heading: 'Signed out', message: 'Bye.' },
  connected: { productName: 'Broker', title: 'Connected', providerName: 'GitHub', login: 'octo' },
  home: { productName: 'Broker', title: 'Welcome', providers: [], mcpUrl: 'http://127.0.0.1:3000/mcp' },
  connections: { productName: 'Broker', title: 'Connections', viewer: base.viewer, csrfToken: 't', connections: [], available: [] },
  consent: {
    productName: 'Broker',
    title: 'Connect',
    viewer: base.viewer,
    csrfToken: 't',
    provider: { id: 'github', displayName: 'GitHub' },
    scopes: [],
    handle: 'h',
    formAction: '/connect/github',
  },
  'wrong-account': {
    productName: 'Broker',
    title: 'Wrong account',
    viewer: base.viewer,
    csrfToken: 't',
    providerName: 'GitHub',
    switchAction: '/auth/switch',
    returnTo: '/x',
  },
};

function render(name: string, locals: Locals): Promise<string> {
  return ejs.renderFile(path.join(viewsDir, `${name}.ejs`), locals);
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}\\s*=\\s*"([^"]*)"`, 'i').exec(tag);
  return m?.[1];
}

function assertCommon(html: string, label: string): void {
  assert.ok(html.startsWith('<!doctype html>'), `${label}: doctype`);
  assert.match(html, /<html lang="en">/, `${label}: lang`);
  assert.match(html, /<meta charset="utf-8">/i, `${label}: charset`);
  assert.match(html, /<meta name="viewport" content="width=device-width, initial-scale=1">/, `${label}: viewport`);
  assert.match(html, /<link rel="stylesheet" href="\/static\/style\.css">/, `${label}: stylesheet`);
  assert.equal((html.match(/<main[\s>]/g) ?? []).length, 1, `${label}: one <main>`);
  assert.equal((html.match(/<h1[\s>]/g) ?? []).length, 1, `${label}: exactly one <h1>`);
  assert.ok(!/<script/i.test(html), `${label}: no <script`);
  assert.ok(!/<style/i.test(html), `${label}: no <style`);
  assert.ok(!/style=/i.test(html), `${label}: no style=`);
  assert.ok(!/<img/i.test(html), `${label}: attribute break-out must not create elements`);
  assert.match(html, /<\/main>\s*<\/body>\s*<\/html>\s*$/, `${label}: closing tags`);

  // Every visible <input>, and every <select>/<textarea>, needs a matching <label>.
  const controls = [...html.matchAll(/<(input|select|textarea)\b[^>]*>/gi)];
  for (const c of controls) {
    const tag = c[0];
    if (c[1]?.toLowerCase() === 'input' && attr(tag, 'type')?.toLowerCase() === 'hidden') continue;
    const id = attr(tag, 'id');
    const before = html.slice(0, c.index);
    const wrapped = before.lastIndexOf('<label') > before.lastIndexOf('</label>');
    const forLabel = id !== undefined && html.includes(`<label for="${id}"`);
    assert.ok(wrapped || forLabel, `${label}: control without label: ${tag}`);
  }

  // Every POST form carries the csrf field; every button has a non-empty name.
  const forms = [...html.matchAll(/<form\b[^>]*>([\s\S]*?)<\/form>/gi)];
  for (const f of forms) {
    assert.equal(attr(f[0], 'method'), 'post', `${label}: forms use POST`);
    assert.match(f[1] ?? '', /<input type="hidden" name="csrf" value="[^"]*">/, `${label}: form has csrf`);
  }
  for (const b of html.matchAll(/<button\b[^>]*>([\s\S]*?)<\/button>/gi)) {
    assert.ok((b[1] ?? '').replace(/<[^>]*>/g, '').trim().length > 0, `${label}: button has text`);
  }
}

for (const [name, locals] of Object.entries(pages)) {
  test(`${name}.ejs renders safely with hostile locals`, async () => {
    const html = await render(name, locals);
    assertCommon(html, name);
    assert.ok(html.includes(HOSTILE_ESCAPED), `${name}: hostile string appears escaped`);
    assert.ok(!html.includes(HOSTILE), `${name}: hostile string never raw`);
    assert.ok(!html.includes(ATTR_BREAK), `${name}: attribute break-out never raw`);
    // header: viewer name + logout form
    assert.match(html, /Signed in as <strong>Mallory &lt;script&gt;/);
    assert.match(html, /<form method="post" action="\/auth\/logout"/);
  });
}

for (const [name, locals] of Object.entries(minimal)) {
  test(`${name}.ejs renders with only required locals`, async () => {
    const html = await render(name, locals);
    assertCommon(html, `${name} (minimal)`);
  });
}

test('head shows no session block without a viewer', async () => {
  const html = await render('message', minimal.message ?? {});
  assert.ok(!html.includes('Signed in as'));
  assert.ok(!html.includes('/auth/logout'));
  assert.match(html, /<title>Signed out · Broker<\/title>/);
});

test('consent page has the form, hidden fields and both decisions', async () => {
  const html = await render('consent', pages.consent ?? {});
  assert.match(html, /<h1>Connect your GitHub &lt;script&gt;alert\(1\)&lt;\/script&gt; account<\/h1>/);
  assert.match(html, /<form method="post" action="\/connect\/github&#34;&gt;&lt;img/);
  assert.match(html, /<input type="hidden" name="handle" value="h&#34;&gt;/);
  assert.match(html, /<button type="submit" name="decision" value="allow" class="button primary">Continue to GitHub /);
  assert.match(html, /<button type="submit" name="decision" value="cancel" class="button secondary">Cancel<\/button>/);
  assert.ok(html.includes('sub-&lt;script&gt;'), 'shows subject');
  assert.ok(html.includes('Read and write your repositories'), 'lists scope descriptions');
  assert.ok(html.includes('never sees it'), 'explains token stays server-side');
});

test('consent page says why a tool asked, escaped and isolated, and nothing of the kind for a page-made link', async () => {
  const asked = await render('consent', {
    ...pages.consent,
    clientName: `Claude ${HOSTILE}`,
    askedFor: `create the issue in acme/widgets ${HOSTILE}`,
  });
  assert.match(asked, /Your AI assistant <strong><bdi>Claude &lt;script&gt;alert\(1\)&lt;\/script&gt;<\/bdi><\/strong>/);
  assert.match(
    asked,
    /<p>It asks so that it can <strong><bdi>create the issue in acme\/widgets &lt;script&gt;alert\(1\)&lt;\/script&gt;<\/bdi><\/strong>\.<\/p>/,
  );
  const nameless = await render('consent', { ...pages.consent, askedFor: 'see which GitHub account is yours' });
  assert.match(nameless, /Your AI assistant has asked to act on your GitHub/);
  assert.doesNotMatch(nameless, /You asked to connect/);
  const fromPage = await render('consent', pages.consent ?? {});
  assert.doesNotMatch(fromPage, /It asks so that it can/);
  assert.match(fromPage, /You asked to connect your GitHub/);
});

test('consent page names every server and service the configuration sends the token to, escaped', async () => {
  const html = await render('consent', {
    ...pages.consent,
    recipients: { upstreams: [`GitHub MCP ${HOSTILE}`], services: ['Issue Bot', 'Release Bot'] },
    serviceName: 'Issue Bot',
  });
  const text = html.replace(/<[^>]+>/g, '').replace(/\s+/g, ' ');
  assert.match(text, /handed to Issue Bot whenever it acts for you: that service receives it, your AI assistant never does\./);
  assert.match(
    text,
    /This server also sends it to: GitHub MCP &lt;script&gt;alert\(1\)&lt;\/script&gt;, when you use its tools Release Bot, when it acts for you/,
  );
  // The asking service has its own sentence, and is not listed again.
  assert.doesNotMatch(text.slice(text.indexOf('also sends it to')), /Issue Bot/);
  const forAssistant = await render('consent', { ...pages.consent, recipients: { upstreams: ['GitHub MCP'], services: [] } });
  assert.match(
    forAssistant.replace(/<[^>]+>/g, ''),
    /kept on this server, and your AI assistant never sees it\.\s*This server sends it to:\s*GitHub MCP, when you use its tools/,
  );
  assert.doesNotMatch(forAssistant, /stays on this server/);
  const alone = await render('consent', pages.consent ?? {});
  assert.match(alone, /The access token stays on this server: your assistant never sees it\./);
});

test('wrong-account page offers switch form and does not leak target', async () => {
  const html = await render('wrong-account', pages['wrong-account'] ?? {});
  assert.match(html, /<h1>This link is for a different account<\/h1>/);
  assert.match(html, /<form method="post" action="\/auth\/switch&#34;/);
  assert.match(html, /<input type="hidden" name="returnTo" value="\/connect\/github\?x=&#34;/);
  assert.ok(html.includes('Nothing was sent to GitHub &lt;script&gt;'));
});

test('connected page', async () => {
  const html = await render('connected', pages.connected ?? {});
  assert.match(html, /<h1>Connected as @octo&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/h1>/);
  assert.match(html, /<a class="button secondary" href="\/connections">Manage connected accounts<\/a>/);
  assert.ok(html.includes('Sandbox'));
  const plain = await render('connected', minimal.connected ?? {});
  assert.ok(!plain.includes('Sandbox'));
});

test('message page optional parts', async () => {
  const full = await render('message', pages.message ?? {});
  assert.match(full, /class="muted small">ref &lt;script&gt;/);
  assert.match(full, /<a class="button primary" href="\/connections&#34;&gt;&lt;img/);
  const bare = await render('message', minimal.message ?? {});
  assert.ok(!bare.includes('muted small'));
  // Without an action of its own, a page still offers a way on: the start page to anyone, the
  // accounts page to a signed-in person ("Link not found", "Page not found", "Unknown provider").
  assert.match(bare, /<a class="button primary" href="\/">Go to the start page<\/a>/);
  const signedIn = await render('message', { ...minimal.message, viewer: base.viewer, csrfToken: 't' });
  assert.match(signedIn, /<a class="button primary" href="\/connections">See your connected accounts<\/a>/);
  assert.doesNotMatch(signedIn, /Go to the start page/);
});

test('connections page lists rows, dates, disconnect and connect forms', async () => {
  const html = await render('connections', pages.connections ?? {});
  // Disconnect leads to a confirmation page; nothing on this page disconnects in one click.
  assert.match(html, /href="\/connections\/github\/disconnect"/);
  assert.match(html, /href="\/connections\/gitlab\/disconnect"/);
  assert.doesNotMatch(html, /action="\/connections\/[^"]+\/disconnect"/);
  assert.match(html, /Disconnect<span class="visually-hidden"> GitHub &lt;script&gt;/);
  // Dates: UTC as written by the server (in the title too), for the page's script to show in the reader's zone.
  assert.ok(
    html.includes(
      `<time datetime="2025-01-02T03:04:05.000Z" title="${new Date('2025-01-02T03:04:05.000Z').toUTCString()}" data-local>2025-01-02 03:04 UTC</time>`,
    ),
  );
  assert.ok(html.includes(new Date('2025-02-03T04:05:06.000Z').toUTCString()));
  assert.match(html, />never</);
  assert.match(html, /action="\/connections\/bitbucket\/connect"/);
  assert.ok(!html.includes('/connections/github/connect'), 'connected providers are not offered again');
  assert.match(html, /Connect Bitbucket &lt;script&gt;/);
  const empty = await render('connections', minimal.connections ?? {});
  assert.ok(empty.includes('No accounts are connected right now.'));
  assert.ok(!empty.includes('not connected any accounts'), 'no "yet": the person may have disconnected one');
  assert.ok(!empty.includes('Connect another account'));
});

test('templates never use unescaped output except include()', () => {
  const files = [
    'partials/head',
    'partials/foot',
    ...readdirSync(viewsDir)
      .filter((f) => f.endsWith('.ejs'))
      .map((f) => f.slice(0, -4)),
  ];
  for (const f of files) {
    const src = readFileSync(path.join(viewsDir, `${f}.ejs`), 'utf8');
    for (const m of src.matchAll(/<%-(.*?)%>/g)) {
      assert.match(
        m[1] ?? '',
        /^\s*include\('partials\/(head|foot|local-time)'(, \{ at: [\w.]+ \})?\)\s*$/,
        `${f}.ejs: raw output ${m[0]}`,
      );
    }
    assert.ok(!/style=|<style/i.test(src), `${f}.ejs: no inline style`);
    // A script only as a static file of ours with the response's nonce (never inline).
    for (const tag of src.matchAll(/<script\b.*?defer>|<script\b(?![^\n]*defer>)/gi))
      assert.match(tag[0], /^<script src="\/static\/[\w-]+\.js" nonce="<%= scriptNonce %>" defer>$/, `${f}.ejs: ${tag[0]}`);
    assert.equal((src.match(/<script\b/gi) ?? []).length, (src.match(/ defer><\/script>/g) ?? []).length, `${f}.ejs: no inline script`);
  }
});

test('the start page says what this is and offers sign-in, or the accounts page to a signed-in person', async () => {
  const anonymous = await render('home', {
    productName: 'Broker',
    title: 'Welcome',
    providers: ['GitHub', 'GitLab', 'Jira'],
    mcpUrl: 'http://127.0.0.1:3000/mcp',
  });
  assert.match(anonymous, /your accounts at <strong>GitHub<\/strong>, <strong>GitLab<\/strong> and <strong>Jira<\/strong>\./);
  assert.match(anonymous, /<a class="button primary" href="\/auth\/login\?returnTo=%2Fconnections">Sign in<\/a>/);
  assert.match(anonymous, /<a class="button secondary" href="\/connections">Your connected accounts<\/a>/);
  assert.match(anonymous, /<code>http:\/\/127\.0\.0\.1:3000\/mcp<\/code>/);
  const signedIn = await render('home', { ...minimal.home, viewer: { name: 'alice', subject: 'alice' }, csrfToken: 't' });
  assert.match(signedIn, /<a class="button primary" href="\/connections">Your connected accounts<\/a>/);
  assert.doesNotMatch(signedIn, />Sign in</);
});

test('consent page names the viewer once when the subject is the name, and its permissions heading needs no "it"', async () => {
  const same = await render('consent', { ...minimal.consent, viewer: { name: 'alice', subject: 'alice', issuer: 'https://idp.example' } });
  assert.match(same, /You are signed in here as <strong><bdi>alice<\/bdi><\/strong>\./);
  assert.doesNotMatch(same, /\(alice\)/);
  assert.match(same, /<h2 id="scopes-heading">Permissions asked for<\/h2>/);
  assert.doesNotMatch(same, /It is asking/);
  const other = await render('consent', {
    ...minimal.consent,
    viewer: { name: 'Alice Liddell', subject: 'u-123', issuer: 'https://idp.example' },
  });
  assert.match(other, /Alice Liddell<\/bdi><\/strong>\s*<span class="muted small">\(u-123\)<\/span>\./);
});
