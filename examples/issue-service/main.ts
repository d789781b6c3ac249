// Runs the example issue service from the environment:
//   BROKER_URL SERVICE_ID SERVICE_SECRET STATE_KEY OIDC_ISSUER AUDIENCE PORT GITHUB_API_URL
// e.g. `tsx examples/issue-service/main.ts`.
import { startIssueService } from './service.js';

function need(name: string): string {
  const v = process.env[name];
  if (!v) {
    console.error(`issue-service: ${name} is required`);
    process.exit(2);
  }
  return v;
}

const stateKey = need('STATE_KEY');
if (Buffer.byteLength(stateKey) < 32) {
  console.error('issue-service: STATE_KEY must be at least 32 bytes');
  process.exit(2);
}
const port = process.env.PORT ? Number(process.env.PORT) : undefined;
if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port < 65536)) {
  console.error('issue-service: PORT must be a port number');
  process.exit(2);
}

const service = await startIssueService({
  brokerUrl: need('BROKER_URL'),
  serviceId: need('SERVICE_ID'),
  serviceSecret: need('SERVICE_SECRET'),
  stateKey,
  oidcIssuer: need('OIDC_ISSUER'),
  audience: need('AUDIENCE'),
  githubApiUrl: process.env.GITHUB_API_URL ?? 'https://api.github.com',
  ...(port !== undefined ? { port } : {}),
  log: (line) => console.error(`issue-service: ${line}`),
});
console.error(`issue-service: listening for ${service.url} on port ${service.port}`);
const stop = () => void service.close().then(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
