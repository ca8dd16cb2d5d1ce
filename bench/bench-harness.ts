/**
 * What the benchmarks under bench/ share: options, the system under test (every service in its own
 * process, as in production), load with autocannon, CPU accounting per process from /proc, waiting for
 * a quiet machine, CPU profiles, Markdown tables, and an orderly clean-up (also on failure and Ctrl-C).
 */
import { fork, spawn, type ChildProcess, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';

type AutocannonInstance = autocannon.Instance;
type AutocannonRequest = autocannon.Request;
type AutocannonResult = autocannon.Result;
import { Client } from 'pg';
import { DevOidcProvider } from '@sts/dev-oidc/dev-oidc-provider';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { Lifecycle } from '@sts/runtime/lifecycle';
import { clickhouseNodeUrl, localCluster } from '@sts/testing/local-cluster';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { freePort } from '@sts/testing/free-port';
import { portOpen } from '@sts/testing/service-process';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startSmtpSink } from '@sts/stand-ins/smtp-sink';
import { formatProfileSummary, summarizeProfileFile } from './cpu-profile-summary';
import { type GcPause } from './gc-pauses';
import type { OpenLoadOptions, OpenLoadResult, OpenLoopReply } from './open-loop';

const ROOT = resolve(__dirname, '..');
const AGENT = pathToFileURL(join(ROOT, 'bench', 'child-agent.ts')).href;
const CLOCK_TICKS_PER_SECOND = 100;

// --- options -------------------------------------------------------------------------------------

/** An integer option: `--flag N` or the environment variable, at least `min`. */
interface IntegerOption {
  variable: string;
  fallback: number;
  min: number;
}

/** The options of the gateway's load benchmarks (gateway-session, observability): flag, variable, default. */
export const GATEWAY_LOAD_OPTIONS = {
  duration: { variable: 'BENCH_DURATION', fallback: 10, min: 1 },
  warmup: { variable: 'BENCH_WARMUP', fallback: 3, min: 0 },
  rounds: { variable: 'BENCH_ROUNDS', fallback: 3, min: 1 },
  connections: { variable: 'BENCH_CONNECTIONS', fallback: 64, min: 1 },
  users: { variable: 'BENCH_USERS', fallback: 64, min: 1 },
  quiet: { variable: 'BENCH_QUIET', fallback: 30, min: 0 },
};

/**
 * `--name N` / `--name=N` flags, falling back to environment variables, then defaults. Boolean
 * options are bare flags (`--profile`) or variables set to anything but '', '0' and 'false'.
 * `--help` prints the benchmark's leading doc comment and exits.
 */
export function parseOptions<Integer extends string, Flag extends string>(
  argv: string[],
  env: NodeJS.ProcessEnv,
  integers: Record<Integer, IntegerOption>,
  booleans: Record<Flag, string>,
): Record<Integer, number> & Record<Flag, boolean> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(usage());
    process.exit(0);
  }
  const flags = new Map<string, string>();
  const isBoolean = (name: string) => Object.hasOwn(booleans, name);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match?.[1]) throw new Error(`unexpected argument ${arg}`);
    if (match[2] !== undefined) flags.set(match[1], match[2]);
    else if (isBoolean(match[1])) flags.set(match[1], '1');
    else flags.set(match[1], argv[++i] ?? '');
  }
  const unknown = [...flags.keys()].filter((flag) => !Object.hasOwn(integers, flag) && !isBoolean(flag));
  if (unknown.length > 0) throw new Error(`unknown option --${unknown.join(', --')}`);
  const options: Record<string, number | boolean> = {};
  for (const [flag, { variable, fallback, min }] of Object.entries<IntegerOption>(integers)) {
    const raw = flags.get(flag) ?? env[variable];
    const value = raw === undefined || raw === '' ? fallback : Number(raw);
    if (!Number.isInteger(value) || value < min)
      throw new Error(`--${flag} (${variable}) must be an integer ≥ ${min}`);
    options[flag] = value;
  }
  for (const [flag, variable] of Object.entries<string>(booleans)) {
    const raw = flags.get(flag) ?? env[variable] ?? '';
    options[flag] = raw !== '' && raw !== '0' && raw !== 'false';
  }
  return options as Record<Integer, number> & Record<Flag, boolean>;
}

/** The leading doc comment of the benchmark being run (process.argv[1]), as plain text. */
function usage(): string {
  const source = process.argv[1] ? readFileSync(process.argv[1], 'utf8') : '';
  const comment = /\/\*\*([\s\S]*?)\*\//.exec(source)?.[1] ?? 'no description';
  return comment
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, ''))
    .join('\n')
    .trim();
}

// --- child processes -----------------------------------------------------------------------------

type AgentReply =
  | { type: 'profile-started' }
  | { type: 'gc-watching' }
  | { type: 'gc-pauses'; pauses: GcPause[] }
  | { type: 'profile-written'; file: string }
  | { type: 'profile-error'; message: string };

