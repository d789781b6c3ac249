// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time by function and by package/file.
// Usage: node --import tsx bench/profile-summary.ts bench/profiles/<file>.cpuprofile [top=25]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

const file = process.argv[2];
if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [top]');
const top = Number(process.argv[3] ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
// Self time per node from samples × deltas (more exact than hitCount × interval).
const self = new Map<number, number>();
const samples = profile.samples ?? [];
const deltas = profile.timeDeltas ?? [];
for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));
const total = [...self.values()].reduce((a, b) => a + b, 0);

function where(url: string): string {
  if (!url) return '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url;
  const src = /\/(src|bench|test)\/(.*)$/.exec(url);
  return src ? `${src[1]}/${src[2]}` : url;
}

const byFunction = new Map<string, number>();
const byPlace = new Map<string, number>();
for (const [id, t] of self) {
  const n = byId.get(id)!;
  const name = `${n.callFrame.functionName || '(anonymous)'}  ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + t);
  const place = where(n.callFrame.url);
  byPlace.set(place, (byPlace.get(place) ?? 0) + t);
}
const show = (title: string, m: Map<string, number>) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, t] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
    process.stdout.write(`${((t / total) * 100).toFixed(1).padStart(5)} %  ${(t / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
};
process.stdout.write(`${file}: ${(total / 1e6).toFixed(1)} s sampled\n`);
show('self time by package / file', byPlace);
show('self time by function', byFunction);
