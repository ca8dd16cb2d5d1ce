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
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import {
  ceilingLines,
  cpuTable,
  cpuWindow,
  DatabaseMonitor,
  machineDescription,
  mean,
  meanCpuPerOperation,
  GATEWAY_LOAD_OPTIONS,
  parseOptions,
  pgPerOperation,
  profileDirectory,
  profiled,
  quietNote,
  relativeToRoot,
  resultsTable,
  rotate,
  runBenchmark,
  runLoad,
  seedMembers,
  services,
  startSystem,
  summarize,
  waitForQuiet,
  type ChildService,
  type ClosedLoadResult,
  type CpuWindow,
  type PgCounters,
} from './bench-harness';

const TARGET_RPS = 3000;
const TARGET_P99_MS = 30;

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

function parseCommandLine(): Options {
  const options = parseOptions(process.argv.slice(2), process.env, GATEWAY_LOAD_OPTIONS, {
    profile: 'BENCH_PROFILE',
  });
  return {
    durationS: options.duration,
    warmupS: options.warmup,
    rounds: options.rounds,
    connections: options.connections,
    users: options.users,
    quietS: options.quiet,
    profile: options.profile,
  };
}

// --- load ----------------------------------------------------------------------------------------

interface Scenario {
  name: string;
  url: string;
  requests: autocannon.Request[];
  authenticated: boolean;
}

interface Measurement extends CpuWindow {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** pg_stat_database of the benchmark's database over the run, per request. */
  pg: PgCounters;
}

async function load(scenario: Scenario, options: Options, durationS: number): Promise<ClosedLoadResult> {
  // Each connection starts at another user, so concurrent requests carry different tokens.
  return runLoad({
    name: scenario.name,
    url: scenario.url,
    requests: scenario.requests,
    connections: options.connections,
    durationS,
    rotateRequests: true,
  });
}

// --- main ----------------------------------------------------------------------------------------

