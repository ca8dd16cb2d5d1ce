/**
 * What metrics and tracing cost (`npm run bench:observability [-- --duration 10 --rounds 3]`), not a test.
 *
 * The gateway benchmark's routes (authenticated GET /api/session and GET /api/members: gateway → gRPC
 * → PostgreSQL) on three identical systems started side by side in this run: `off` (the default: no
 * metrics endpoint, no tracing; the metric values are still counted in memory), `on` (every process
 * serves GET /metrics, scraped every 2 s where Prometheus scrapes every 15–60 s, and exports every span
 * over OTLP/HTTP to a collector stand-in in this process) and `on 10%` (the same with
 * OTEL_TRACES_SAMPLER=parentbased_traceidratio at 0.1, as production would sample). Rounds rotate over
 * the systems, so all see the same machine. A bare Fastify hello-world is the usual baseline.
 * BENCH_VARIANTS=metrics,on,on 10%,on 1%,on 0% chooses the systems besides `off` (`metrics`: the endpoint
 * and scraping without tracing; `on 1%` samples one trace in a hundred; `on 0%` samples none, so every
 * request makes an unsampled span and nothing is exported).
 *
 * Goal: with metrics and tracing on, at most 10 % fewer requests per second than off. Besides the medians, each
 * system is reported paired with `off` in the same round (median of the rounds' ratios): drift between rounds cancels.
 *
 * Options (flag or environment variable): --duration N (BENCH_DURATION, 10), --warmup N (BENCH_WARMUP, 3),
 * --rounds N (BENCH_ROUNDS, 3), --connections N (BENCH_CONNECTIONS, 64), --users N (BENCH_USERS, 64),
 * --quiet N (BENCH_QUIET, 30), --profile (BENCH_PROFILE=1: afterwards, one extra run per 'on' scenario
 * with V8 CPU profiles of both gateways under the same load, in tmp/bench-profiles/). Exit code 0 when the measurement completed, 1 on any error (a single
 * non-2xx answer included), 130 when interrupted.
 */
import type autocannon from 'autocannon';
import { startOtlpCollector } from '@sts/stand-ins/otlp-collector';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import {
  cpuTable,
  cpuPerOperation,
  cpuWindow,
  DatabaseMonitor,
  machineDescription,
  meanCpuPerOperation,
  GATEWAY_LOAD_OPTIONS,
  pairedRatio,
  parseOptions,
  profileDirectory,
  profiled,
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
  quietNote,
  type CpuWindow,
} from './bench-harness';

const MAX_COST = 0.1;
/** What each system has on; BENCH_VARIANTS picks some (comma-separated), `off` always included. */
const ALL_VARIANTS = ['off', 'metrics', 'on', 'on 10%', 'on 1%', 'on 0%'] as const;
type Variant = (typeof ALL_VARIANTS)[number];
const VARIANTS: Variant[] = process.env.BENCH_VARIANTS
  ? [
      'off',
      ...ALL_VARIANTS.filter(
        (variant) => variant !== 'off' && process.env.BENCH_VARIANTS!.split(',').includes(variant),
      ),
    ]
  : ['off', 'on', 'on 10%'];
