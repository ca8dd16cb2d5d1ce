/**
 * Analytics query benchmark (`npm run bench:queries [-- options]`), not a test.
 *
 * One organization with 1,000 devices enrolled through the API and 10 million telemetry events over
 * the last 30 days (generated inside ClickHouse into the raw table, so the rollups are filled by their
 * materialized views exactly as ingestion fills them). Then, as open loops at a fixed rate:
 * - `GET /api/analytics/summary` and `GET /api/analytics/series` through the gateway (JWT of an
 *   ORG_ADMIN; the gateway's answer cache, `ANALYTICS_CACHE_TTL_MS`, as configured, else gRPC to analytics
 *   and the rollup query in ClickHouse), each a mix of both windows, every metric, organization-wide and
 *   scoped to a device;
 * - the baseline, in the same run: the very SQL the analytics service sends for the same requests
 *   (`totalsQuery`, `bucketTotalsQuery`), posted straight to ClickHouse's HTTP interface.
 * Reports p50 and p99 (latency from each request's due time), the ratio of the REST p99 to the
 * baseline's, CPU per request by process, and checks that the REST answers equal ClickHouse's.
 *
 * Options (flag or environment variable):
 *   --events N     BENCH_EVENTS     events generated (10000000)
 *   --devices N    BENCH_DEVICES    devices enrolled, the events spread over them (1000)
 *   --days N       BENCH_DAYS       days the events span, ending now (30)
 *   --rate N       BENCH_RATE       requests per second of the REST open loops (1000)
 *   --baseline-rate N BENCH_BASELINE_RATE  requests per second of the straight-to-ClickHouse loops (100: ClickHouse
 *                                   18.16 answers about 300 of these queries a second on this machine, so
 *                                   at 1,000/s its queue, not the query, would be measured)
 *   --duration N   BENCH_DURATION   seconds of each measured run (10)
 *   --warmup N     BENCH_WARMUP     seconds of warm-up run before each measured one (3)
 *   --rounds N     BENCH_ROUNDS     rounds; each measures every scenario, order rotated (3)
 *   --cluster 1    BENCH_CLUSTER    also on the local cluster (scripts/infra/ensure-cluster.sh: ClickHouse 2 shards x
 *                                   2 replicas, NATS x 3), after the single-server run, and the cluster's p99 as a
 *                                   multiple of the single server's (0)
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type autocannon from 'autocannon';
import { windowRange, type AnalyticsWindow } from '@sts/analytics-domain/analytics-model';
import { bucketTotalsQuery, totalsQuery } from '@sts/analytics-infra/clickhouse-analytics-store';
import { createClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { sql, type SqlFragment } from '@sts/clickhouse/sql-escape';
import { clientSettingsOf } from '@sts/analytics-infra/analytics-tables';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { localCluster, natsClusterUrl } from '@sts/testing/local-cluster';
import {
  DatabaseMonitor,
  call,
  cpuTable,
  cpuWindow,
  enrollDevices,
  expectStatus,
  machineDescription,
  parseOptions,
  percentile,
  rotate,
  onTopology,
  runBenchmark,
  runOpenLoad,
  slowRequestsDuringGc,
  startSystem,
  table,
  withGcPauses,
  type CpuColumn,
} from './bench-harness';

const options = parseOptions(
  process.argv.slice(2),
  process.env,
  {
    events: { variable: 'BENCH_EVENTS', fallback: 10_000_000, min: 1_000 },
    devices: { variable: 'BENCH_DEVICES', fallback: 1_000, min: 1 },
    days: { variable: 'BENCH_DAYS', fallback: 30, min: 1 },
    rate: { variable: 'BENCH_RATE', fallback: 1_000, min: 1 },
    'baseline-rate': { variable: 'BENCH_BASELINE_RATE', fallback: 100, min: 1 },
    duration: { variable: 'BENCH_DURATION', fallback: 10, min: 1 },
    warmup: { variable: 'BENCH_WARMUP', fallback: 3, min: 0 },
    rounds: { variable: 'BENCH_ROUNDS', fallback: 3, min: 1 },
    cluster: { variable: 'BENCH_CLUSTER', fallback: 0, min: 0 },
  },
  {},
);

const METRICS = ['total_analyzed', 'dangerous_blocks', 'risky_warnings', 'avg_classification_ms'] as const;
const WINDOWS: AnalyticsWindow[] = ['24h', '30d'];

/** One request of a scenario: its REST path and the SQL the analytics service sends for it. */
interface QueryCase {
  path: string;
  sql: SqlFragment;
}

