// `npm start`: runs the compiled broker from dist/, or says in one line how to build it. Plain
// JavaScript so that a production install (no TypeScript, no tsx) can run it.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('dist/main.js is missing: run `npm run build` first (npm start runs the compiled broker from dist/)\n');
  process.exit(1);
}
await import(entry.href);