/** A process started with `node --import tsx --import bench/child-agent.ts <entry>`, output kept in memory. */
export class ChildService {
  private readonly child: ChildProcess;
  private readonly output: string[] = [];
  private stopping = false;
  /** Settles once the output has ended and, with BENCH_SERVICE_LOG_DIR, is written to the log file. */
  private readonly outputClosed: Promise<void>;
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
    // BENCH_SERVICE_LOG_DIR: also append each service's output to <dir>/<name>.log (e.g. with --trace-gc),
    // through one stream per service, opened with the first output and closed once the child's output has ended.
    const logDir = process.env.BENCH_SERVICE_LOG_DIR;
    if (logDir) mkdirSync(logDir, { recursive: true });
    const logFile = logDir ? join(logDir, `${name}.log`) : null;
    let log: WriteStream | undefined;
    const keep = (chunk: Buffer) => {
      if (logFile) (log ??= createWriteStream(logFile, { flags: 'a' })).write(chunk);
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
    // 'close' comes after 'exit', once stdout and stderr have ended: no output is written after it.
    this.outputClosed = new Promise((resolveClosed) => {
      this.child.once('close', () => (log ? log.end(() => resolveClosed()) : resolveClosed()));
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
    if (this.exitStatus === undefined) {
      this.child.kill('SIGTERM');
      const timedOut = await Promise.race([this.exited.then(() => false), sleep(10_000).then(() => true)]);
      if (timedOut) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
      if (this.child.connected) this.child.disconnect();
    }
    // The log file complete before the benchmark exits (bounded, should something else hold the pipes).
    await Promise.race([this.outputClosed, sleep(5_000)]);
  }
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

const portOpenProbe = (port: number) => () => portOpen(port);

const answers200 = (url: string) => async () => (await fetch(url)).status === 200;

// --- the system under test -----------------------------------------------------------------------

/** Every process the benchmark started, for CPU accounting and for their output on failure. */
export const services: ChildService[] = [];

export interface BenchSystem {
  database: TestDatabase;
  /** The NATS server and the namespace of this run's streams. */
  nats: { url: string; namespace: string };
  idp: DevOidcProvider;
  mail: Awaited<ReturnType<typeof startSmtpSink>>;
  gatewayUrl: string;
  /** With `secondGateway`. */
  secondGatewayUrl: string | undefined;
  baselineUrl: string;
  /** Every process's GET /metrics, with `observability`. */
  metricsUrls: string[];
  /** host:port of each backend's gRPC server, by service name. */
  grpcAddresses: Map<string, string>;
  /** The started services by name: identity, notification, billing, gateway, baseline, and enrollment if asked for. */
  service(name: string): ChildService;
}

/**
 * Its own PostgreSQL database and NATS namespace, a development OpenID provider (JWKS over HTTP) and
 * an SMTP sink in this process; identity, notification, billing (and enrollment) and then the gateway
 * as separate processes (`NODE_ENV=production`, `LOG_LEVEL=warn`, free ports); the Fastify
 * hello-world baseline in its own process. Everything is registered with `lifecycle` for clean-up.
 */
export async function startSystem(
  lifecycle: Lifecycle,
  options: {
    enrollment?: boolean;
    /** Analytics processes to start (sharing one durable consumer), against `clickhouse`. */
    analytics?: { processes: number; clickhouseUrl: string; database: string; env?: Record<string, string> };
    gatewayEnv?: Record<string, string>;
    identityEnv?: Record<string, string>;
    /** Given to every service and gateway (a cluster's NATS_URL and NATS_STREAM_REPLICAS, say). */
    sharedEnv?: Record<string, string>;
    notificationEnv?: Record<string, string>;
    billingEnv?: Record<string, string>;
    /** A second gateway process (same backends), at `secondGatewayUrl`. */
    secondGateway?: boolean;
    /** The baseline verifies Stripe signatures with this secret at `POST /stripe-webhook`. */
    baselineWebhookSecret?: string;
    /** Tells this system's processes apart from another's in the same run (`identity [on]`). */
    label?: string;
    /**
     * Metrics (and traces) on in every service and gateway: each serves GET /metrics on a port of its
     * own (`metricsUrls`) and, given `otlpEndpoint`, exports spans over OTLP/HTTP to it.
     */
    observability?: { otlpEndpoint?: string; env?: Record<string, string> };
  } = {},
): Promise<BenchSystem> {
  const logger = createLogger('bench', 'silent');
  const database = await createTestDatabase('bench');
  lifecycle.add('database', () => database.drop());
  const namespace = uniqueNatsNamespace('bench');
  const natsUrl = options.sharedEnv?.NATS_URL ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
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
  // Plays a real provider: the production gateway refuses one that says it is the development one.
  const idp = await DevOidcProvider.create({
    audience,
    tokenTtlSeconds: 6 * 3600,
    announceDevelopment: false,
  });
  const issuer = await idp.start();
  lifecycle.add('identity provider', () => idp.stop());

  const byName = new Map<string, ChildService>();
  const metricsUrls: string[] = [];
  const startService = async (name: string, entry: string, env: Record<string, string>) => {
    const observed: Record<string, string> = {};
    if (options.observability && name !== 'baseline') {
      const metricsPort = await freePort();
      metricsUrls.push(`http://127.0.0.1:${metricsPort}/metrics`);
      Object.assign(
        observed,
        { METRICS_PORT: String(metricsPort) },
        options.observability.otlpEndpoint
          ? { OTEL_EXPORTER_OTLP_ENDPOINT: options.observability.otlpEndpoint }
          : {},
        options.observability.env,
      );
    }
    const service = new ChildService(options.label ? `${name} [${options.label}]` : name, entry, {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
      // Extra Node flags for the services only, to try a setting (not for the load generator).
      ...(process.env.BENCH_SERVICE_NODE_OPTIONS
        ? { NODE_OPTIONS: process.env.BENCH_SERVICE_NODE_OPTIONS }
        : {}),
      ...env,
      ...observed,
    });
    services.push(service);
    byName.set(name, service);
    lifecycle.add(name, () => service.stop());
    return service;
  };
  // Each caller (the gateway, notification) signs with its own key, as in production.
  const serviceAuth = testServiceAuth();
  const shared = {
    NODE_ENV: 'production',
    // The identity provider and the Stripe stand-in are this process, over http on loopback.
    ALLOW_LOOPBACK_HTTP: 'true',
    LOG_LEVEL: 'warn',
    DATABASE_URL: database.url,
    NATS_URL: natsUrl,
    NATS_NAMESPACE: namespace,
    SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
    SERVICE_TRUSTED_KEYS: serviceAuth.SERVICE_TRUSTED_KEYS,
    ...options.sharedEnv,
  };
  const [identityPort, notificationPort, billingPort, enrollmentPort, gatewayPort, baselinePort] =
    (await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()))) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
  const backends: [ChildService, number][] = [
    [
      await startService('identity', 'apps/identity/src/main.ts', {
        ...shared,
        GRPC_PORT: String(identityPort),
        // Seeding invites tens of users into one organization, past the daily quota of invitation e-mails.
        OUTBOUND_EMAILS_PER_ORG_PER_DAY: '1000000',
        ...options.identityEnv,
      }),
      identityPort,
    ],
    [
      await startService('notification', 'apps/notification/src/main.ts', {
        ...shared,
        ...serviceAuth.envOf('notification'),
        GRPC_PORT: String(notificationPort),
        SMTP_URL: mail.url,
        PUBLIC_APP_URL: 'https://dashboard.bench.test',
        ...options.notificationEnv,
      }),
      notificationPort,
    ],
    [
      await startService('billing', 'apps/billing/src/main.ts', {
        ...shared,
        GRPC_PORT: String(billingPort),
        ...options.billingEnv,
      }),
      billingPort,
    ],
  ];
  if (options.enrollment) {
    backends.push([
      await startService('enrollment', 'apps/enrollment/src/main.ts', {
        ...shared,
        GRPC_PORT: String(enrollmentPort),
        ENROLLMENT_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      }),
      enrollmentPort,
    ]);
  }
  let analyticsPort = 0;
  for (let index = 0; index < (options.analytics?.processes ?? 0); index++) {
    const port = await freePort();
    analyticsPort ||= port;
    backends.push([
      await startService(`analytics-${index + 1}`, 'apps/analytics/src/main.ts', {
        ...shared,
        GRPC_PORT: String(port),
        CLICKHOUSE_URL: options.analytics!.clickhouseUrl,
        CLICKHOUSE_DATABASE: options.analytics!.database,
        ...options.analytics!.env,
      }),
      port,
    ]);
    // One at a time: each runs the ClickHouse migrations at start, and ClickHouse has no locks.
    await waitUntil(backends.at(-1)![0], `gRPC port ${port}`, portOpenProbe(port));
  }
  const baseline = await startService('baseline', 'bench/hello-fastify.ts', {
    NODE_ENV: 'production',
    PORT: String(baselinePort),
    ...(options.baselineWebhookSecret ? { BASELINE_WEBHOOK_SECRET: options.baselineWebhookSecret } : {}),
  });
  await Promise.all(
    backends.map(([service, port]) => waitUntil(service, `gRPC port ${port}`, portOpenProbe(port))),
  );
  const gatewayEnv = (port: number) => ({
    ...shared,
    ...serviceAuth.envOf('gateway'),
    HOST: '127.0.0.1',
    PORT: String(port),
    OIDC_ISSUER: issuer,
    OIDC_AUDIENCE: audience,
    IDENTITY_GRPC_ADDRESS: `127.0.0.1:${identityPort}`,
    NOTIFICATION_GRPC_ADDRESS: `127.0.0.1:${notificationPort}`,
    BILLING_GRPC_ADDRESS: `127.0.0.1:${billingPort}`,
    ENROLLMENT_GRPC_ADDRESS: `127.0.0.1:${enrollmentPort}`,
    ANALYTICS_GRPC_ADDRESS: `127.0.0.1:${analyticsPort || 1}`,
    // Seeding (codes, endpoints, members) makes changes far faster than people do.
    WRITES_PER_SUBJECT_PER_MINUTE: '1000000',
    WRITES_PER_ORG_PER_MINUTE: '1000000',
    ...options.gatewayEnv,
  });
  const gateway = await startService('gateway', 'apps/gateway/src/main.ts', gatewayEnv(gatewayPort));
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  let secondGatewayUrl: string | undefined;
  if (options.secondGateway) {
    const port = await freePort();
    const second = await startService('gateway-2', 'apps/gateway/src/main.ts', gatewayEnv(port));
    secondGatewayUrl = `http://127.0.0.1:${port}`;
    await waitUntil(
      second,
      'GET /api/analytics/health → 200',
      answers200(`${secondGatewayUrl}/api/analytics/health`),
    );
  }
  const baselineUrl = `http://127.0.0.1:${baselinePort}`;
  await waitUntil(
    gateway,
    'GET /api/analytics/health → 200',
    answers200(`${gatewayUrl}/api/analytics/health`),
  );
  await waitUntil(baseline, 'GET / → 200', answers200(`${baselineUrl}/`));
  return {
    database,
    idp,
    mail,
    gatewayUrl,
    secondGatewayUrl,
    baselineUrl,
    metricsUrls,
    nats: { url: natsUrl, namespace },
    grpcAddresses: new Map(backends.map(([service, port]) => [service.name, `127.0.0.1:${port}`])),
    service: (name) => {
      const service = byName.get(name);
      if (!service) throw new Error(`no service ${name}`);
      return service;
    },
  };
}

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
  /** Per group, the ticks of each of its processes. */
  groups: Map<string, Map<number, ProcessTicks>>;
  machine: { busy: number; total: number };
}