const ROUTES = ['/api/session', '/api/members'];
/** The sampler of each traced system (the SDK's default, parent-based always-on, for `on`). */
const SAMPLERS: Record<Variant, Record<string, string>> = {
  off: {},
  metrics: {},
  on: {},
  'on 10%': { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
  'on 1%': { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
  'on 0%': { OTEL_TRACES_SAMPLER: 'always_off' },
};
const SCRAPE_INTERVAL_MS = 2_000;

interface Scenario {
  name: string;
  url: string;
  requests: autocannon.Request[];
  /** Which system serves it, or none for the baseline. */
  system: Variant | undefined;
  route: string | undefined;
  monitor: DatabaseMonitor;
}

interface Measurement extends CpuWindow {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
}

async function main(lifecycle: Lifecycle, interrupted: () => boolean): Promise<void> {
  const parsed = parseOptions(process.argv.slice(2), process.env, GATEWAY_LOAD_OPTIONS, {
    profile: 'BENCH_PROFILE',
  });
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${parsed.connections} connections, ${parsed.warmup} s warm-up + ${parsed.duration} s measured per run, ` +
      `${parsed.rounds} rounds, ${parsed.users} users; metrics scraped every ${SCRAPE_INTERVAL_MS / 1000} s\n`,
  );

  const collector = await startOtlpCollector({ countOnly: true });
  lifecycle.add('otlp collector', () => collector.close());
  // Seeding accepts one invite per user on this unauthenticated route.
  const gatewayEnv = { RATE_LIMIT_UNAUTHENTICATED_PER_MINUTE: '100000' };
  const systems = new Map<Variant, Awaited<ReturnType<typeof startSystem>>>();
  for (const variant of VARIANTS) {
    systems.set(
      variant,
      await startSystem(lifecycle, {
        label: variant,
        gatewayEnv,
        observability:
          variant === 'off'
            ? undefined
            : {
                otlpEndpoint: variant === 'metrics' ? undefined : collector.url,
                env: SAMPLERS[variant],
              },
      }),
    );
  }
  const system = (variant: Variant) => systems.get(variant)!;
  console.log(`started: ${services.map((service) => `${service.name} (pid ${service.pid})`).join(', ')}`);
  const tokens = new Map<Variant, string[]>();
  for (const variant of VARIANTS)
    tokens.set(variant, await seedMembers(system(variant), parsed.users, interrupted));
  console.log(`seeded: one organization of ${parsed.users} members in each system\n`);

  // Prometheus, as a platform would run it (more often): every process of the 'on' system.
  let scrapes = 0;
  let scrapeFailures = 0;
  const scraper = setInterval(() => {
    for (const url of [...systems.values()].flatMap((entry) => entry.metricsUrls)) {
      void fetch(url)
        .then(async (response) => {
          await response.text();
          if (response.status === 200) scrapes++;
          else scrapeFailures++;
        })
        .catch(() => scrapeFailures++);
    }
  }, SCRAPE_INTERVAL_MS);
  lifecycle.add('scraper', () => clearInterval(scraper));

  const monitors = new Map<Variant, DatabaseMonitor>();
  for (const variant of VARIANTS) {
    monitors.set(variant, await DatabaseMonitor.connect(lifecycle, system(variant).database.url));
  }
  const authorized = (tokens: string[], path: string): autocannon.Request[] =>
    tokens.map((token) => ({ method: 'GET', path, headers: { authorization: `Bearer ${token}` } }));
  const scenarios: Scenario[] = [
    {
      name: 'baseline: Fastify hello-world',
      url: system('off').baselineUrl,
      requests: [{ method: 'GET', path: '/' }],
      system: undefined,
      route: undefined,
      monitor: monitors.get('off')!,
    },
  ];
  for (const route of ROUTES) {
    for (const variant of VARIANTS) {
      scenarios.push({
        name: `GET ${route} (${variant})`,
        url: system(variant).gatewayUrl,
        requests: authorized(tokens.get(variant)!, route),
        system: variant,
        route,
        monitor: monitors.get(variant)!,
      });
    }
  }
  const load = (scenario: Scenario, durationS: number) =>
    runLoad({
      name: scenario.name,
      url: scenario.url,
      requests: scenario.requests,
      connections: parsed.connections,
      durationS,
      rotateRequests: true,
    });

  if (parsed.warmup > 0) for (const scenario of scenarios) await load(scenario, 2 * parsed.warmup);
  let measuredOnRequests = 0;
  let measuredOnSpans = 0;
  const measurements = new Map<string, Measurement[]>(scenarios.map((scenario) => [scenario.name, []]));
  for (let round = 0; round < parsed.rounds; round++) {
    for (const scenario of rotate(scenarios, round)) {
      if (interrupted()) throw new Error('interrupted');
      const { monitor } = scenario;
      const quiet =
        parsed.quiet > 0 ? await waitForQuiet(await monitor.processGroups(), parsed.quiet) : undefined;
      if (parsed.warmup > 0) await load(scenario, parsed.warmup);
      const spansAtStart = collector.spanCount;
      const before = await monitor.snapshot();
      const { result, completed, durationS } = await load(scenario, parsed.duration);
      const after = await monitor.snapshot();
      for (const service of services) service.assertAlive();
      if (scenario.system === 'on') measuredOnRequests += completed;
      if (scenario.system === 'on') measuredOnSpans += collector.spanCount - spansAtStart;
      const measurement: Measurement = {
        rps: completed / durationS,
        p50: result.latency.p50,
        p99: result.latency.p99,
        requests: completed,
        ...cpuWindow(before, after),
      };
      measurements.get(scenario.name)?.push(measurement);
      console.log(
        `round ${round + 1}/${parsed.rounds}  ${scenario.name.padEnd(30)} ${measurement.rps.toFixed(0).padStart(6)} req/s  ` +
          `p50 ${measurement.p50.toFixed(1)} ms  p99 ${measurement.p99.toFixed(1)} ms  (${completed} requests, all 2xx${quietNote(quiet)})`,
      );
    }
  }

  const summary = summarize(scenarios, measurements);
  console.log(
    `\nResults: medians of ${parsed.rounds} rounds; ${parsed.connections} connections; ${parsed.duration} s per measured run\n`,
  );
  const byName = new Map(summary.map((entry) => [entry.scenario.name, entry]));
  console.log(
    resultsTable(summary, 1, ({ scenario, rps }) => {
      if (scenario.system === undefined || scenario.system === 'off') return '—';
      const offRps = byName.get(`GET ${scenario.route} (off)`)?.rps ?? Number.NaN;
      const cost = 1 - rps / offRps;
      return `${(100 * cost).toFixed(1)} % fewer req/s than off: ${cost <= MAX_COST ? 'met' : 'NOT met'} (goal ≤ ${100 * MAX_COST} %)`;
    }),
  );
  const columns = summary.map(({ scenario, runs }) => ({
    name: scenario.name,
    authenticated: scenario.system !== undefined,
    runs: runs.map((run) => Object.assign({}, run, { opsPerSecond: run.rps })),
  }));
  console.log('\nCPU during the measured runs (mean of rounds; % of one core; µs of CPU per request):\n');
  console.log(cpuTable(columns));
  console.log('\nCPU of the gateway per request, by system:');
  for (const route of ROUTES) {
    const perRequest = VARIANTS.map((variant) => {
      const column = columns.find((entry) => entry.name === `GET ${route} (${variant})`);
      return column ? meanCpuPerOperation(column, `gateway [${variant}]`) : Number.NaN;
    });
    console.log(
      `  GET ${route}: ` +
        VARIANTS.map(
          (variant, index) => `${variant} ${(perRequest[index] ?? Number.NaN).toFixed(0)} µs`,
        ).join(', '),
    );
  }
  // What the goal compares, freed of drift between rounds: each run against off's run of the same round.
  console.log('\nPaired with off in the same round (median of the rounds’ ratios):');
  for (const route of ROUTES) {
    const off = columns.find((entry) => entry.name === `GET ${route} (off)`);
    if (!off) continue;
    const offCpu = off.runs.map((run) => cpuPerOperation(run, 'gateway [off]'));
    for (const variant of VARIANTS.filter((entry) => entry !== 'off')) {
      const column = columns.find((entry) => entry.name === `GET ${route} (${variant})`);
      if (!column) continue;
      const rps = pairedRatio(
        column.runs.map((run) => run.rps),
        off.runs.map((run) => run.rps),
      );
      const cpu = pairedRatio(
        column.runs.map((run) => cpuPerOperation(run, `gateway [${variant}]`)),
        offCpu,
      );
      console.log(
        `  GET ${route} (${variant}): ${(100 * (1 - rps)).toFixed(1)} % fewer req/s, ` +
          `gateway CPU per request ×${cpu.toFixed(3)}`,
      );
    }
  }
  console.log(
    `\nTraces: ${measuredOnSpans} spans received during the measured runs of 'on' ` +
      `(${(measuredOnSpans / Math.max(measuredOnRequests, 1)).toFixed(2)} per request), ` +
      `${collector.requests} OTLP export requests, ${(collector.bytes / 1e6).toFixed(1)} MB in all; ` +
      `metrics: ${scrapes} scrapes answered, ${scrapeFailures} failed.`,
  );

  if (parsed.profile) {
    const directory = await profileDirectory();
    console.log(
      `\nCPU profiles (extra runs, not part of the figures above) in ${relativeToRoot(directory)}/\n`,
    );
    for (const scenario of scenarios) {
      if (scenario.system === undefined) continue;
      await profiled(
        directory,
        scenario.name,
        [system(scenario.system).service('gateway')],
        () => load(scenario, parsed.duration),
        ({ completed, durationS }) => `${(completed / durationS).toFixed(0)} req/s`,
      );
    }
  }
}

runBenchmark(main);