async function main(lifecycle: Lifecycle, interrupted: () => boolean): Promise<void> {
  const options = parseCommandLine();
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options.connections} connections, ${options.warmupS} s warm-up + ${options.durationS} s measured per run, ` +
      `${options.rounds} rounds, ${options.users} users\n`,
  );

  // Its own database, NATS namespace, identity provider and SMTP sink; every service in its own process.
  const system = await startSystem(lifecycle, {
    // Seeding accepts one invite per user on this unauthenticated route.
    gatewayEnv: { RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '100000' },
  });
  const { gatewayUrl, baselineUrl } = system;
  console.log(`started: ${services.map((service) => `${service.name} (pid ${service.pid})`).join(', ')}`);

  const seedStarted = performance.now();
  const tokens = await seedMembers(system, options.users, interrupted);
  console.log(
    `seeded: 1 organization, ${options.users} members (admin + ${options.users - 1} invited analysts) in ` +
      `${((performance.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );

  const authorized = (path: string): autocannon.Request[] =>
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
  const monitor = await DatabaseMonitor.connect(lifecycle, system.database.url);

  // Freshly started processes are slow until V8 has optimized the hot paths: warm every scenario
  // up once, longer, before the rounds (each measured run still gets its own warm-up).
  if (options.warmupS > 0) {
    for (const scenario of scenarios) await load(scenario, options, 2 * options.warmupS);
  }

  const measurements = new Map<string, Measurement[]>(scenarios.map((scenario) => [scenario.name, []]));
  for (let round = 0; round < options.rounds; round++) {
    for (const scenario of rotate(scenarios, round)) {
      if (interrupted()) throw new Error('interrupted');
      const processGroups = await monitor.processGroups();
      const quiet = options.quietS > 0 ? await waitForQuiet(processGroups, options.quietS) : undefined;
      if (options.warmupS > 0) await load(scenario, options, options.warmupS);
      const pgBefore = await monitor.counters();
      const before = await monitor.snapshot();
      const { result, completed, durationS } = await load(scenario, options, options.durationS);
      const after = await monitor.snapshot();
      const window = cpuWindow(before, after);
      await sleep(1_100); // let the backends flush their statistics
      const pgAfter = await monitor.counters();
      for (const service of services) service.assertAlive();
      const measurement: Measurement = {
        rps: completed / durationS,
        p50: result.latency.p50,
        p99: result.latency.p99,
        requests: completed,
        ...window,
        // The monitor's own two statements per snapshot are negligible next to thousands of requests.
        pg: pgPerOperation(pgBefore, pgAfter, completed),
      };
      measurements.get(scenario.name)?.push(measurement);
      console.log(
        `round ${round + 1}/${options.rounds}  ${scenario.name.padEnd(30)} ${measurement.rps.toFixed(0).padStart(6)} req/s  ` +
          `p50 ${measurement.p50.toFixed(1)} ms  p99 ${measurement.p99.toFixed(1)} ms  (${measurement.requests} requests, all 2xx; ` +
          `CPU of processes outside the benchmark ${(window.cpu.get('other processes') ?? 0).toFixed(0)}% of a core` +
          `${quietNote(quiet)})`,
      );
    }
  }

  // Report.
  const summary = summarize(scenarios, measurements);
  console.log(
    `\nResults: medians of ${options.rounds} rounds; ${options.connections} connections; ${options.durationS} s per measured run; ` +
      `target for authenticated routes ≥ ${TARGET_RPS} req/s with p99 < ${TARGET_P99_MS} ms\n`,
  );
  console.log(
    resultsTable(summary, 1, ({ scenario, rps, p99 }) =>
      scenario.authenticated
        ? rps >= TARGET_RPS && p99 < TARGET_P99_MS
          ? 'met'
          : `NOT met (${rps >= TARGET_RPS ? '' : `req/s ${((100 * rps) / TARGET_RPS).toFixed(0)}% of target`}${rps < TARGET_RPS && p99 >= TARGET_P99_MS ? ', ' : ''}${p99 >= TARGET_P99_MS ? `p99 ≥ ${TARGET_P99_MS} ms` : ''})`
        : '—',
    ),
  );

  console.log(
    '\nCPU during the measured runs (mean of rounds; % of one core, the machine has ' +
      `${availableParallelism() * 100}%; µs of CPU per request; share of that CPU time spent in the kernel; ` +
      `"runq": time the main thread was ready to run but waited for a CPU, % of wall time):\n`,
  );
  const columns = summary.map(({ scenario, runs }) => ({
    name: scenario.name,
    authenticated: scenario.authenticated,
    runs: runs.map((run) => ({ ...run, opsPerSecond: run.rps })),
  }));
  console.log(cpuTable(columns));

  const cores = availableParallelism();
  console.log(
    `\nCeiling implied by the CPU cost per request if the benchmark had all ${cores} cores to itself ` +
      `(${cores} × 10⁶ µs / µs per request, all benchmark processes including the load generator):`,
  );
  const ceilings = ceilingLines(columns, 30, (column) =>
    column.authenticated
      ? `; the gateway alone (one process, one core) → ~${(1e6 / meanCpuPerOperation(column, 'gateway')).toFixed(0)} req/s`
      : '',
  );
  for (const line of ceilings) console.log(line);

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
      ['gateway', 'identity', 'billing'].map((name) => system.service(name)),
    );
}

/** One extra run per scenario with CPU profiles of the given services, recorded over the measured window only. */
async function profileRuns(scenarios: Scenario[], options: Options, targets: ChildService[]): Promise<void> {
  const directory = await profileDirectory();
  console.log(
    `\nCPU profiles (extra runs, not part of the figures above; profiling slows the processes down) in ${relativeToRoot(directory)}/\n`,
  );
  for (const scenario of scenarios) {
    if (options.warmupS > 0) await load(scenario, options, options.warmupS);
    await profiled(
      directory,
      scenario.name,
      targets,
      () => load(scenario, options, options.durationS),
      ({ result, completed, durationS }) =>
        `${(completed / durationS).toFixed(0)} req/s, p99 ${result.latency.p99.toFixed(1)} ms`,
    );
  }
}

runBenchmark(main);
