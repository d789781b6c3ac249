// The GitHub stand-in for `npm run bench`, in its own process: the sandbox GitHub (the same code as
// test/support/github-standin.ts wraps) over a SQLite file the bench seeded with users and tokens,
// so `GET /api/v3/user` answers at once for every benchmark user without an OAuth dance each.
import express from 'express';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createSandboxGitHub } from '../../src/dev/sandbox-github/index.js';
import { openDevTables } from '../../src/dev/store/index.js';
import { openSqliteStore } from '../../src/store/index.js';

const db = openSqliteStore(process.env.SANDBOX_DB!);
const store = openDevTables(db).sandboxGitHub;
const app = express();
app.disable('x-powered-by');
app.set('etag', false);
const server: Server = await new Promise((resolve, reject) => {
  const s = app.listen(0, '127.0.0.1', (err?: Error) => (err ? reject(err) : resolve(s)));
});
server.keepAliveTimeout = 65_000;
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const sandbox = createSandboxGitHub({
  store,
  clients: [{ clientId: process.env.GITHUB_CLIENT_ID!, clientSecret: process.env.GITHUB_CLIENT_SECRET! }],
  publicBase: base,
  siteName: 'GitHub stand-in',
});
app.use(sandbox.router);
process.stderr.write(`${JSON.stringify({ event: 'listening', url: base, webUrl: sandbox.webUrl, apiUrl: sandbox.apiUrl })}\n`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => void db.close().then(() => process.exit(0)));
    server.closeAllConnections();
  });
}
