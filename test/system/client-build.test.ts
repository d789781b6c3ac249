// `npm run build` of the helper mcp-connect-broker/client: runs tsc (a process per step) into a
// scratch dist/ and imports the package by its name from another process.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

describe('mcp-connect-broker/client ships on its own', () => {
  it('is built with declarations and exported as mcp-connect-broker/client (npm run build)', async () => {
    const { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } = await import('node:fs');
    const { spawnSync } = await import('node:child_process');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const root = new URL('../../', import.meta.url).pathname;
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    assert.deepEqual(pkg.exports['./client'], { types: './dist/client/index.d.ts', default: './dist/client/index.js' });
    const dir = mkdtempSync(join(tmpdir(), 'client-build-'));
    try {
      cpSync(join(root, 'package.json'), join(dir, 'package.json'));
      symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      // The same steps as the build script, into a scratch dist/.
      for (const step of (pkg.scripts.build as string).split(' && ')) {
        const args = step.replace(/^tsc /, '').split(' ');
        const run = spawnSync(process.execPath, [tsc, ...args, '--outDir', join(dir, 'dist')], { cwd: root, encoding: 'utf8' });
        assert.equal(run.status, 0, run.stdout + run.stderr);
      }
      const types = readFileSync(join(dir, 'dist/client/index.d.ts'), 'utf8');
      assert.match(types, /export declare function connectBroker\(options: BrokerOptions\): Broker;/);
      assert.match(types, /withToken\(ctx: ServerContext, request: TokenRequest/);
      const probe = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', "const m = await import('mcp-connect-broker/client'); console.log(typeof m.connectBroker)"],
        { cwd: dir, encoding: 'utf8' },
      );
      assert.equal(probe.stdout.trim(), 'function', probe.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
