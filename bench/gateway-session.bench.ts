/**
 * Gateway benchmark (`npm run bench:gateway [-- --duration 10 --rounds 3 --profile]`), not a test.
 *
 * Authenticated GET /api/session and GET /api/members through gateway → gRPC → PostgreSQL, every
 * service in its own process as in production (`node --import tsx apps/<svc>/src/main.ts`,
 * NODE_ENV=production), against a bare Fastify hello-world measured in the same run. Self-contained:
 * its own database, NATS namespace, OpenID provider (JWKS over HTTP, in this process) and SMTP sink;
 * everything is stopped and dropped at the end, also on failure and Ctrl-C.
 *
 * Options (flag or environment variable):
 *   --duration N     BENCH_DURATION     seconds of each measured run (10)
 *   --warmup N       BENCH_WARMUP       seconds of warm-up before each measured run (3), and twice that
 *                                      for every scenario once before the first round
 *   --rounds N       BENCH_ROUNDS       rounds; each runs every scenario once, order rotated (3)
 *   --connections N  BENCH_CONNECTIONS  concurrent connections (64)
 *   --users N        BENCH_USERS        users (all members of one organization) whose tokens the requests cycle through (64)
 *   --quiet N        BENCH_QUIET        before each run, wait up to N seconds until processes outside the
 *                                      benchmark (other jobs on a shared machine) use < 25% of a core (30; 0: don't)
 *   --profile        BENCH_PROFILE=1    afterwards, one extra run per authenticated scenario with V8 CPU
 *                                      profiles of gateway, identity and billing (tmp/bench-profiles/)
 *
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error,
 * including a single non-2xx response, 130 when interrupted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { connect, createServer, type AddressInfo } from 'node:net';
import { availableParallelism, loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import autocannon, {
  type AutocannonInstance,
  type AutocannonRequest,
  type AutocannonResult,
} from 'autocannon';
import { Client } from 'pg';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase } from '@sts/testing/postgres';
import { startSmtpSink } from '@sts/testing/smtp-sink';
import { formatProfileSummary, summarizeProfileFile } from './cpu-profile-summary';

const ROOT = resolve(__dirname, '..');
const AGENT = pathToFileURL(join(ROOT, 'bench', 'child-agent.ts')).href;
const TARGET_RPS = 3000;
const TARGET_P99_MS = 30;
const CLOCK_TICKS_PER_SECOND = 100;

// --- options -------------------------------------------------------------------------------------

interface Options {
  durationS: number;
  warmupS: number;
  rounds: number;
  connections: number;
  users: number;
  quietS: number;
  profile: boolean;
}

function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match?.[1]) throw new Error(`unexpected argument ${arg}`);
    if (match[2] !== undefined) flags.set(match[1], match[2]);
    else if (match[1] === 'profile') flags.set('profile', '1');
    else flags.set(match[1], argv[++i] ?? '');
  }
  const known = ['duration', 'warmup', 'rounds', 'connections', 'users', 'quiet', 'profile'];
  const unknown = [...flags.keys()].filter((flag) => !known.includes(flag));
  if (unknown.length > 0) throw new Error(`unknown option --${unknown.join(', --')}`);
  const integer = (flag: string, variable: string, fallback: number, min: number) => {
    const raw = flags.get(flag) ?? env[variable];
    const value = raw === undefined || raw === '' ? fallback : Number(raw);
    if (!Number.isInteger(value) || value < min)
      throw new Error(`--${flag} (${variable}) must be an integer ≥ ${min}`);
    return value;
  };
  const profile = flags.get('profile') ?? env.BENCH_PROFILE ?? '';
  return {
    durationS: integer('duration', 'BENCH_DURATION', 10, 1),
    warmupS: integer('warmup', 'BENCH_WARMUP', 3, 0),
    rounds: integer('rounds', 'BENCH_ROUNDS', 3, 1),
    connections: integer('connections', 'BENCH_CONNECTIONS', 64, 1),
    users: integer('users', 'BENCH_USERS', 64, 1),
    quietS: integer('quiet', 'BENCH_QUIET', 30, 0),
    profile: profile !== '' && profile !== '0' && profile !== 'false',
  };
}

// --- child processes -----------------------------------------------------------------------------

type AgentReply =
  | { type: 'profile-started' }
  | { type: 'profile-written'; file: string }
  | { type: 'profile-error'; message: string };

/** A process started with `node --import tsx --import bench/child-agent.ts <entry>`, output kept in memory. */
class ChildService {
  private readonly child: ChildProcess;
  private readonly output: string[] = [];
  private stopping = false;
  readonly exited: Promise<void>;
  exitStatus: string | undefined;

