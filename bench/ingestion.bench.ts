/**
 * Telemetry ingestion benchmark (`npm run bench:ingestion [-- options]`), not a test.
 *
 * Agent-shaped batches (POST /api/device/telemetry, one device token per batch) → gateway → JetStream →
 * analytics → ClickHouse, every service in its own process as in production. Reports:
 * - end-to-end events/s: events sent during the load, divided by the time from the first request until
 *   the last of them was queryable (in ClickHouse's raw table);
 * - the baseline, measured in the same run: the same rows inserted straight into ClickHouse as
 *   JSONEachRow (a table of the same columns, no views), in inserts of 100,000 rows;
 * - request latency (p50, p99) and request-to-queryable latency (p50, p99) of every 10th batch, seen by
 *   polling the batch ledger every 100 ms;
 * - the check that ClickHouse holds exactly the events that were sent.
 *
 * Options (flag or environment variable):
 *   --duration N     BENCH_DURATION     seconds of load (20)
 *   --connections N  BENCH_CONNECTIONS  concurrent requests (16)
 *   --devices N      BENCH_DEVICES      enrolled devices the batches come from (50)
 *   --batch N        BENCH_BATCH        events per batch (1000)
 *   --analytics N    BENCH_ANALYTICS    analytics processes sharing the consumer (1)
 *   --baseline N     BENCH_BASELINE     rows of the raw-insert baseline (1000000)
 *   --rate N         BENCH_RATE         events/s offered as an open loop (batches at fixed intervals, latency from
 *                                       each batch's due time); 0: as fast as the connections go (capacity) (0)
 *   --cluster 1      BENCH_CLUSTER      also on the local cluster (scripts/infra/ensure-cluster.sh: ClickHouse 2 shards
 *                                       x 2 replicas, NATS x 3 with 3 copies of every stream), after the single-server
 *                                       run, and the cluster's figures as a share of the single server's (0)
 * The analytics processes take TELEMETRY_BATCH_MESSAGES and TELEMETRY_BATCH_WAIT_MS from the environment when set.
 * Exit code 0 when the measurement completed (whether or not the target is met), 1 on any error.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClickHouseClient } from '@sts/clickhouse/clickhouse-client';
import { identifier, sql } from '@sts/clickhouse/sql-escape';
import type { Lifecycle } from '@sts/runtime/lifecycle';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { localCluster, natsClusterUrl } from '@sts/testing/local-cluster';
import {
  enrollDevices,
  machineDescription,
  parseOptions,
  percentile,
  onTopology,
  runBenchmark,
  startSystem,
} from './bench-harness';

const options = parseOptions(
  process.argv.slice(2),
  process.env,
  {
    duration: { variable: 'BENCH_DURATION', fallback: 20, min: 1 },
    connections: { variable: 'BENCH_CONNECTIONS', fallback: 16, min: 1 },
    devices: { variable: 'BENCH_DEVICES', fallback: 50, min: 1 },
    batch: { variable: 'BENCH_BATCH', fallback: 1000, min: 1 },
    analytics: { variable: 'BENCH_ANALYTICS', fallback: 1, min: 1 },
    baseline: { variable: 'BENCH_BASELINE', fallback: 1_000_000, min: 100_000 },
    rate: { variable: 'BENCH_RATE', fallback: 0, min: 0 },
    cluster: { variable: 'BENCH_CLUSTER', fallback: 0, min: 0 },
  },
  {},
);

const VERDICTS = [
  'allowed',
  'allowed',
  'allowed',
  'allowed',
  'allowed',
  'allowed',
  'allowed',
  'warned',
  'blocked',
];

/** What one topology measured. */
interface Figures {
  rate: number;
  baselineRate: number;
  requestP99: number;
  queryableP50: number;
  queryableP99: number;
}

runBenchmark(async (lifecycle) => {
  console.log(`machine: ${machineDescription()}`);
  console.log(
    `settings: ${options.duration} s of load at ${options.connections} concurrent requests, batches of ${options.batch} events from ${options.devices} devices, ${options.analytics} analytics process(es)`,
  );
  const single = await onTopology(lifecycle, null, (own) => measureOn(own, null));
  if (!options.cluster) return;
  const name = localCluster().clickhouse.cluster;
  const cluster = await onTopology(lifecycle, name, (own) => measureOn(own, name));
  console.log('');
  console.log(
    `cluster / single server: ingestion ${(cluster.rate / single.rate).toFixed(2)}× (target ≥ 0.6), raw insert baseline ${(cluster.baselineRate / single.baselineRate).toFixed(2)}×, request p99 ${(cluster.requestP99 / single.requestP99).toFixed(2)}×, request → queryable p99 ${(cluster.queryableP99 / single.queryableP99).toFixed(2)}×`,
  );
});

