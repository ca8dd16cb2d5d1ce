/**
 * Summarizes V8 `.cpuprofile` files: where self time goes, by function and by package.
 * `npx tsx bench/cpu-profile-summary.ts <file.cpuprofile>... [--top 25] [--callers writeBuffer]`; also used by
 * `--profile` of both benchmarks (gateway-session.bench.ts, enrollment.bench.ts) through bench-harness.ts.
 */
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileSummary {
  /** Wall time covered by the profile, ms. */
  wallMs: number;
  /**
   * Wall time of the non-idle samples of the main thread, ms. V8 samples on a wall clock, so this
   * includes time the thread was runnable but preempted (on a saturated machine, a lot).
   */
  busyMs: number;
  functions: { name: string; selfMs: number; share: number }[];
  packages: { name: string; selfMs: number; share: number }[];
}

const ROOT = process.cwd();

/** Where a frame's code comes from: an npm package, Node itself, our libs/apps, or a V8 pseudo-frame. */
function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node (core)';
  const path = url.replace(/^file:\/\//, '');
  const nodeModules = path.lastIndexOf('/node_modules/');
  if (nodeModules >= 0) {
    const parts = path.slice(nodeModules + '/node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? path);
  }
  const local = relative(ROOT, path);
  const match = /^(libs|apps)\/([^/]+)\//.exec(local);
  return match ? `${match[1]}/${match[2]}` : local;
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  if (!url) return functionName || '(anonymous)';
  const path = url.replace(/^file:\/\//, '');
  const nodeModules = path.lastIndexOf('/node_modules/');
  const where = nodeModules >= 0 ? path.slice(nodeModules + '/node_modules/'.length) : relative(ROOT, path);
  return `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
}

export function summarizeProfile(profile: CpuProfile, top = 20): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  if (profile.samples && profile.timeDeltas) {
    // Each sample's time is the delta to the next sample.
    for (let i = 0; i < profile.samples.length; i++) {
      const id = profile.samples[i] as number;
      const delta = profile.timeDeltas[i + 1] ?? 0;
      selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, delta));
    }
  } else {
    const totalHits = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0) || 1;
    const usPerHit = (profile.endTime - profile.startTime) / totalHits;
    for (const node of profile.nodes) selfUs.set(node.id, (node.hitCount ?? 0) * usPerHit);
  }

  const functions = new Map<string, number>();
  const packages = new Map<string, number>();
  let idleUs = 0;
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    if (node.callFrame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const name = frameName(node);
    functions.set(name, (functions.get(name) ?? 0) + us);
    const pkg = packageOf(node.callFrame.url, node.callFrame.functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs;
  const rank = (entries: Map<string, number>) =>
    [...entries]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }));
  return {
    wallMs: (profile.endTime - profile.startTime) / 1000,
    busyMs: busyUs / 1000,
    functions: rank(functions),
    packages: rank(packages),
  };
}

/**
 * The call stacks (innermost `depth` frames above the match) that lead to functions whose name
 * contains `match`, ranked by the self time they account for.
 */
export function callersOf(
  profile: CpuProfile,
  match: string,
  depth = 6,
  top = 8,
): { stack: string; selfMs: number; share: number }[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < (profile.samples?.length ?? 0); i++) {
    const id = profile.samples?.[i] as number;
    selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, profile.timeDeltas?.[i + 1] ?? 0));
  }
  let busyUs = 0;
  const stacks = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node || node.callFrame.functionName === '(idle)') continue;
    busyUs += us;
    if (!frameName(node).includes(match)) continue;
    const frames: string[] = [];
    for (let at: number | undefined = id; at !== undefined && frames.length <= depth; at = parent.get(at)) {
      const frame = byId.get(at);
      if (!frame || frame.callFrame.functionName === '(root)') break;
      frames.push(frameName(frame));
    }
    const stack = frames.join('\n        ← ');
    stacks.set(stack, (stacks.get(stack) ?? 0) + us);
  }
  return [...stacks]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([stack, us]) => ({ stack, selfMs: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }));
}

export async function summarizeProfileFile(file: string, top = 20): Promise<ProfileSummary> {
  return summarizeProfile(JSON.parse(await readFile(file, 'utf8')) as CpuProfile, top);
}

export function formatProfileSummary(title: string, summary: ProfileSummary): string {
  const pct = (share: number) => `${(share * 100).toFixed(1).padStart(5)}%`;
  const lines = [
    `${title}: main thread not idle in ${(summary.busyMs / 1000).toFixed(1)} s of ${(summary.wallMs / 1000).toFixed(1)} s ` +
      `(${pct(summary.wallMs > 0 ? summary.busyMs / summary.wallMs : 0).trim()}; samples are wall-clock: a thread ` +
      `preempted inside a call, e.g. a socket write that woke another process, is counted there)`,
    '  self time by package (share of busy time):',
    ...summary.packages.map((entry) => `    ${pct(entry.share)}  ${entry.name}`),
    '  self time by function:',
    ...summary.functions.map((entry) => `    ${pct(entry.share)}  ${entry.name}`),
  ];
  return lines.join('\n');
}

async function cli(): Promise<void> {
  const args = process.argv.slice(2);
  const topIndex = args.indexOf('--top');
  const top = topIndex >= 0 ? Number(args.splice(topIndex, 2)[1]) : 25;
  const callersIndex = args.indexOf('--callers');
  const match = callersIndex >= 0 ? args.splice(callersIndex, 2)[1] : undefined;
  if (args.length === 0) {
    console.error(
      'usage: tsx bench/cpu-profile-summary.ts <file.cpuprofile>... [--top N] [--callers <function name part>]',
    );
    process.exit(2);
  }
  for (const file of args) {
    if (match === undefined) {
      console.log(formatProfileSummary(file, await summarizeProfileFile(file, top)), '\n');
      continue;
    }
    console.log(`${file}: stacks leading to "${match}" (share of busy time)`);
    const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
    for (const entry of callersOf(profile, match, 8, top))
      console.log(`  ${(entry.share * 100).toFixed(1).padStart(5)}%  ${entry.stack}`);
    console.log();
  }
}

if (process.argv[1] && /cpu-profile-summary\.ts$/.test(process.argv[1])) {
  cli().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