interface Scenario {
  name: string;
  url: string;
  rate: number;
  requests: autocannon.Request[];
}

type Medians = Map<string, { p50: number; p99: number; rps: number }>;

runBenchmark(async (lifecycle) => {
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options.events} events from ${options.devices} devices over ${options.days} days; open loops at ` +
      `${options.rate} req/s (REST) and ${options['baseline-rate']} req/s (straight to ClickHouse), ${options.warmup} s warm-up + ${options.duration} s measured, ${options.rounds} rounds`,
  );
  const single = await onTopology(lifecycle, null, (own) => measureOn(own, null));
  if (!options.cluster) return;
  const name = localCluster().clickhouse.cluster;
  const cluster = await onTopology(lifecycle, name, (own) => measureOn(own, name));
  console.log('\ncluster / single server, REST p99 (target ≤ 2):');
  for (const [name, figures] of cluster) {
    if (!name.includes('(REST)')) continue;
    console.log(
      `  ${name}: ${(figures.p99 / single.get(name)!.p99).toFixed(2)}× (${figures.p99.toFixed(1)} ms vs ${single.get(name)!.p99.toFixed(1)} ms)`,
    );
  }
});

/** One run on a single server (`cluster` null) or on the local cluster; the medians of each scenario. */
async function measureOn(lifecycle: Lifecycle, cluster: string | null): Promise<Medians> {
  console.log(
    cluster === null ? '\n== single server' : `\n== cluster ${cluster} (ClickHouse 2 × 2, NATS × 3)`,
  );
  const clickhouse = testClickHouseDatabase('benchqueries');
  lifecycle.add('clickhouse database', () => clickhouse.drop());
  const system = await startSystem(lifecycle, {
    enrollment: true,
    ...(cluster === null ? {} : { sharedEnv: { NATS_URL: natsClusterUrl(), NATS_STREAM_REPLICAS: '3' } }),
    analytics: {
      processes: 1,
      clickhouseUrl: clickhouse.url,
      database: clickhouse.name,
      ...(cluster === null ? {} : { env: { CLICKHOUSE_CLUSTER: cluster } }),
    },
    // 1,000 enrollments from one address: more than a minute's default allowance of 600.
    gatewayEnv: { ENROLL_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: '100000' },
  });
  const monitor = await DatabaseMonitor.connect(lifecycle, system.database.url);
  const admin = await system.idp.issueUserToken({ email: 'bench@queries.test', name: 'Bench' });

  const enrollStart = performance.now();
  const devices = await enrollDevices(system.gatewayUrl, admin, options.devices, 'ws');
  const orgId = devices[0]!.orgId;
  console.log(
    `enrolled ${devices.length} devices in ${((performance.now() - enrollStart) / 1000).toFixed(1)} s`,
  );

  const clusterSettings = clientSettingsOf({ database: clickhouse.name, cluster });
  const ch = createClickHouseClient({
    url: clickhouse.url,
    database: clickhouse.name,
    requestTimeoutMs: 600_000,
    settings: clusterSettings,
  });
  lifecycle.add('clickhouse client', () => ch.close());
  const scalar = async (query: SqlFragment): Promise<number> => {
    const result = await ch.query({ query: query.text, format: 'JSONEachRow' });
    const [row] = await result.json<{ n: string | number }>();
    return Number(row?.n ?? 0);
  };
  // The analytics service learns of the devices from device.enrolled events (organization-wide
  // figures leave out disabled and deleted devices): wait until it knows them all.
  for (let waited = 0; ; waited += 200) {
    const known = await scalar(
      sql`SELECT uniqExact(device_id) AS n FROM device_states WHERE org_id = ${orgId}`,
    );
    if (known === devices.length) break;
    if (waited > 60_000) throw new Error(`analytics knows ${known} of ${devices.length} devices after 60 s`);
    await sleep(200);
  }

  // Events spread evenly over the span ending now, newest first (so each block of the insert falls
  // in few daily partitions), each on a device, site, verdict and latency picked by hashing its number.
  const nowS = Math.floor(Date.now() / 1000);
  const spanS = options.days * 86_400;
  const generateStart = performance.now();
  await ch.command({
    query:
      sql`INSERT INTO telemetry_events (org_id, device_id, batch_key, observed_at, host, verdict, classification_ms, received_at)
      SELECT ${orgId}, device_id, batch_key, at, host, verdict, classification_ms, at FROM (
        SELECT
          arrayElement(${devices.map((device) => device.deviceId)}, (cityHash64(number) % ${devices.length}) + 1) AS device_id,
          concat('bench:', toString(intDiv(number, 1000))) AS batch_key,
          toDateTime(${nowS} - intDiv(number * ${spanS}, ${options.events}), 'UTC') AS at,
          concat('site-', toString(cityHash64(number, 2) % 5000), '.example') AS host,
          cityHash64(number, 3) % 100 AS roll,
          CAST(multiIf(roll < 3, 'blocked', roll < 10, 'warned', 'allowed') AS Enum8('allowed' = 1, 'blocked' = 2, 'warned' = 3)) AS verdict,
          toFloat32(2 + cityHash64(number, 4) % 60) AS classification_ms
        FROM system.numbers LIMIT ${options.events}
      )`.text,
  });
  const stored = await scalar(sql`SELECT count() AS n FROM telemetry_events WHERE org_id = ${orgId}`);
  const rolledUp = await scalar(
    sql`SELECT sum(total_analyzed) AS n FROM telemetry_daily WHERE org_id = ${orgId}`,
  );
  if (stored !== options.events || rolledUp !== options.events)
    throw new Error(
      `generated ${options.events} events, the raw table holds ${stored}, the daily rollup ${rolledUp}`,
    );
  const parts = await ch.query({
    query: `SELECT table, count() AS parts, sum(rows) AS rows FROM system.parts
      WHERE database = currentDatabase() AND active AND table LIKE 'telemetry_%' GROUP BY table ORDER BY table`,
    format: 'JSONEachRow',
  });
  console.log(
    `generated ${options.events} events in ClickHouse in ${((performance.now() - generateStart) / 1000).toFixed(1)} s; ` +
      (await parts.json<{ table: string; parts: string; rows: string }>())
        .map((row) => `${row.table} ${row.rows} rows in ${row.parts} parts`)
        .join(', '),
  );

  // The requests: every metric and window, organization-wide and for devices spread over the fleet.
  const now = new Date();
  const someDevices = [0, 1, 2, 3].map((i) => devices[Math.floor((i * devices.length) / 4)]!.deviceId);
  const summaries: QueryCase[] = [];
  const series: QueryCase[] = [];
  for (const window of WINDOWS) {
    const range = windowRange(window, now);
    for (const deviceId of [null, null, ...someDevices]) {
      const scope = deviceId ? `&device_id=${deviceId}` : '';
      summaries.push({
        path: `/api/analytics/summary?window=${window}${scope}`,
        sql: totalsQuery(orgId, range, deviceId),
      });
    }
    for (const metric of METRICS) {
      for (const deviceId of [null, someDevices[METRICS.indexOf(metric)]!]) {
        const scope = deviceId ? `&device_id=${deviceId}` : '';
        series.push({
          path: `/api/analytics/series?metric=${metric}&window=${window}${scope}`,
          sql: bucketTotalsQuery(orgId, range, deviceId),
        });
      }
    }
  }

  // The REST answers are ClickHouse's: the 30-day summary against the same query sent directly.
  const rest = await call<{ total_analyzed: number }>(
    system.gatewayUrl,
    'GET',
    '/api/analytics/summary?window=30d',
    admin,
  );
  expectStatus('summary', rest, 200);
  const direct = await scalar(
    sql`SELECT total_analyzed AS n FROM (${totalsQuery(orgId, windowRange('30d', new Date()), null)})`,
  );
  if (rest.body.total_analyzed !== direct || direct < options.events * 0.9)
    throw new Error(`the 30-day summary says ${rest.body.total_analyzed}; ClickHouse says ${direct}`);
  console.log(`check: the 30-day summary through REST counts ${direct} events, as ClickHouse does`);

  const viaRest = (name: string, cases: QueryCase[]): Scenario => ({
    name,
    url: system.gatewayUrl,
    rate: options.rate,
    requests: cases.map((item) => ({
      method: 'GET',
      path: item.path,
      headers: { authorization: `Bearer ${admin}` },
    })),
  });
  const clickhouseUrl = new URL(clickhouse.url);
  const straight = (name: string, cases: QueryCase[]): Scenario => ({
    name,
    url: clickhouseUrl.origin,
    rate: options['baseline-rate'],
    requests: cases.map((item) => ({
      method: 'POST',
      path: `/?database=${encodeURIComponent(clickhouse.name)}${Object.entries(clusterSettings)
        .map(([name, value]) => `&${name}=${encodeURIComponent(String(value))}`)
        .join('')}`,
      body: `${item.sql.text} FORMAT JSONEachRow`,
    })),
  });
  const scenarios: Scenario[] = [
    viaRest('summary (REST)', summaries),
    straight('summary SQL (ClickHouse)', summaries),
    viaRest('series (REST)', series),
    straight('series SQL (ClickHouse)', series),
  ];

  const latencies = new Map<string, { p50: number; p99: number; rps: number }[]>();
  const cpuColumns = new Map<string, CpuColumn>(
    scenarios.map((scenario) => [scenario.name, { name: scenario.name, runs: [] }]),
  );
  for (let round = 0; round < options.rounds; round++) {
    for (const scenario of rotate(scenarios, round)) {
      const load = (durationS: number) =>
        runOpenLoad({
          name: scenario.name,
          url: scenario.url,
          requests: rotate(scenario.requests, round),
          ratePerSecond: scenario.rate,
          durationS,
          maxConnections: 64,
        });
      if (options.warmup > 0) await load(options.warmup);
      const before = await monitor.snapshot();
      // Which processes were collecting garbage while the slow requests waited.
      const { result, pauses } = await withGcPauses(
        ['gateway', 'analytics-1'].map((name) => system.service(name)),
        () => load(options.duration),
      );
      pauses.set('load generator', result.generatorGcPauses);
      const cpu = cpuWindow(before, await monitor.snapshot());
      const figures = {
        p50: percentile(result.latenciesMs, 50),
        p99: percentile(result.latenciesMs, 99),
        rps: result.completed / result.durationS,
      };
      latencies.set(scenario.name, [...(latencies.get(scenario.name) ?? []), figures]);
      cpuColumns.get(scenario.name)!.runs.push({ ...cpu, opsPerSecond: figures.rps });
      console.log(
        `round ${round + 1}/${options.rounds}  ${scenario.name.padEnd(26)} ${figures.rps.toFixed(0).padStart(5)} req/s  ` +
          `p50 ${figures.p50.toFixed(1).padStart(6)} ms  p99 ${figures.p99.toFixed(1).padStart(6)} ms; ` +
          `≥ 50 ms by second due: ${result.slowBySecond.join(' ')}; load generator's longest stall ${result.generatorStallMs.toFixed(0)} ms` +
          `\n    ${slowRequestsDuringGc(result.slowRequests, pauses)}`,
      );
    }
  }

  const median = (values: number[]) =>
    percentile(
      [...values].sort((a, b) => a - b),
      50,
    );
  const medians = (name: string) => {
    const runs = latencies.get(name)!;
    return {
      p50: median(runs.map((run) => run.p50)),
      p99: median(runs.map((run) => run.p99)),
      rps: median(runs.map((run) => run.rps)),
    };
  };
  console.log(
    `\nResults: medians of ${options.rounds} rounds, open loops at ${options.rate} req/s (REST) and ${options['baseline-rate']} req/s (ClickHouse)\n`,
  );
  console.log(
    table(
      ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'p99 vs ClickHouse'],
      scenarios.map((scenario) => {
        const figures = medians(scenario.name);
        const baseline = scenario.name.includes('(REST)')
          ? medians(scenario.name.replace(' (REST)', ' SQL (ClickHouse)'))
          : undefined;
        return [
          scenario.name,
          figures.rps.toFixed(0),
          figures.p50.toFixed(1),
          figures.p99.toFixed(1),
          baseline ? `${(figures.p99 / baseline.p99).toFixed(2)}×` : '',
        ];
      }),
      (column) => column >= 1,
    ),
  );
  console.log('\nCPU per scenario (mean of rounds; % of one core · µs of CPU per request):\n');
  console.log(cpuTable([...cpuColumns.values()]));
  return new Map(scenarios.map((scenario) => [scenario.name, medians(scenario.name)]));
}