/** One run on a single server (`cluster` null) or on the local cluster. */
async function measureOn(lifecycle: Lifecycle, cluster: string | null): Promise<Figures> {
  console.log('');
  console.log(
    cluster === null
      ? '== single server (ClickHouse, NATS)'
      : `== cluster ${cluster} (ClickHouse 2 × 2, NATS × 3, 3 copies)`,
  );
  const clickhouse = testClickHouseDatabase('bench');
  lifecycle.add('clickhouse database', () => clickhouse.drop());
  const system = await startSystem(lifecycle, {
    enrollment: true,
    ...(cluster === null ? {} : { sharedEnv: { NATS_URL: natsClusterUrl(), NATS_STREAM_REPLICAS: '3' } }),
    // A few devices of one organization send every batch here; the per-device and per-organization
    // defaults are meant for real agents. Still counted.
    gatewayEnv: {
      TELEMETRY_BATCHES_PER_DEVICE_PER_MINUTE: '10000000',
      TELEMETRY_ORG_BYTES_PER_MINUTE: String(Number.MAX_SAFE_INTEGER),
    },
    analytics: {
      processes: options.analytics,
      clickhouseUrl: clickhouse.url,
      database: clickhouse.name,
      // Threat checks run after every insert with blocks (1 event in 9 here): measured too.
      env: {
        ...(cluster === null ? {} : { CLICKHOUSE_CLUSTER: cluster }),
        ...(process.env.TELEMETRY_BATCH_MESSAGES
          ? { TELEMETRY_BATCH_MESSAGES: process.env.TELEMETRY_BATCH_MESSAGES }
          : {}),
        ...(process.env.TELEMETRY_BATCH_WAIT_MS
          ? { TELEMETRY_BATCH_WAIT_MS: process.env.TELEMETRY_BATCH_WAIT_MS }
          : {}),
      },
    },
  });
  const admin = await system.idp.issueUserToken({ email: 'bench@ingestion.test', name: 'Bench' });
  const devices = await enrollDevices(system.gatewayUrl, admin, options.devices, 'bench');
  const tokens = devices.map((device) => device.token);
  /** Device token → device id (the ledger names batches by device id). */
  const deviceIds = new Map(devices.map((device) => [device.token, device.deviceId]));
  console.log(`enrolled ${tokens.length} devices`);

  // One events array, serialized once; each request wraps it with its own batch id.
  const observedAt = new Date(Date.now() - 60_000).toISOString();
  const eventsJson = JSON.stringify(
    Array.from({ length: options.batch }, (_, i) => ({
      observed_at: observedAt,
      url: `https://site-${i % 97}.example/page/${i}?q=${i}`,
      verdict: VERDICTS[i % VERDICTS.length],
      classification_ms: 5 + (i % 40),
    })),
  );

  // Baseline: the same number of rows straight into ClickHouse (on a cluster, into a Distributed table
  // over replicated local tables, synchronously, as analytics inserts).
  const raw = createClickHouseClient({
    url: clickhouse.url,
    database: clickhouse.name,
    settings: cluster === null ? {} : { insert_distributed_sync: 1 },
  });
  lifecycle.add(`baseline client${cluster === null ? '' : ' (cluster)'}`, () => raw.close());
  if (cluster === null) {
    await raw.command({
      // The raw table's columns, engine, partitions and order, without its materialized views.
      query: 'CREATE TABLE baseline_events AS telemetry_events',
    });
  } else {
    const onCluster = sql`ON CLUSTER ${identifier(cluster)}`;
    await raw.command({
      query: sql`CREATE TABLE ${identifier(clickhouse.name, 'baseline_events_local')} ${onCluster}
        AS ${identifier(clickhouse.name, 'telemetry_events_local')}
        ENGINE = ReplicatedMergeTree(${`/clickhouse/${cluster}/tables/{shard}/${clickhouse.name}/baseline_events_local`}, '{replica}')
        PARTITION BY toYYYYMMDD(observed_at) ORDER BY (org_id, device_id, observed_at)`.text,
    });
    await raw.command({
      query: sql`CREATE TABLE ${identifier(clickhouse.name, 'baseline_events')} ${onCluster}
        AS ${identifier(clickhouse.name, 'baseline_events_local')}
        ENGINE = Distributed(${identifier(cluster)}, ${identifier(clickhouse.name)}, baseline_events_local, cityHash64(org_id))`
        .text,
    });
  }
  const seconds = Math.floor(Date.now() / 1000) - 60;
  const baselineRows = Array.from({ length: 100_000 }, (_, i) => ({
    // Four organizations, so that a cluster's shards share the rows.
    org_id: `00000000-0000-4000-8000-00000000000${1 + (i % 4)}`,
    device_id: `00000000-0000-4000-8000-${String(i % options.devices).padStart(12, '0')}`,
    batch_key: `device:${Math.floor(i / options.batch)}`,
    observed_at: seconds,
    host: `site-${i % 97}.example`,
    verdict: VERDICTS[i % VERDICTS.length],
    classification_ms: 5 + (i % 40),
    received_at: seconds,
  }));
  const baselineStart = performance.now();
  for (let inserted = 0; inserted < options.baseline; inserted += baselineRows.length) {
    await raw.insert({ table: 'baseline_events', values: baselineRows, format: 'JSONEachRow' });
  }
  const baselineSeconds = (performance.now() - baselineStart) / 1000;
  const baselineRate = options.baseline / baselineSeconds;
  console.log(
    `baseline: ${options.baseline} rows inserted as JSONEachRow in ${baselineSeconds.toFixed(1)} s → ${Math.round(baselineRate)} rows/s`,
  );

  // Load, with a tracker of every 10th batch until it is queryable.
  const pending = new Map<string, number>();
  const queryable: number[] = [];
  const requestMs: number[] = [];
  let sent = 0;
  let requests = 0;
  const start = performance.now();
  const deadline = start + options.duration * 1000;
  let tracking = true;
  const tracker = (async () => {
    while (tracking || pending.size > 0) {
      await sleep(100);
      const keys = [...pending.keys()].slice(0, 2_000);
      if (keys.length === 0) continue;
      const result = await raw.query({
        query: `SELECT DISTINCT batch_key FROM ingested_batches WHERE batch_key IN (${keys.map((k) => `'${k}'`).join(', ')})`,
        format: 'JSONEachRow',
      });
      const now = performance.now();
      for (const { batch_key } of await result.json<{ batch_key: string }>()) {
        queryable.push(now - pending.get(batch_key)!);
        pending.delete(batch_key);
      }
      if (!tracking && now - deadline > 120_000)
        throw new Error('batches still not queryable 2 minutes after the load');
    }
  })();
  const intervalMs = options.rate > 0 ? (options.batch / options.rate) * 1000 : 0;
  let nextIndex = 0;
  await Promise.all(
    Array.from({ length: options.connections }, async (_, worker) => {
      let device = worker % tokens.length;
      while (performance.now() < deadline) {
        const batchId = randomUUID();
        const token = tokens[device]!;
        device = (device + options.connections) % tokens.length;
        // Open loop: each batch has a due time; late starts count against latency.
        const due = intervalMs > 0 ? start + nextIndex++ * intervalMs : performance.now();
        if (due >= deadline) break;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const began = due;
        const response = await fetch(`${system.gatewayUrl}/api/device/telemetry`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-device-token': token },
          body: `{"batch_id":"${batchId}","events":${eventsJson}}`,
        });
        await response.arrayBuffer();
        if (response.status !== 202) throw new Error(`telemetry answered ${response.status}`);
        requestMs.push(performance.now() - began);
        requests++;
        sent += options.batch;
        // The ledger's key is the device id and batch id; the bench knows the device by its token.
        if (requests % 10 === 0) pending.set(`${deviceIds.get(token)!}:${batchId}`, began);
      }
    }),
  );
  const loadSeconds = (performance.now() - start) / 1000;
  tracking = false;

  const count = async () => {
    const result = await raw.query({
      query: 'SELECT count() AS n FROM telemetry_events',
      format: 'JSONEachRow',
    });
    return Number((await result.json<{ n: string }>())[0]?.n ?? 0);
  };
  let stored = await count();
  while (stored < sent && performance.now() - start < (options.duration + 180) * 1000) {
    await sleep(100);
    stored = await count();
  }
  const drainedSeconds = (performance.now() - start) / 1000;
  await tracker;
  await sleep(1_000);
  stored = await count();
  const rate = sent / drainedSeconds;
  requestMs.sort((a, b) => a - b);
  queryable.sort((a, b) => a - b);
  console.log('');
  console.log(
    `sent ${sent} events in ${requests} batches over ${loadSeconds.toFixed(1)} s (${Math.round(sent / loadSeconds)} events/s offered)`,
  );
  console.log(
    `all queryable after ${drainedSeconds.toFixed(1)} s → ${Math.round(rate)} events/s end to end; ${(rate / baselineRate).toFixed(2)}× the raw insert baseline`,
  );
  console.log(
    `request p50 ${percentile(requestMs, 50).toFixed(1)} ms, p99 ${percentile(requestMs, 99).toFixed(1)} ms`,
  );
  console.log(
    `request → queryable (${queryable.length} sampled batches) p50 ${percentile(queryable, 50).toFixed(0)} ms, p99 ${percentile(queryable, 99).toFixed(0)} ms`,
  );
  console.log(
    `check: ClickHouse holds ${stored} events, ${stored === sent ? 'exactly what was sent' : `expected ${sent}`}`,
  );
  if (stored !== sent) throw new Error(`stored ${stored} events, sent ${sent}`);
  return {
    rate,
    baselineRate,
    requestP99: percentile(requestMs, 99),
    queryableP50: percentile(queryable, 50),
    queryableP99: percentile(queryable, 99),
  };
}