function cpuSnapshot(groups: ProcessGroups): CpuSnapshot {
  const ticks = new Map<string, Map<number, ProcessTicks>>();
  for (const [name, pids] of groups) ticks.set(name, new Map(pids.map((pid) => [pid, processTicks(pid)])));
  return { at: performance.now(), groups: ticks, machine: machineTicks() };
}

const NO_TICKS: ProcessTicks = { user: 0, sys: 0, runQueueNs: 0 };

/**
 * What each group's processes did between two snapshots, summed over the processes of the later
 * one: a process that started in between counts in full (PostgreSQL backends come and go with the
 * services' pools), one that ended in between is lost.
 */
function groupDeltas(before: CpuSnapshot, after: CpuSnapshot): Map<string, ProcessTicks> {
  const deltas = new Map<string, ProcessTicks>();
  for (const [name, processes] of after.groups) {
    const sum = { user: 0, sys: 0, runQueueNs: 0 };
    for (const [pid, ticks] of processes) {
      const previous = before.groups.get(name)?.get(pid) ?? NO_TICKS;
      sum.user += Math.max(0, ticks.user - previous.user);
      sum.sys += Math.max(0, ticks.sys - previous.sys);
      sum.runQueueNs += Math.max(0, ticks.runQueueNs - previous.runQueueNs);
    }
    deltas.set(name, sum);
  }
  return deltas;
}

