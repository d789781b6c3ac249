import { runAdmin } from './admin/run.js';

export { runAdmin, EXIT, type AdminIo } from './admin/run.js';

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  // Piped into `head`: the reader has all it wants.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  process.exitCode = await runAdmin(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr });
}