  constructor(
    readonly name: string,
    entry: string,
    env: Record<string, string>,
  ) {
    // Own process group: a Ctrl-C in the terminal reaches only the benchmark, which stops the
    // children in order. Should the benchmark die outright, the agent stops them (IPC closes).
    this.child = spawn(process.execPath, ['--import', 'tsx', '--import', AGENT, entry], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
    });
    const keep = (chunk: Buffer) => {
      this.output.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      if (this.output.length > 200) this.output.splice(0, this.output.length - 200);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolveExit) => {
      this.child.once('exit', (code, signal) => {
        this.exitStatus = signal ? `signal ${signal}` : `code ${code}`;
        resolveExit();
      });
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} did not start`);
    return this.child.pid;
  }

  /** Set when the process ended without being asked to. */
  get crashed(): boolean {
    return this.exitStatus !== undefined && !this.stopping;
  }

  tail(lines = 25): string {
    return (
      this.output
        .slice(-lines)
        .map((line) => `    ${line}`)
        .join('\n') || '    (no output)'
    );
  }

  assertAlive(): void {
    if (this.exitStatus !== undefined) {
      throw new Error(`${this.name} exited (${this.exitStatus}); last output:\n${this.tail()}`);
    }
  }

  async request(message: object, expect: AgentReply['type'], timeoutMs = 30_000): Promise<AgentReply> {
    return new Promise((resolveReply, reject) => {
      const timer = setTimeout(() => {
        this.child.off('message', onMessage);
        reject(new Error(`${this.name}: no ${expect} within ${timeoutMs} ms`));
      }, timeoutMs);
      const onMessage = (reply: AgentReply) => {
        if (reply.type !== expect && reply.type !== 'profile-error') return;
        clearTimeout(timer);
        this.child.off('message', onMessage);
        if (reply.type === 'profile-error') reject(new Error(`${this.name}: ${reply.message}`));
        else resolveReply(reply);
      };
      this.child.on('message', onMessage);
      this.child.send(message);
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.exitStatus !== undefined) return;
    this.child.kill('SIGTERM');
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(10_000).then(() => true)]);
    if (timedOut) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    if (this.child.connected) this.child.disconnect();
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolveListen());
  });
  const { port } = server.address() as AddressInfo;
  await new Promise((resolveClose) => server.close(resolveClose));
  return port;
}

async function waitUntil(
  service: ChildService,
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    service.assertAlive();
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline)
      throw new Error(
        `${service.name}: ${what} not reached in ${timeoutMs} ms; last output:\n${service.tail()}`,
      );
    await sleep(100);
  }
}

const portOpen = (port: number) => () =>
  new Promise<boolean>((resolveProbe) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveProbe(true);
    });
    socket.once('error', () => resolveProbe(false));
  });

const answers200 = (url: string) => async () => (await fetch(url)).status === 200;

// --- CPU accounting ------------------------------------------------------------------------------

interface ProcessTicks {
  /** utime and stime (kernel) of the process, in clock ticks. */
  user: number;
  sys: number;
  /** Nanoseconds its main thread spent runnable but waiting for a CPU (`/proc/<pid>/schedstat`). */
  runQueueNs: number;
}

/** Zero once the process is gone. */
function processTicks(pid: number): ProcessTicks {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const schedstat = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ');
    return { user: Number(fields[11]), sys: Number(fields[12]), runQueueNs: Number(schedstat[1]) };
  } catch {
    return { user: 0, sys: 0, runQueueNs: 0 };
  }
}

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = values.reduce((sum, value) => sum + value, 0);
  return { busy: total - (values[3] ?? 0) - (values[4] ?? 0), total };
}

function pidsByCommand(command: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === command) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

type ProcessGroups = Map<string, number[]>;

interface CpuSnapshot {
  at: number;
  groups: Map<string, ProcessTicks>;
  machine: { busy: number; total: number };
}

function cpuSnapshot(groups: ProcessGroups): CpuSnapshot {
  const ticks = new Map<string, ProcessTicks>();
  for (const [name, pids] of groups) {
    const sum = { user: 0, sys: 0, runQueueNs: 0 };
    for (const pid of pids) {
      const { user, sys, runQueueNs } = processTicks(pid);
      sum.user += user;
      sum.sys += sys;
      sum.runQueueNs += runQueueNs;
    }
    ticks.set(name, sum);
  }
  return { at: performance.now(), groups: ticks, machine: machineTicks() };
}

/** Share of each group's CPU time between two snapshots that was spent in the kernel (0–1). */
function kernelShare(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const share = new Map<string, number>();
  for (const [name, ticks] of after.groups) {
    const previous = before.groups.get(name) ?? { user: 0, sys: 0, runQueueNs: 0 };
    const sys = Math.max(0, ticks.sys - previous.sys);
    const total = sys + Math.max(0, ticks.user - previous.user);
    share.set(name, total > 0 ? sys / total : 0);
  }
  return share;
}

/**
 * Time the main thread(s) of each group were runnable but waited for a CPU between two snapshots,
 * in % of the wall time (summed over a group's processes).
 */
function runQueueWait(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const wallNs = (after.at - before.at) * 1e6;
  const wait = new Map<string, number>();
  for (const [name, ticks] of after.groups) {
    const previous = before.groups.get(name)?.runQueueNs ?? 0;
    wait.set(name, (100 * Math.max(0, ticks.runQueueNs - previous)) / wallNs);
  }
  return wait;
}

/** CPU use between two snapshots, in % of one core, per group plus `machine` (all cores) and `other`. */
function cpuUse(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const seconds = (after.at - before.at) / 1000;
  const use = new Map<string, number>();
  let known = 0;
  for (const [name, ticks] of after.groups) {
    const previous = before.groups.get(name) ?? { user: 0, sys: 0, runQueueNs: 0 };
    const delta = Math.max(0, ticks.user + ticks.sys - previous.user - previous.sys);
    known += delta;
    use.set(name, (100 * delta) / CLOCK_TICKS_PER_SECOND / seconds);
  }
  const busy = after.machine.busy - before.machine.busy;
  const total = after.machine.total - before.machine.total;
  const cores = availableParallelism();
  use.set('other processes', Math.max(0, (100 * (busy - known)) / CLOCK_TICKS_PER_SECOND / seconds));
  use.set('machine (all cores)', total > 0 ? (100 * cores * busy) / total : 0);
  return use;
}

const QUIET_OTHER_PERCENT = 25;

/** Waits (up to `maxS`) until processes outside the benchmark use less than a quarter of a core. */
async function waitForQuiet(
  groups: ProcessGroups,
  maxS: number,
): Promise<{ waitedS: number; otherPercent: number }> {
  const started = performance.now();
  for (;;) {
    const before = cpuSnapshot(groups);
    await sleep(1_000);
    const otherPercent = cpuUse(before, cpuSnapshot(groups)).get('other processes') ?? 0;
    const waitedS = (performance.now() - started) / 1000;
    if (otherPercent < QUIET_OTHER_PERCENT || waitedS >= maxS) return { waitedS, otherPercent };
  }
}

// --- load ----------------------------------------------------------------------------------------

interface Scenario {
  name: string;
  url: string;
  requests: AutocannonRequest[];
  authenticated: boolean;
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  cpu: Map<string, number>;
  /** Kernel share of each process group's CPU time. */
  kernel: Map<string, number>;
  /** Run-queue wait of each process group's main thread(s), % of wall time. */
  runQueue: Map<string, number>;
  /** pg_stat_database of the benchmark's database over the run, per request. */
  pg: { transactions: number; rowsRead: number; rowsWritten: number };
}

interface PgCounters {
  transactions: number;
  rowsRead: number;
  rowsWritten: number;
}

let activeRun: AutocannonInstance | undefined;
/** Every process the benchmark started, for CPU accounting and for their output on failure. */
const services: ChildService[] = [];

function rotate<T>(items: readonly T[], by: number): T[] {
  const shift = items.length === 0 ? 0 : by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

async function load(scenario: Scenario, options: Options, durationS: number): Promise<AutocannonResult> {
  let connection = 0;
  const result = await new Promise<AutocannonResult>((resolveRun, reject) => {
    activeRun = autocannon(
      {
        url: scenario.url,
        connections: options.connections,
        duration: durationS,
        pipelining: 1,
        timeout: 10,
        requests: scenario.requests,
        // Each connection starts at another user, so concurrent requests carry different tokens.
        setupClient: (client) => client.setRequests(rotate(scenario.requests, connection++)),
      },
      (error, outcome) => (error ? reject(error) : resolveRun(outcome)),
    );
  });
  activeRun = undefined;
  const failures = result.non2xx + result.errors + result.timeouts;
  if (failures > 0 || result.requests.total === 0) {
    const codes = Object.entries(result.statusCodeStats)
      .map(([code, { count }]) => `${code}×${count}`)
      .join(', ');
    throw new Error(
      `${scenario.name}: ${result.non2xx} non-2xx responses (${codes || 'none'}), ${result.errors} errors, ` +
        `${result.timeouts} timeouts, ${result.requests.total} completed`,
    );
  }
  return result;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

// --- seeding -------------------------------------------------------------------------------------

interface Session {
  user: { id: string; email: string; role: string };
  org: { id: string };
}

async function call<Body>(
  base: string,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
): Promise<{ status: number; body: Body }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Body };
}

function expectStatus(what: string, response: { status: number; body: unknown }, status: number): void {
  if (response.status !== status)
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`);
}