/** Share of each group's CPU time between two snapshots that was spent in the kernel (0–1). */
function kernelShare(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const share = new Map<string, number>();
  for (const [name, { user, sys }] of groupDeltas(before, after))
    share.set(name, user + sys > 0 ? sys / (user + sys) : 0);
  return share;
}

/**
 * Time the main thread(s) of each group were runnable but waited for a CPU between two snapshots,
 * in % of the wall time (summed over a group's processes).
 */
function runQueueWait(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const wallNs = (after.at - before.at) * 1e6;
  const wait = new Map<string, number>();
  for (const [name, { runQueueNs }] of groupDeltas(before, after))
    wait.set(name, (100 * runQueueNs) / wallNs);
  return wait;
}

/**
 * CPU use between two snapshots, in % of one core, per group plus 'all benchmark processes' (their
 * sum), 'other processes' and 'machine (all cores)'.
 */
function cpuUse(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const seconds = (after.at - before.at) / 1000;
  const use = new Map<string, number>();
  let known = 0;
  let allGroups = 0;
  for (const [name, { user, sys }] of groupDeltas(before, after)) {
    known += user + sys;
    const share = (100 * (user + sys)) / CLOCK_TICKS_PER_SECOND / seconds;
    allGroups += share;
    use.set(name, share);
  }
  use.set('all benchmark processes', allGroups);
  const busy = after.machine.busy - before.machine.busy;
  const total = after.machine.total - before.machine.total;
  const cores = availableParallelism();
  use.set('other processes', Math.max(0, (100 * (busy - known)) / CLOCK_TICKS_PER_SECOND / seconds));
  use.set('machine (all cores)', total > 0 ? (100 * cores * busy) / total : 0);
  return use;
}

const QUIET_OTHER_PERCENT = 25;

