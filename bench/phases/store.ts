// The scale of the store: lookups in SQLite files of 1,000 and BENCH_ROWS stored connections,
// through ConnectionService.open, the repository's find, and a bare prepared get.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { principalFromVerifiedClaims } from '../../src/auth/principal.js';
import { ConnectionService } from '../../src/connections/index.js';
import { Sealer } from '../../src/crypto/index.js';
import { openSqliteStore } from '../../src/store/index.js';
import { definePhase } from '../lib/phase.js';
import { LOOKUPS, MAX_ROWS, say, silent } from '../lib/settings.js';
import { round, summary, us } from '../lib/stats.js';

type Summary = ReturnType<typeof summary>;

export const store = definePhase({
  name: 'store',
  keys: ['storeScale'],
  async run({ stack, resources, report }) {
    const scale: Record<string, unknown> = {};
    const measured: Record<number, { find: Summary; open: Summary; raw: Summary }> = {};
    const issuer = 'http://127.0.0.1:49152';
    const sealer = new Sealer([stack.encryptionKey]);
    const plaintext = JSON.stringify({ accessToken: `gho_${randomBytes(18).toString('hex')}`, tokenType: 'bearer', scopes: ['repo'] });
    for (const n of [1000, MAX_ROWS]) {
      const path = join(resources.dir, `scale-${n}.db`);
      const seeded = openSqliteStore(path);
      const t0 = performance.now();
      const insert = seeded.db.prepare(
        `INSERT INTO connections (issuer, subject, provider, account_id, account_login, scopes, key_id, sealed_tokens, created_at, updated_at)
         VALUES (?, ?, 'github', ?, ?, 'repo', ?, ?, ?, ?)`,
      );
      const now = Date.now();
      seeded.db.transaction(() => {
        for (let i = 0; i < n; i++) {
          const subject = `user-${i}`;
          // One token, re-sealed per row: each row opens only under its own principal, like the real thing.
          const sealed = sealer.seal(plaintext, { issuer, subject, provider: 'github' });
          insert.run(issuer, subject, String(10_000_000 + i), `gh-user-${i}`, sealed.keyId, sealed.value, now, now);
        }
      })();
      const seedMs = performance.now() - t0;
      await seeded.close();
      // Lookups go through a freshly opened store, as a broker process would have it.
      const reopened = openSqliteStore(path);
      const service = new ConnectionService(reopened, sealer, silent);
      const pick = () => principalFromVerifiedClaims(issuer, `user-${Math.floor(Math.random() * n)}`);
      const find: number[] = [];
      const open: number[] = [];
      const raw: number[] = [];
      // The bare indexed lookup with a statement prepared once, to separate the index's own scaling
      // from the constant cost of ConnectionStore preparing its statement on every call.
      const prepared = reopened.db.prepare('SELECT * FROM connections WHERE issuer = ? AND subject = ? AND provider = ?');
      for (let i = 0; i < 2000; i++) await service.open(pick(), 'github'); // warm-up
      for (let i = 0; i < LOOKUPS; i++) {
        const p = pick();
        const q = pick();
        const r = pick();
        const a = performance.now();
        const row = await reopened.connections.find(p, 'github');
        const b = performance.now();
        const conn = await service.open(q, 'github');
        const c = performance.now();
        const bare = prepared.get(r.issuer, r.subject, 'github');
        const d = performance.now();
        if (!row || !conn || !bare) throw new Error('lookup missed a seeded row');
        find.push((b - a) * 1000);
        open.push((c - b) * 1000);
        raw.push((d - c) * 1000);
      }
      await reopened.close();
      measured[n] = { find: summary(find), open: summary(open), raw: summary(raw) };
      const micro = (x: Summary) => ({ p50: round(x.p50), p99: round(x.p99), mean: round(x.mean) });
      scale[n] = {
        seedSeconds: round(seedMs / 1000, 2),
        findMicroseconds: micro(measured[n]!.find),
        openMicroseconds: micro(measured[n]!.open),
        preparedGetMicroseconds: micro(measured[n]!.raw),
      };
      say(
        `store with ${n} rows (seeded in ${round(seedMs / 1000, 1)} s): find p50 ${us(measured[n]!.find.p50)} p99 ${us(measured[n]!.find.p99)}; ` +
          `open p50 ${us(measured[n]!.open.p50)} p99 ${us(measured[n]!.open.p99)}; prepared get p50 ${us(measured[n]!.raw.p50)} p99 ${us(measured[n]!.raw.p99)}`,
      );
      rmSync(path, { force: true });
      rmSync(`${path}-wal`, { force: true });
      rmSync(`${path}-shm`, { force: true });
    }
    const small = measured[1000]!;
    const big = measured[MAX_ROWS]!;
    const ratio = big.open.p50 / small.open.p50;
    scale.ratioOpenP50 = round(ratio);
    scale.ratioFindP50 = round(big.find.p50 / small.find.p50);
    scale.ratioOpenP99 = round(big.open.p99 / small.open.p99);
    scale.ratioPreparedGetP50 = round(big.raw.p50 / small.raw.p50);
    report.results.storeScale = scale;
    for (const [n, m] of [
      [1000, small],
      [MAX_ROWS, big],
    ] as const) {
      report.row({
        section: 'store',
        measure: `ConnectionService.open, ${n.toLocaleString('en')} rows`,
        value: `p50 ${us(m.open.p50)}, p99 ${us(m.open.p99)} (ConnectionStore.find p50 ${us(m.find.p50)}; bare prepared get p50 ${us(m.raw.p50)})`,
      });
    }
    report.row({
      section: 'store',
      measure: `${MAX_ROWS.toLocaleString('en')} vs 1,000 rows (open, p50)`,
      value: `${round(ratio, 2)}× (p99 ${round(big.open.p99 / small.open.p99, 2)}×; find p50 ${round(big.find.p50 / small.find.p50, 2)}×; bare prepared get p50 ${round(big.raw.p50 / small.raw.p50, 2)}×)`,
      target: '≤ 1.5×',
      met: ratio <= 1.5,
    });
  },
});