async function inBatches<T>(items: T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work));
}

// --- report --------------------------------------------------------------------------------------

function table(header: string[], rows: string[][], rightAligned: (column: number) => boolean): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const format = (cells: string[]) =>
    `| ${cells.map((cell, column) => (rightAligned(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join(' | ')} |`;
  // Markdown, formatted as Prettier does, so that the output can go into docs/benchmarks.md as it is.
  const rule = `| ${widths.map((width, column) => (rightAligned(column) ? `${'-'.repeat(width - 1)}:` : `:${'-'.repeat(width - 1)}`)).join(' | ')} |`;
  return [format(header), rule, ...rows.map(format)].join('\n');
}

function machineDescription(): string {
  const model =
    /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown CPU';
  const load = loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
  return `${availableParallelism()} cores (${model}), Node ${process.version}, load average before the run ${load}`;
}

// --- main ----------------------------------------------------------------------------------------

async function main(lifecycle: Lifecycle, interrupted: () => boolean): Promise<void> {
  const options = parseOptions(process.argv.slice(2), process.env);
  const logger = createLogger('bench', 'silent');
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options.connections} connections, ${options.warmupS} s warm-up + ${options.durationS} s measured per run, ` +
      `${options.rounds} rounds, ${options.users} users\n`,
  );

  // Infrastructure of this run.
  const database = await createTestDatabase('bench');
  lifecycle.add('database', () => database.drop());
  const namespace = uniqueNatsNamespace('bench');
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  lifecycle.add('nats streams', async () => {
    const nats = await connectJetStream({
      url: natsUrl,
      name: 'bench-cleanup',
      logger,
      initialConnectTimeoutMs: 5_000,
    });
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });
  const mail = await startSmtpSink();
  lifecycle.add('smtp sink', () => mail.close());
  const audience = 'https://api.bench.test';
  const idp = await DevOidcProvider.create({ audience });
  const issuer = await idp.start();
  lifecycle.add('identity provider', () => idp.stop());

  // Services, each in its own process.
  const startService = (name: string, entry: string, env: Record<string, string>) => {
    const service = new ChildService(name, entry, {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
      ...env,
    });
    services.push(service);
    lifecycle.add(name, () => service.stop());
    return service;
  };
  const shared = {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: database.url,
    NATS_URL: natsUrl,
    NATS_NAMESPACE: namespace,
    SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
  };
  const [identityPort, notificationPort, billingPort, gatewayPort, baselinePort] = (await Promise.all(
    [1, 2, 3, 4, 5].map(() => freePort()),
  )) as [number, number, number, number, number];
  const identity = startService('identity', 'apps/identity/src/main.ts', {
    ...shared,
    GRPC_PORT: String(identityPort),
  });
  const notification = startService('notification', 'apps/notification/src/main.ts', {
    ...shared,
    GRPC_PORT: String(notificationPort),
    SMTP_URL: mail.url,
    PUBLIC_APP_URL: 'https://dashboard.bench.test',
  });
  const billing = startService('billing', 'apps/billing/src/main.ts', {
    ...shared,
    GRPC_PORT: String(billingPort),
  });
  const baseline = startService('baseline', 'bench/hello-fastify.ts', {
    NODE_ENV: 'production',
    PORT: String(baselinePort),
  });
  await Promise.all([
    waitUntil(identity, `gRPC port ${identityPort}`, portOpen(identityPort)),
    waitUntil(notification, `gRPC port ${notificationPort}`, portOpen(notificationPort)),
    waitUntil(billing, `gRPC port ${billingPort}`, portOpen(billingPort)),
  ]);
  const gateway = startService('gateway', 'apps/gateway/src/main.ts', {
    ...shared,
    HOST: '127.0.0.1',
    PORT: String(gatewayPort),
    OIDC_ISSUER: issuer,
    OIDC_AUDIENCE: audience,
    IDENTITY_GRPC_ADDRESS: `127.0.0.1:${identityPort}`,
    NOTIFICATION_GRPC_ADDRESS: `127.0.0.1:${notificationPort}`,
    BILLING_GRPC_ADDRESS: `127.0.0.1:${billingPort}`,
    // Seeding accepts one invite per user on this unauthenticated route.
    RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '100000',
  });
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const baselineUrl = `http://127.0.0.1:${baselinePort}`;
  await waitUntil(
    gateway,
    'GET /api/analytics/health → 200',
    answers200(`${gatewayUrl}/api/analytics/health`),
  );
  await waitUntil(baseline, 'GET / → 200', answers200(`${baselineUrl}/`));
  console.log(`started: ${services.map((service) => `${service.name} (pid ${service.pid})`).join(', ')}`);

  // Seed: one organization whose members are all the users. The first user's first login
  // provisions it; everyone else is invited (the invite token arrives by e-mail), accepts, and logs in.
  const seedStarted = performance.now();
  const tokens: string[] = [];
  const adminEmail = 'user000@bench.test';
  const adminToken = await idp.issueUserToken({ email: adminEmail, name: 'Bench Admin' });
  tokens.push(adminToken);
  const adminSession = await call<Session>(gatewayUrl, 'GET', '/api/session', adminToken);
  expectStatus('first login', adminSession, 200);
  const orgId = adminSession.body.org.id;
  const invitees = Array.from(
    { length: options.users - 1 },
    (_, i) => `user${String(i + 1).padStart(3, '0')}@bench.test`,
  );
  const inviteeTokens = new Map<string, string>();
  await inBatches(invitees, 8, async (email) => {
    if (interrupted()) throw new Error('interrupted');
    expectStatus(
      `invite ${email}`,
      await call(gatewayUrl, 'POST', '/api/invites', adminToken, { email, role: 'ANALYST' }),
      201,
    );
    const message = await mail.waitFor((received) => received.to.includes(email), 30_000);
    const inviteToken = /sts_inv_[A-Za-z0-9_-]{43}/.exec(message.text ?? '')?.[0];
    if (!inviteToken) throw new Error(`no invite token in the e-mail to ${email}`);
    expectStatus(
      `accept ${email}`,
      await call(gatewayUrl, 'POST', '/api/invites/accept', undefined, { token: inviteToken }),
      200,
    );
    const token = await idp.issueUserToken({ email, name: `Bench ${email.split('@')[0]}` });
    const session = await call<Session>(gatewayUrl, 'GET', '/api/session', token);
    expectStatus(`first login of ${email}`, session, 200);
    if (session.body.org.id !== orgId)
      throw new Error(`${email} landed in organization ${session.body.org.id}, not ${orgId}`);
    inviteeTokens.set(email, token);
  });
  for (const email of invitees) tokens.push(inviteeTokens.get(email) as string);
  const members = await call<unknown[]>(gatewayUrl, 'GET', '/api/members', adminToken);
  expectStatus('members', members, 200);
  if (members.body.length !== Math.min(options.users, 50))
    throw new Error(
      `expected ${Math.min(options.users, 50)} members on the first page, got ${members.body.length}`,
    );
  console.log(
    `seeded: 1 organization, ${options.users} members (admin + ${invitees.length} invited analysts) in ` +
      `${((performance.now() - seedStarted) / 1000).toFixed(1)} s; GET /api/members returns the first page (${members.body.length})\n`,
  );
  await sleep(1_000); // let the notification service catch up with the member.joined events

  const authorized = (path: string): AutocannonRequest[] =>
    tokens.map((token) => ({ method: 'GET', path, headers: { authorization: `Bearer ${token}` } }));
  const scenarios: Scenario[] = [
    {
      name: 'baseline: Fastify hello-world',
      url: baselineUrl,
      requests: [{ method: 'GET', path: '/' }],
      authenticated: false,
    },
    { name: 'GET /api/session', url: gatewayUrl, requests: authorized('/api/session'), authenticated: true },
    { name: 'GET /api/members', url: gatewayUrl, requests: authorized('/api/members'), authenticated: true },
  ];

  // Which processes to account CPU to. PostgreSQL backends are those connected to this database.
  const pgAdmin = new Client({ connectionString: database.url });
  await pgAdmin.connect();
  lifecycle.add('pg monitor', () => pgAdmin.end());
  const groups = async (): Promise<ProcessGroups> => {
    const { rows } = await pgAdmin.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    return new Map<string, number[]>([
      ['bench (autocannon)', [process.pid]],
      ...services.map((service): [string, number[]] => [service.name, [service.pid]]),
      ['postgres backends', rows.map((row) => row.pid)],
      ['nats-server', pidsByCommand('nats-server')],
    ]);
  };

  // Approximate: backends flush their counters to pg_stat_database at most once a second.
  const pgCounters = async (): Promise<PgCounters> => {
    await pgAdmin.query('select pg_stat_clear_snapshot()');
    const { rows } = await pgAdmin.query<{ transactions: string; rows_read: string; rows_written: string }>(
      `select xact_commit + xact_rollback as transactions, tup_returned + tup_fetched as rows_read,
              tup_inserted + tup_updated + tup_deleted as rows_written
         from pg_stat_database where datname = current_database()`,
    );
    const row = rows[0];
    return {
      transactions: Number(row?.transactions),
      rowsRead: Number(row?.rows_read),
      rowsWritten: Number(row?.rows_written),
    };
  };

  // Freshly started processes are slow until V8 has optimized the hot paths: warm every scenario
  // up once, longer, before the rounds (each measured run still gets its own warm-up).
  if (options.warmupS > 0) {
    for (const scenario of scenarios) await load(scenario, options, 2 * options.warmupS);
  }

  const measurements = new Map<string, Measurement[]>(scenarios.map((scenario) => [scenario.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    for (const scenario of rotate(scenarios, round)) {
      if (interrupted()) throw new Error('interrupted');
      const processGroups = await groups();
      const quiet = options.quietS > 0 ? await waitForQuiet(processGroups, options.quietS) : undefined;
      if (options.warmupS > 0) await load(scenario, options, options.warmupS);
      const pgBefore = await pgCounters();
      const before = cpuSnapshot(processGroups);
      const result = await load(scenario, options, options.durationS);
      const after = cpuSnapshot(processGroups);
      const cpu = cpuUse(before, after);
      const kernel = kernelShare(before, after);
      const runQueue = runQueueWait(before, after);
      await sleep(1_100); // let the backends flush their statistics
      const pgAfter = await pgCounters();
      for (const service of services) service.assertAlive();
      const measurement: Measurement = {
        rps: result.requests.total / result.duration,
        p50: result.latency.p50 as number,
        p99: result.latency.p99 as number,
        requests: result.requests.total,
        cpu,
        kernel,
        runQueue,
        pg: {
          // The monitor's own two statements per snapshot are negligible next to thousands of requests.
          transactions: (pgAfter.transactions - pgBefore.transactions) / result.requests.total,
          rowsRead: (pgAfter.rowsRead - pgBefore.rowsRead) / result.requests.total,
          rowsWritten: (pgAfter.rowsWritten - pgBefore.rowsWritten) / result.requests.total,
        },
      };
      measurements.get(scenario.name)?.push(measurement);
      console.log(
        `round ${round + 1}/${options.rounds}  ${scenario.name.padEnd(30)} ${measurement.rps.toFixed(0).padStart(6)} req/s  ` +
          `p50 ${measurement.p50.toFixed(1)} ms  p99 ${measurement.p99.toFixed(1)} ms  (${measurement.requests} requests, all 2xx; ` +
          `CPU of processes outside the benchmark ${(cpu.get('other processes') ?? 0).toFixed(0)}% of a core` +
          (quiet && quiet.waitedS > 1.5
            ? `; waited ${quiet.waitedS.toFixed(0)} s for them to quieten${quiet.otherPercent >= QUIET_OTHER_PERCENT ? ', in vain' : ''})`
            : ')'),
      );
    }
  }

  // Report.
  const summary = scenarios.map((scenario) => {
    const runs = measurements.get(scenario.name) ?? [];
    return {
      scenario,
      runs,
      rps: median(runs.map((run) => run.rps)),
      p50: median(runs.map((run) => run.p50)),
      p99: median(runs.map((run) => run.p99)),
    };
  });
  const baselineRps = summary[0]?.rps ?? 0;
  console.log(
    `\nResults: medians of ${options.rounds} rounds; ${options.connections} connections; ${options.durationS} s per measured run; ` +
      `target for authenticated routes ≥ ${TARGET_RPS} req/s with p99 < ${TARGET_P99_MS} ms\n`,
  );
  console.log(
    table(
      ['scenario', 'req/s (median)', 'p50 ms', 'p99 ms', 'req/s vs baseline', 'req/s per round', 'target'],
      summary.map(({ scenario, runs, rps, p50, p99 }) => [
        scenario.name,
        rps.toFixed(0),
        p50.toFixed(1),
        p99.toFixed(1),
        `${((100 * rps) / baselineRps).toFixed(1)}% (1/${(baselineRps / rps).toFixed(1)})`,
        runs.map((run) => run.rps.toFixed(0)).join(', '),
        scenario.authenticated
          ? rps >= TARGET_RPS && p99 < TARGET_P99_MS
            ? 'met'
            : `NOT met (${rps >= TARGET_RPS ? '' : `req/s ${((100 * rps) / TARGET_RPS).toFixed(0)}% of target`}${rps < TARGET_RPS && p99 >= TARGET_P99_MS ? ', ' : ''}${p99 >= TARGET_P99_MS ? `p99 ≥ ${TARGET_P99_MS} ms` : ''})`
          : '—',
      ]),
      (column) => column >= 1 && column <= 3,
    ),
  );

  const processNames = [...(summary[0]?.runs[0]?.cpu.keys() ?? [])];
  const ownProcesses = processNames.filter(
    (name) => !name.startsWith('machine') && name !== 'other processes',
  );
  for (const { runs } of summary) {
    for (const run of runs) {
      run.cpu.set(
        'all benchmark processes',
        ownProcesses.reduce((sum, name) => sum + (run.cpu.get(name) ?? 0), 0),
      );
    }
  }
  processNames.splice(processNames.indexOf('other processes'), 0, 'all benchmark processes');
  const mean = (values: number[]) =>
    values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
  console.log(
    '\nCPU during the measured runs (mean of rounds; % of one core, the machine has ' +
      `${availableParallelism() * 100}%; µs of CPU per request; share of that CPU time spent in the kernel; ` +
      `"runq": time the main thread was ready to run but waited for a CPU, % of wall time):\n`,
  );
  console.log(
    table(
      ['process', ...summary.map(({ scenario }) => scenario.name)],
      processNames.map((name) => [
        name,
        ...summary.map(({ runs }) => {
          const share = mean(runs.map((run) => run.cpu.get(name) ?? 0));
          const perRequest = mean(runs.map((run) => (((run.cpu.get(name) ?? 0) / 100) * 1e6) / run.rps));
          const kernel = mean(runs.map((run) => run.kernel.get(name) ?? 0));
          if (name.startsWith('machine') || name === 'other processes') return `${share.toFixed(0)}%`;
          if (name === 'all benchmark processes') return `${share.toFixed(0)}% · ${perRequest.toFixed(0)} µs`;
          return share < 1
            ? `${share.toFixed(0)}%`
            : `${share.toFixed(0)}% · ${perRequest.toFixed(0)} µs · sys ${(100 * kernel).toFixed(0)}% · ` +
                `runq ${mean(runs.map((run) => run.runQueue.get(name) ?? 0)).toFixed(0)}%`;
        }),
      ]),
      (column) => column >= 1,
    ),
  );

  const cores = availableParallelism();
  console.log(
    `\nCeiling implied by the CPU cost per request if the benchmark had all ${cores} cores to itself ` +
      `(${cores} × 10⁶ µs / µs per request, all benchmark processes including the load generator):`,
  );
  for (const { scenario, runs } of summary) {
    const perRequest = mean(
      runs.map((run) => (((run.cpu.get('all benchmark processes') ?? 0) / 100) * 1e6) / run.rps),
    );
    const gatewayPerRequest = mean(
      runs.map((run) => (((run.cpu.get('gateway') ?? 0) / 100) * 1e6) / run.rps),
    );
    console.log(
      `  ${scenario.name.padEnd(30)} ${perRequest.toFixed(0).padStart(5)} µs → ~${((cores * 1e6) / perRequest).toFixed(0)} req/s` +
        (scenario.authenticated
          ? `; the gateway alone (one process, one core) → ~${(1e6 / gatewayPerRequest).toFixed(0)} req/s`
          : ''),
    );
  }

  console.log('\nPostgreSQL work per request (pg_stat_database of the benchmark database, mean of rounds):');
  for (const { scenario, runs } of summary.filter((entry) => entry.scenario.authenticated)) {
    console.log(
      `  ${scenario.name.padEnd(18)} ${mean(runs.map((run) => run.pg.transactions)).toFixed(2)} transactions, ` +
        `${mean(runs.map((run) => run.pg.rowsRead)).toFixed(1)} rows read, ${mean(runs.map((run) => run.pg.rowsWritten)).toFixed(3)} rows written`,
    );
  }

  if (options.profile)
    await profileRuns(
      scenarios.filter((scenario) => scenario.authenticated),
      options,
      [gateway, identity, billing],
    );
}

/** One extra run per scenario with CPU profiles of the given services, recorded over the measured window only. */
async function profileRuns(scenarios: Scenario[], options: Options, targets: ChildService[]): Promise<void> {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const directory = join(ROOT, 'tmp', 'bench-profiles', stamp);
  await mkdir(directory, { recursive: true });
  console.log(
    `\nCPU profiles (extra runs, not part of the figures above; profiling slows the processes down) in ${relative(ROOT, directory)}/\n`,
  );
  for (const scenario of scenarios) {
    if (options.warmupS > 0) await load(scenario, options, options.warmupS);
    await Promise.all(
      targets.map((target) => target.request({ type: 'profile-start', intervalUs: 1000 }, 'profile-started')),
    );
    const result = await load(scenario, options, options.durationS);
    const slug = scenario.name
      .replace(/[^a-z0-9]+/gi, '-')
      .replace(/^-|-$/g, '')
      .toLowerCase();
    const files = targets.map((target) => join(directory, `${slug}.${target.name}.cpuprofile`));
    await Promise.all(
      targets.map((target, i) => target.request({ type: 'profile-stop', file: files[i] }, 'profile-written')),
    );
    console.log(
      `${scenario.name} (profiled): ${(result.requests.total / result.duration).toFixed(0)} req/s, p99 ${(result.latency.p99 as number).toFixed(1)} ms\n`,
    );
    for (const [i, target] of targets.entries()) {
      const summary = await summarizeProfileFile(files[i] as string, 15);
      const title = `${scenario.name} · ${target.name}`;
      if (summary.busyMs < 0.02 * summary.wallMs) console.log(`${title}: idle (not on this route's path)\n`);
      else console.log(formatProfileSummary(title, summary), '\n');
    }
  }
}

const cleanup = new Lifecycle((name, error) =>
  console.error(`cleanup: ${name} failed: ${error instanceof Error ? error.message : String(error)}`),
);
let signalled = false;
const onSignal = (signal: NodeJS.Signals) => {
  if (signalled) process.exit(130);
  signalled = true;
  console.error(`\n${signal}: stopping the services and dropping the database…`);
  activeRun?.stop();
  void cleanup.close().finally(() => process.exit(130));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

void main(cleanup, () => signalled)
  .then(
    () => 0,
    (error: unknown) => {
      if (signalled) return 130;
      console.error(`\nbenchmark failed: ${error instanceof Error ? error.message : String(error)}`);
      for (const service of services) console.error(`\nlast output of ${service.name}:\n${service.tail(15)}`);
      return 1;
    },
  )
  .then(async (code) => {
    await cleanup.close();
    process.exit(code);
  });