/** Waits (up to `maxS`) until processes outside the benchmark use less than a quarter of a core. */
export async function waitForQuiet(
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

/** How long `waitForQuiet` waited, for a progress line; empty when it did not wait noticeably. */
export function quietNote(quiet: { waitedS: number; otherPercent: number } | undefined): string {
  return quiet && quiet.waitedS > 1.5
    ? `; waited ${quiet.waitedS.toFixed(0)} s for them to quieten${quiet.otherPercent >= QUIET_OTHER_PERCENT ? ', in vain' : ''}`
    : '';
}

export interface PgCounters {
  transactions: number;
  rowsRead: number;
  rowsWritten: number;
}

/** The counters' growth from `before` to `after`, per operation. */
export function pgPerOperation(before: PgCounters, after: PgCounters, operations: number): PgCounters {
  return {
    transactions: (after.transactions - before.transactions) / operations,
    rowsRead: (after.rowsRead - before.rowsRead) / operations,
    rowsWritten: (after.rowsWritten - before.rowsWritten) / operations,
  };
}

/**
 * Watches the benchmark's database: which PostgreSQL backends serve it (to account their CPU) and
 * its `pg_stat_database` counters. Also runs the benchmark's own checks against it.
 */
export class DatabaseMonitor {
  /** Looked up in /proc once, with the first snapshot. */
  private natsServerPids: number[] | undefined;
  private clickHousePids: number[] | undefined;

  private constructor(readonly client: Client) {}

  static async connect(lifecycle: Lifecycle, url: string): Promise<DatabaseMonitor> {
    const client = new Client({ connectionString: url });
    await client.connect();
    lifecycle.add('pg monitor', () => client.end());
    return new DatabaseMonitor(client);
  }

  /** The benchmark process (load generator), the open-loop generator once started, every service, the database's backends, nats-server. */
  async processGroups(): Promise<ProcessGroups> {
    const { rows } = await this.client.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    return new Map<string, number[]>([
      ['bench (autocannon)', [process.pid]],
      ...(openLoopGenerator?.pid
        ? [['open-loop generator', [openLoopGenerator.pid]] as [string, number[]]]
        : []),
      ...services.map((service): [string, number[]] => [service.name, [service.pid]]),
      ['postgres backends', rows.map((row) => row.pid)],
      ['nats-server', (this.natsServerPids ??= pidsByCommand('nats-server'))],
      // The kernel keeps 15 characters of a command's name.
      ['clickhouse-server', (this.clickHousePids ??= pidsByCommand('clickhouse-serv'))],
    ]);
  }

  /** A CPU snapshot of the benchmark's processes, with the database's backends as they are now. */
  async snapshot(): Promise<CpuSnapshot> {
    return cpuSnapshot(await this.processGroups());
  }

  /** Approximate: backends flush their counters to pg_stat_database at most once a second. */
  async counters(): Promise<PgCounters> {
    await this.client.query('select pg_stat_clear_snapshot()');
    const { rows } = await this.client.query<{
      transactions: string;
      rows_read: string;
      rows_written: string;
    }>(
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
  }
}

/** What the processes did during one measured window. */
export interface CpuWindow {
  /** % of one core per process group, plus 'all benchmark processes', 'other processes' and 'machine (all cores)'. */
  cpu: Map<string, number>;
  /** Kernel share of each process group's CPU time. */
  kernel: Map<string, number>;
  /** Run-queue wait of each process group's main thread(s), % of wall time. */
  runQueue: Map<string, number>;
  seconds: number;
}

export function cpuWindow(before: CpuSnapshot, after: CpuSnapshot): CpuWindow {
  return {
    cpu: cpuUse(before, after),
    kernel: kernelShare(before, after),
    runQueue: runQueueWait(before, after),
    seconds: (after.at - before.at) / 1000,
  };
}

// --- load ----------------------------------------------------------------------------------------

let activeRun: AutocannonInstance | undefined;

interface LoadOptions {
  name: string;
  url: string;
  requests: AutocannonRequest[];
  connections: number;
  /** Seconds; or `amount`. */
  durationS?: number;
  /** Total requests, spread over the connections; or `durationS`. */
  amount?: number;
  /** Each connection starts at another entry of `requests` (so concurrent requests differ). */
  rotateRequests?: boolean;
  /** Record every response time exactly (autocannon's own histogram has 1 ms resolution). */
  recordLatencies?: boolean;
}

/** What a run achieved, closed loop (runLoad) or open loop (runOpenLoad). */
export interface LoadResult {
  /** Requests answered (all 2xx: any other answer fails the run). */
  completed: number;
  /** The run's duration in seconds as the load generator measured it: autocannon's own (closed loop), start to last answer (open loop). */
  durationS: number;
  /** Response times in ms, sorted, when recorded. */
  latenciesMs: Float64Array;
  /**
   * Seconds from the start of the run to its last response, when recorded. autocannon notices the
   * end of an `amount` run only at its next one-second tick, so its own duration is rounded up.
   */
  activeSeconds: number;
  /** performance.now() of the last response, when recorded. */
  lastResponseAt: number;
}

/** A closed-loop run, with autocannon's own figures. */
export interface ClosedLoadResult extends LoadResult {
  result: AutocannonResult;
}

/** One autocannon run; any non-2xx response, error or timeout fails it. */
export async function runLoad(options: LoadOptions): Promise<ClosedLoadResult> {
  let connection = 0;
  let latencies = new Float64Array(options.recordLatencies ? 65_536 : 0);
  let recorded = 0;
  const startedAt = performance.now();
  let lastResponseAt = startedAt;
  const result = await new Promise<AutocannonResult>((resolveRun, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        ...(options.amount !== undefined ? { amount: options.amount } : { duration: options.durationS }),
        pipelining: 1,
        timeout: 10,
        requests: options.requests,
        ...(options.rotateRequests
          ? { setupClient: (client) => client.setRequests(rotate(options.requests, connection++)) }
          : {}),
      },
      (error: unknown, outcome) =>
        error
          ? reject(error instanceof Error ? error : new Error('autocannon failed', { cause: error }))
          : resolveRun(outcome),
    );
    if (options.recordLatencies) {
      instance.on('response', (_client, _status, _bytes, responseTimeMs) => {
        if (recorded === latencies.length) {
          const larger = new Float64Array(latencies.length * 2);
          larger.set(latencies);
          latencies = larger;
        }
        latencies[recorded++] = responseTimeMs;
        lastResponseAt = performance.now();
      });
    }
    activeRun = instance;
  });
  activeRun = undefined;
  const failures = result.non2xx + result.errors + result.timeouts;
  if (failures > 0 || result.requests.total === 0) {
    const codes = Object.entries(result.statusCodeStats ?? {})
      .map(([code, { count }]) => `${code}×${count}`)
      .join(', ');
    throw new Error(
      `${options.name}: ${result.non2xx} non-2xx responses (${codes || 'none'}), ${result.errors} errors, ` +
        `${result.timeouts} timeouts, ${result.requests.total} completed`,
    );
  }
  return {
    result,
    completed: result.requests.total,
    durationS: result.duration,
    latenciesMs: latencies.slice(0, recorded).sort(),
    activeSeconds: (lastResponseAt - startedAt) / 1000,
    lastResponseAt,
  };
}

/** The open-loop generator process (open-loop.ts), started by the first runOpenLoad and kept. */
let openLoopGenerator: ChildProcess | undefined;

/**
 * An open-loop run (open-loop.ts), in a process of its own: the benchmark's own heap (monitors,
 * earlier results) and its collector's pauses stay out of the measured latencies. The process is
 * kept for later runs and counted as 'open-loop generator' in the CPU figures.
 */
export async function runOpenLoad(options: OpenLoadOptions): Promise<OpenLoadResult> {
  const child = (openLoopGenerator ??= fork(join(ROOT, 'bench', 'open-loop.ts'), [], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx'],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  }));
  // Neither the process nor its channel keeps the benchmark alive; it exits when the channel closes.
  child.unref();
  child.channel?.unref();
  return new Promise<OpenLoadResult>((resolveRun, reject) => {
    const onExit = (code: number | null, signal: string | null) => {
      openLoopGenerator = undefined;
      reject(new Error(`open-loop generator exited (${signal ?? code})`));
    };
    child.once('exit', onExit);
    child.once('message', (reply: OpenLoopReply) => {
      child.off('exit', onExit);
      if (reply.type === 'result') resolveRun(reply.result);
      else reject(new Error(reply.message));
    });
    child.send(options);
  });
}

/** The collector's pauses in the given services while `run` runs. */
export async function withGcPauses<T>(
  services: ChildService[],
  run: () => Promise<T>,
): Promise<{ result: T; pauses: Map<string, GcPause[]> }> {
  await Promise.all(services.map((service) => service.request({ type: 'gc-watch-start' }, 'gc-watching')));
  const stopWatching = () =>
    Promise.all(services.map((service) => service.request({ type: 'gc-watch-stop' }, 'gc-pauses')));
  const result = await run().catch(async (error: unknown) => {
    await stopWatching();
    throw error;
  });
  const replies = await stopWatching();
  const pauses = new Map<string, GcPause[]>();
  services.forEach((service, index) => {
    const reply = replies[index];
    if (reply?.type === 'gc-pauses') pauses.set(service.name, reply.pauses);
  });
  return { result, pauses };
}

/**
 * Which processes were collecting garbage while the slow requests were waiting: per process, how many
 * slow requests overlap one of its pauses of at least `minPauseMs`, and how many overlap none at all.
 */
export function slowRequestsDuringGc(
  slowRequests: [number, number][],
  pauses: Map<string, GcPause[]>,
  minPauseMs = 5,
): string {
  if (slowRequests.length === 0) return 'no slow requests';
  const parts: string[] = [];
  const overlapping = new Set<number>();
  for (const [name, list] of pauses) {
    const long = list.filter(([, duration]) => duration >= minPauseMs);
    const count = slowRequests.filter(([due, answered], index) => {
      const hit = long.some(([start, duration]) => start < answered && start + duration > due);
      if (hit) overlapping.add(index);
      return hit;
    }).length;
    const longest = Math.max(0, ...list.map(([, duration]) => duration));
    parts.push(
      `${name} ${count} (its longest pause ${longest.toFixed(0)} ms, ${long.length} of ≥ ${minPauseMs} ms)`,
    );
  }
  return (
    `slow requests overlapping a GC pause ≥ ${minPauseMs} ms: ${parts.join(', ')}; ` +
    `${slowRequests.length - overlapping.size} of ${slowRequests.length} overlap none`
  );
}

/** Stops the autocannon run in progress, if any (on Ctrl-C). */
function stopLoad(): void {
  activeRun?.stop();
}

// --- numbers -------------------------------------------------------------------------------------

export function rotate<T>(items: readonly T[], by: number): T[] {
  const shift = items.length === 0 ? 0 : by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** Nearest-rank percentile (0 < p ≤ 100) of sorted values. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
}

// --- HTTP calls for seeding and checks -----------------------------------------------------------

/** The answer of GET /api/session (the parts the benchmarks read). */
export interface Session {
  user: { id: string; email: string; role: string };
  org: { id: string };
}

export interface CallResult<Body> {
  status: number;
  body: Body;
  headers: Headers;
}

export async function call<Body>(
  base: string,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
  extraHeaders: Record<string, string> = {},
): Promise<CallResult<Body>> {
  const headers: Record<string, string> = { ...extraHeaders };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: (text ? JSON.parse(text) : undefined) as Body,
    headers: response.headers,
  };
}

export function expectStatus(
  what: string,
  response: { status: number; body: unknown },
  status: number,
): void {
  if (response.status !== status)
    throw new Error(`${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`);
}

/** An enrolled device, as the agent knows it. */
export interface BenchDevice {
  deviceId: string;
  orgId: string;
  token: string;
}

/**
 * Enrolls `count` devices into the organization of the admin's token through the public API (an
 * enrollment key, codes 100 per call, one enroll per device), named `<prefix>-<index>`.
 */
export async function enrollDevices(
  gatewayUrl: string,
  adminToken: string,
  count: number,
  prefix: string,
): Promise<BenchDevice[]> {
  const key = await call<{ key: string }>(gatewayUrl, 'POST', '/api/enrollment-key', adminToken);
  if (!key.body.key) throw new Error(`enrollment key: got ${key.status} ${JSON.stringify(key.body)}`);
  const devices: BenchDevice[] = [];
  for (let offset = 0; offset < count; offset += 100) {
    const codes = await call<{ codes: { code: string }[] }>(
      gatewayUrl,
      'POST',
      '/api/enrollment-codes',
      adminToken,
      {
        count: Math.min(100, count - offset),
      },
    );
    expectStatus('enrollment codes', codes, 200);
    await Promise.all(
      codes.body.codes.map(async ({ code }, index) => {
        const name = `${prefix}-${offset + index}`;
        const enrolled = await call<{ device_token: string; device_id: string; org_id: string }>(
          gatewayUrl,
          'POST',
          '/api/device/enroll',
          undefined,
          { code, machine_id: name, hostname: name, metadata: {} },
          { 'x-enrollment-key': key.body.key },
        );
        expectStatus('enroll', enrolled, 200);
        devices.push({
          deviceId: enrolled.body.device_id,
          orgId: enrolled.body.org_id,
          token: enrolled.body.device_token,
        });
      }),
    );
  }
  return devices;
}

export async function inBatches<T>(
  items: T[],
  size: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(work));
}

// --- report --------------------------------------------------------------------------------------

/** A Markdown table, formatted as Prettier does, so that it can go into docs/benchmarks.md as it is. */
export function table(header: string[], rows: string[][], rightAligned: (column: number) => boolean): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const format = (cells: string[]) =>
    `| ${cells.map((cell, column) => (rightAligned(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((width, column) => (rightAligned(column) ? `${'-'.repeat(width - 1)}:` : `:${'-'.repeat(width - 1)}`)).join(' | ')} |`;
  return [format(header), rule, ...rows.map(format)].join('\n');
}

export function machineDescription(): string {
  const model =
    /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown CPU';
  const load = loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
  return `${availableParallelism()} cores (${model}), Node ${process.version}, load average before the run ${load}`;
}

/** The figures of one measured run that the results table shows. */
export interface RunFigures {
  rps: number;
  p50: number;
  p99: number;
}

/** One scenario's runs and their medians. */
interface ScenarioSummary<Scenario, Run extends RunFigures> extends RunFigures {
  scenario: Scenario;
  runs: Run[];
}

/** Per scenario (in order; the first is the baseline of resultsTable), the medians of its runs' req/s, p50 and p99. */
export function summarize<Scenario extends { name: string }, Run extends RunFigures>(
  scenarios: readonly Scenario[],
  measurements: ReadonlyMap<string, Run[]>,
): ScenarioSummary<Scenario, Run>[] {
  return scenarios.map((scenario) => {
    const runs = measurements.get(scenario.name) ?? [];
    return {
      scenario,
      runs,
      rps: median(runs.map((run) => run.rps)),
      p50: median(runs.map((run) => run.p50)),
      p99: median(runs.map((run) => run.p99)),
    };
  });
}

/**
 * The results table: per scenario the median req/s, p50 and p99 (`latencyDecimals` decimals), req/s
 * relative to the first row (the baseline), req/s of every round, and `target(entry)`.
 */
export function resultsTable<Scenario extends { name: string }, Run extends RunFigures>(
  summary: ScenarioSummary<Scenario, Run>[],
  latencyDecimals: number,
  target: (entry: ScenarioSummary<Scenario, Run>) => string,
): string {
  const baselineRps = summary[0]?.rps ?? 0;
  return table(
    ['scenario', 'req/s (median)', 'p50 ms', 'p99 ms', 'req/s vs baseline', 'req/s per round', 'target'],
    summary.map((entry) => [
      entry.scenario.name,
      entry.rps.toFixed(0),
      entry.p50.toFixed(latencyDecimals),
      entry.p99.toFixed(latencyDecimals),
      `${((100 * entry.rps) / baselineRps).toFixed(1)}% (1/${(baselineRps / entry.rps).toFixed(1)})`,
      entry.runs.map((run) => run.rps.toFixed(0)).join(', '),
      target(entry),
    ]),
    (column) => column >= 1 && column <= 3,
  );
}

/** Measured windows of one scenario, each with the operations per second it achieved. */
export interface CpuColumn {
  name: string;
  runs: (CpuWindow & { opsPerSecond: number })[];
}

const isMachineRow = (name: string) => name.startsWith('machine') || name === 'other processes';

/** The rows of a CPU table: each process group, 'all benchmark processes', then the machine rows. */
function rowOrder(columns: CpuColumn[]): string[] {
  const processNames = [...(columns[0]?.runs[0]?.cpu.keys() ?? [])].filter(
    (name) => name !== 'all benchmark processes',
  );
  processNames.splice(processNames.indexOf('other processes'), 0, 'all benchmark processes');
  return processNames;
}

/** µs of CPU per operation of one process group in one window. */
export function cpuPerOperation(run: CpuWindow & { opsPerSecond: number }, name: string): number {
  return (((run.cpu.get(name) ?? 0) / 100) * 1e6) / run.opsPerSecond;
}

/**
 * The median of `values[i] / baseline[i]`: each run against the baseline's run of the same round, so a
 * machine that drifts between rounds (another VM's load, a CPU's clock) cancels out of the comparison.
 */
export function pairedRatio(values: number[], baseline: number[]): number {
  return median(values.map((value, round) => value / (baseline[round] as number)));
}

/** µs of CPU per operation of one process group, mean of a column's windows. */
export function meanCpuPerOperation(column: CpuColumn, name: string): number {
  return mean(column.runs.map((run) => cpuPerOperation(run, name)));
}

/**
 * The "Ceiling implied by the CPU cost" lines, one per column: `  <name> <µs> µs → ~<ops> req/s`, the
 * µs of CPU per operation of all benchmark processes and the operations per second that cost allows
 * if the benchmark has every core to itself; then `more(column)` (e.g. what single processes imply).
 */
export function ceilingLines<Column extends CpuColumn>(
  columns: Column[],
  nameWidth: number,
  more: (column: Column) => string,
): string[] {
  const cores = availableParallelism();
  return columns.map((column) => {
    const all = meanCpuPerOperation(column, 'all benchmark processes');
    return (
      `  ${column.name.padEnd(nameWidth)} ${all.toFixed(0).padStart(5)} µs → ~${((cores * 1e6) / all).toFixed(0)} req/s` +
      more(column)
    );
  });
}

/**
 * Per process and scenario (mean of the windows): % of one core, µs of CPU per operation, kernel
 * share, run-queue wait.
 */
export function cpuTable(columns: CpuColumn[], perWhat = 'req'): string {
  const processNames = rowOrder(columns);
  return table(
    ['process', ...columns.map(({ name }) => name)],
    processNames.map((name) => [
      name,
      ...columns.map(({ runs }) => {
        const share = mean(runs.map((run) => run.cpu.get(name) ?? 0));
        const perOperation = mean(runs.map((run) => cpuPerOperation(run, name)));
        const kernel = mean(runs.map((run) => run.kernel.get(name) ?? 0));
        if (isMachineRow(name)) return `${share.toFixed(0)}%`;
        if (name === 'all benchmark processes') return `${share.toFixed(0)}% · ${perOperation.toFixed(0)} µs`;
        return share < 1
          ? `${share.toFixed(0)}%`
          : `${share.toFixed(0)}% · ${perOperation.toFixed(0)} µs${perWhat === 'req' ? '' : `/${perWhat}`} · sys ${(100 * kernel).toFixed(0)}% · ` +
              `runq ${mean(runs.map((run) => run.runQueue.get(name) ?? 0)).toFixed(0)}%`;
      }),
    ]),
    (column) => column >= 1,
  );
}

// --- CPU profiles --------------------------------------------------------------------------------

/** A directory for this run's CPU profiles, tmp/bench-profiles/<time>/. */
export async function profileDirectory(): Promise<string> {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const directory = join(ROOT, 'tmp', 'bench-profiles', stamp);
  await mkdir(directory, { recursive: true });
  return directory;
}

export function relativeToRoot(path: string): string {
  return relative(ROOT, path);
}

/**
 * Records V8 CPU profiles of `targets` over exactly the duration of `work`, writes them to
 * `<directory>/<slug of label>.<service>.cpuprofile`, then prints their summaries.
 */
export async function profiled<T>(
  directory: string,
  label: string,
  targets: ChildService[],
  work: () => Promise<T>,
  describe: (outcome: T) => string,
): Promise<T> {
  await Promise.all(
    targets.map((target) => target.request({ type: 'profile-start', intervalUs: 1000 }, 'profile-started')),
  );
  const outcome = await work();
  const slug = label
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();
  const files = targets.map((target) => join(directory, `${slug}.${target.name}.cpuprofile`));
  await Promise.all(
    targets.map((target, i) => target.request({ type: 'profile-stop', file: files[i] }, 'profile-written')),
  );
  console.log(`${label} (profiled): ${describe(outcome)}\n`);
  for (const [i, target] of targets.entries()) {
    const summary = await summarizeProfileFile(files[i] as string, 15);
    const title = `${label} · ${target.name}`;
    if (summary.busyMs < 0.02 * summary.wallMs) console.log(`${title}: idle (not on this path)\n`);
    else console.log(formatProfileSummary(title, summary), '\n');
  }
  return outcome;
}

// --- running a benchmark -------------------------------------------------------------------------

/**
 * Runs `main` with a clean-up lifecycle; exit code 0 when it completes, 1 on any error (with the
 * last output of every service), 130 on Ctrl-C/SIGTERM (after stopping the services and dropping the
 * database; a second signal exits at once).
 */
/**
 * Runs `measure` on one topology: a single server (`cluster` null), or the local cluster of
 * scripts/infra/ensure-cluster.sh, made ready first, with CLICKHOUSE_URL and CLICKHOUSE_CLUSTER naming it.
 * `measure` gets a lifecycle of its own, closed when it ends, so that one system at a time loads the machine.
 */
export async function onTopology<T>(
  outer: Lifecycle,
  cluster: string | null,
  measure: (lifecycle: Lifecycle) => Promise<T>,
): Promise<T> {
  if (cluster !== null) {
    execFileSync('bash', ['scripts/infra/ensure-cluster.sh'], { stdio: ['ignore', 'inherit', 'inherit'] });
    process.env.CLICKHOUSE_URL = clickhouseNodeUrl(localCluster().clickhouse.nodes[0]!.name);
    process.env.CLICKHOUSE_CLUSTER = cluster;
  }
  const lifecycle = new Lifecycle((name, error) =>
    console.error(`cleanup: ${name} failed: ${error instanceof Error ? error.message : String(error)}`),
  );
  outer.add(cluster === null ? 'single-server system' : 'cluster system', () => lifecycle.close());
  try {
    return await measure(lifecycle);
  } finally {
    await lifecycle.close();
  }
}

export function runBenchmark(
  main: (lifecycle: Lifecycle, interrupted: () => boolean) => Promise<void>,
): void {
  const cleanup = new Lifecycle((name, error) =>
    console.error(`cleanup: ${name} failed: ${error instanceof Error ? error.message : String(error)}`),
  );
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(130);
    signalled = true;
    console.error(`\n${signal}: stopping the services and dropping the database…`);
    stopLoad();
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
        for (const service of services)
          console.error(`\nlast output of ${service.name}:\n${service.tail(15)}`);
        return 1;
      },
    )
    .then(async (code) => {
      await cleanup.close();
      process.exit(code);
    });
}

/**
 * Seeds one organization whose members are `users` users and returns their access tokens (the admin's
 * first). The first user's first login provisions the organization; everyone else is invited (the
 * invite token arrives by e-mail), accepts, and logs in. Needs a high RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE
 * (one accept per user). Waits a second at the end for the notifier to take the member.joined events.
 */
export async function seedMembers(
  system: Pick<BenchSystem, 'idp' | 'mail' | 'gatewayUrl'>,
  users: number,
  interrupted: () => boolean,
): Promise<string[]> {
  const { idp, mail, gatewayUrl } = system;
  const adminToken = await idp.issueUserToken({ email: 'user000@bench.test', name: 'Bench Admin' });
  const adminSession = await call<Session>(gatewayUrl, 'GET', '/api/session', adminToken);
  expectStatus('first login', adminSession, 200);
  const orgId = adminSession.body.org.id;
  const invitees = Array.from(
    { length: users - 1 },
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
  const members = await call<unknown[]>(gatewayUrl, 'GET', '/api/members', adminToken);
  expectStatus('members', members, 200);
  if (members.body.length !== Math.min(users, 50))
    throw new Error(`expected ${Math.min(users, 50)} members on the first page, got ${members.body.length}`);
  await sleep(1_000);
  return [adminToken, ...invitees.map((email) => inviteeTokens.get(email) as string)];
}
