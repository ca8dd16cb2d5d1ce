import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { resolve } from 'node:path';
import type { JetStreamManager } from '@nats-io/jetstream';
import { windowRange } from '@sts/analytics-domain/analytics-model';
import { AnalyticsService } from '@sts/analytics-domain/analytics-service';
import type { IngestionOutcome } from '@sts/analytics-domain/telemetry-ingestion';
import { loadConfig } from '@sts/config/load-config';
import { testOptionsVariable } from '@sts/config/test-options';
import { newEnvelope } from '@sts/events/event-envelope';
import type { EventData, EventType } from '@sts/events/event-catalogue';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import {
  telemetryMessageId,
  telemetrySubject,
  type TelemetryBatchMessage,
  type TelemetryEvent,
} from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { ensureEventsStream, ensureTelemetryStream } from '@sts/nats/event-stream';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { testServiceAuth } from '@sts/testing/service-auth';
import { analyticsEnvSchema } from './analytics-config';
import { openAnalyticsClickHouse, type AnalyticsClickHouse } from './analytics-tables';
import { ClickHouseAnalyticsStore } from './clickhouse-analytics-store';
import { startAnalyticsService, TELEMETRY_CONSUMER, type RunningService } from './start-analytics-service';

// Against real NATS JetStream and ClickHouse: the service as it runs, batches published as the gateway does.
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const namespace = uniqueNatsNamespace('an');
const clickhouse = testClickHouseDatabase('analytics');
const logger = createLogger('analytics-test', 'silent');
const env = {
  NODE_ENV: 'test',
  LOG_LEVEL: 'silent',
  NATS_URL: natsUrl,
  NATS_NAMESPACE: namespace,
  CLICKHOUSE_URL: clickhouse.url,
  CLICKHOUSE_DATABASE: clickhouse.name,
  CLICKHOUSE_CLUSTER: clickhouse.cluster ?? '',
  NATS_STREAM_REPLICAS: process.env.NATS_STREAM_REPLICAS ?? '1',
  ...testServiceAuth().envOf('analytics'),
  GRPC_PORT: '0',
  TELEMETRY_BATCH_WAIT_MS: '50',
  // A killed process's batches come back after this.
  TELEMETRY_ACK_WAIT_MS: '3000',
  // A batch received while its device was disabled is dropped once the device events are applied up to
  // this long after it (the outbox relay's grace); the old rule dropped it at this age, applied or not.
  TELEMETRY_STATE_SETTLE_MS: '1000',
};
const config = loadConfig(analyticsEnvSchema, env);
// The store as the service makes it, on either topology (opened once the service has made the database).
let analyticsClickHouse: AnalyticsClickHouse;
let queries: AnalyticsService;

let nats: JetStreamConnection;
const running: RunningService[] = [];
/** What the first service's ingestion decided, and when. */
const outcomes: { at: number; outcome: IngestionOutcome }[] = [];
/** The first service's device events wait for this (a test holds them up: a consumer far behind). */
let deviceEventsHeld: Promise<void> = Promise.resolve();

beforeAll(async () => {
  nats = await connectJetStream({ url: natsUrl, name: 'analytics-test', logger });
  await ensureEventsStream(nats.jsm, namespace, { replicas: config.NATS_STREAM_REPLICAS });
  await ensureTelemetryStream(nats.jsm, namespace, { replicas: config.NATS_STREAM_REPLICAS });
  running.push(
    await startAnalyticsService(config, logger, {
      beforeDeviceEvent: () => deviceEventsHeld,
      afterIngest: (outcome) => void outcomes.push({ at: Date.now(), outcome }),
    }),
  );
  analyticsClickHouse = await openAnalyticsClickHouse({
    url: clickhouse.url,
    target: { database: clickhouse.name, cluster: clickhouse.cluster },
  });
  queries = new AnalyticsService(
    new ClickHouseAnalyticsStore(analyticsClickHouse.client, analyticsClickHouse.tables),
    {
      now: () => new Date(),
    },
  );
});

afterAll(async () => {
  for (const service of running) await service.stop();
  await deleteNamespaceStreams(nats.jsm, namespace);
  await nats.close();
  await analyticsClickHouse?.close();
  await clickhouse.drop();
});

const minutesAgo = (minutes: number) => Date.now() - minutes * 60_000;

function events(
  count: number,
  verdict: TelemetryEvent['verdict'],
  at = minutesAgo(1),
  ms = 10,
): TelemetryEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    observed_at: at - i,
    host: `host-${i}.example`,
    verdict,
    classification_ms: ms,
  }));
}

/** Publishes as the gateway does; `msgId` overrides the dedupe id (a repeat the stream's window missed). */
async function publishBatch(
  batch: Omit<TelemetryBatchMessage, 'received_at'>,
  msgId?: string,
  receivedAt = Date.now(),
): Promise<void> {
  await nats.js.publish(
    telemetrySubject(namespace, batch.org_id),
    JSON.stringify({ ...batch, received_at: receivedAt }),
    { msgID: msgId ?? telemetryMessageId(batch.device_id, batch.batch_id) },
  );
}

async function publishEvent<Type extends EventType>(
  type: Type,
  data: EventData<Type>,
  occurredAt = new Date(),
): Promise<void> {
  await createEventPublisher(nats.js, namespace)(newEnvelope(type, data, occurredAt));
}

/** The device's changes as analytics recorded them, oldest first. */
async function stateChanges(deviceId: string): Promise<string[]> {
  const result = await clickhouse.client.query({
    query: `SELECT toString(state) AS state FROM device_state_changes WHERE device_id = '${deviceId}' ORDER BY version`,
    format: 'JSONEachRow',
  });
  return (await result.json<{ state: string }>()).map((row) => row.state);
}

/** Publishes `device.enrolled` at `at` and waits until analytics has recorded it. */
async function enrolled(orgId: string, deviceId: string, at: number): Promise<void> {
  await publishEvent(
    'device.enrolled',
    {
      org_id: orgId,
      device_id: deviceId,
      machine_id: `m-${deviceId}`,
      hostname: `host-${deviceId.slice(0, 8)}`,
      enrolled_at: new Date(at).toISOString(),
      re_enrolled: false,
    },
    new Date(at),
  );
  await eventually(async () => (await stateChanges(deviceId)).length === 1);
}

async function rawCount(orgId: string): Promise<number> {
  const result = await clickhouse.client.query({
    query: `SELECT count() AS n FROM telemetry_events WHERE org_id = '${orgId}'`,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ n: string }>();
  return Number(row?.n ?? 0);
}

/**
 * A count once every consumer is idle (nothing more lands): on the cluster a read goes to either replica of a
 * shard, and the second fetches what the first stored a moment later, so the count is awaited until it shows
 * `expected`; one doubled or lost stays wrong and fails.
 */
async function expectSettled(count: () => Promise<number>, expected: number): Promise<void> {
  await eventually(async () => (await count()) === expected, 30_000).catch(async () => {
    throw new Error(`the count stayed ${await count()}, expected ${expected}`);
  });
}

async function consumerIdle(jsm: JetStreamManager): Promise<boolean> {
  const info = await jsm.consumers.info(`${namespace.toUpperCase()}_TELEMETRY`, TELEMETRY_CONSUMER);
  return info.num_pending === 0 && info.num_ack_pending === 0;
}

function org() {
  return { orgId: randomUUID(), deviceId: randomUUID() };
}

describe('analytics service', () => {
  it('stores batches and answers summaries and zero-filled series from the rollups', async () => {
    const { orgId, deviceId } = org();
    await publishBatch({
      org_id: orgId,
      device_id: deviceId,
      batch_id: 'b1',
      events: [...events(6, 'allowed', minutesAgo(1), 10), ...events(3, 'blocked', minutesAgo(1), 40)],
    });
    await publishBatch({
      org_id: orgId,
      device_id: deviceId,
      batch_id: 'b2',
      events: events(2, 'warned', minutesAgo(1), 10),
    });

    const summary = await eventually(async () => {
      const s = await queries.summary(orgId, '24h', null);
      return s.total_analyzed === 11 && s;
    });
    expect(summary).toEqual({
      total_analyzed: 11,
      dangerous_blocks: 3,
      risky_warnings: 2,
      avg_classification_ms: Math.round(((6 * 10 + 3 * 40 + 2 * 10) / 11) * 1000) / 1000,
    });
    expect(await queries.summary(orgId, '30d', null)).toEqual(summary);

    const hourly = await queries.series(orgId, 'total_analyzed', '24h', null);
    expect(hourly).toHaveLength(24);
    const currentHour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    expect(hourly[23]!.start.getTime()).toBe(currentHour);
    expect(hourly.reduce((sum, point) => sum + point.value, 0)).toBe(11);
    const daily = await queries.series(orgId, 'dangerous_blocks', '30d', null);
    expect(daily).toHaveLength(30);
    expect(daily[29]!.start.toISOString()).toBe(`${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`);
    expect(daily.map((point) => point.value).filter((value) => value > 0)).toEqual([3]);
  });

  it('counts telemetry in the oldest bucket of each window, in the summary and in the first point', async () => {
    const now = new Date();
    for (const window of ['24h', '30d'] as const) {
      const { orgId, deviceId } = org();
      // Two minutes into the window's first bucket (23 h and some, or 29 days and some, ago).
      const oldest = windowRange(window, now).from.getTime() + 2 * 60_000;
      await publishBatch({
        org_id: orgId,
        device_id: deviceId,
        batch_id: 'old',
        events: events(3, 'blocked', oldest),
      });
      const summary = await eventually(async () => {
        const s = await queries.summary(orgId, window, null);
        return s.total_analyzed === 3 && s;
      });
      expect(summary).toMatchObject({ total_analyzed: 3, dangerous_blocks: 3 });
      const series = await queries.series(orgId, 'dangerous_blocks', window, null);
      expect(series[0]).toEqual({ start: windowRange(window, now).from, value: 3 });
    }
  });

  it('counts a batch once when it arrives again after the stream forgot its id', async () => {
    const { orgId, deviceId } = org();
    const batch = { org_id: orgId, device_id: deviceId, batch_id: 'again', events: events(4, 'allowed') };
    await publishBatch(batch);
    await eventually(async () => (await rawCount(orgId)) === 4);
    await publishBatch(batch, randomUUID());
    await publishBatch({ ...batch, batch_id: 'next', events: events(1, 'allowed') });
    await eventually(async () => (await rawCount(orgId)) === 5);
    await eventually(() => consumerIdle(nats.jsm));
    await expectSettled(() => rawCount(orgId), 5);
    await expectSettled(async () => (await queries.summary(orgId, '24h', null)).total_analyzed, 5);
  });

  it('counts each of two batches whose rollup rows are the same', async () => {
    // On a cluster, replicated tables drop an insert whose block equals a recent one's: two batches of
    // one device with the same figures in the same hour make the same rollup block.
    const { orgId, deviceId } = org();
    const same = events(3, 'blocked', minutesAgo(2));
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 'same-1', events: same });
    await eventually(async () => (await rawCount(orgId)) === 3);
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 'same-2', events: same });
    await eventually(async () => (await rawCount(orgId)) === 6);
    await eventually(() => consumerIdle(nats.jsm));
    for (const window of ['24h', '30d'] as const) {
      const summary = await queries.summary(orgId, window, deviceId);
      expect({ window, total: summary.total_analyzed, blocked: summary.dangerous_blocks }).toEqual({
        window,
        total: 6,
        blocked: 6,
      });
    }
  });

  it('leaves disabled devices out of organization figures until they are enabled again', async () => {
    const { orgId, deviceId } = org();
    const other = randomUUID();
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 'd1', events: events(3, 'allowed') });
    await publishBatch({ org_id: orgId, device_id: other, batch_id: 'o1', events: events(2, 'allowed') });
    await eventually(async () => (await queries.summary(orgId, '24h', null)).total_analyzed === 5);

    const device = { org_id: orgId, device_id: deviceId, hostname: 'laptop-7' };
    await publishEvent('device.disabled', { ...device, at: new Date().toISOString() });
    await eventually(async () => (await queries.summary(orgId, '24h', null)).total_analyzed === 2);
    // One device's own figures stay visible.
    await expectSettled(async () => (await queries.summary(orgId, '24h', deviceId)).total_analyzed, 3);

    await publishEvent('device.enabled', { ...device, at: new Date().toISOString() });
    await eventually(async () => (await queries.summary(orgId, '24h', null)).total_analyzed === 5);
  });

  it('drops batches received while the device was disabled, and counts one accepted just before, however late it comes', async () => {
    const { orgId, deviceId } = org();
    await enrolled(orgId, deviceId, minutesAgo(10));
    const device = { org_id: orgId, device_id: deviceId, hostname: 'desk-9' };
    const disabledAt = Date.now();
    await publishEvent(
      'device.disabled',
      { ...device, at: new Date(disabledAt).toISOString() },
      new Date(disabledAt),
    );
    await eventually(async () => (await stateChanges(deviceId)).includes('disabled'));

    const batch = (batchId: string, count: number) => ({
      org_id: orgId,
      device_id: deviceId,
      batch_id: batchId,
      events: events(count, 'allowed'),
    });
    // Accepted by a gateway a moment before the disable; it reaches analytics only after it.
    await publishBatch(batch('before', 3), undefined, disabledAt - 1);
    // Accepted by a gateway that had not heard of the disable yet.
    await publishBatch(batch('while', 5), undefined, disabledAt + 1);
    const enabledAt = Date.now() + 1;
    await publishEvent(
      'device.enabled',
      { ...device, at: new Date(enabledAt).toISOString() },
      new Date(enabledAt),
    );
    await eventually(async () => (await stateChanges(deviceId)).at(-1) === 'active');
    // After the enable: counted, and the sentinel that the batches before it were decided.
    await publishBatch(batch('after', 2), undefined, enabledAt + 1);

    await eventually(async () => (await rawCount(orgId)) >= 5);
    await eventually(() => consumerIdle(nats.jsm));
    await expectSettled(() => rawCount(orgId), 5);
    await expectSettled(async () => (await queries.summary(orgId, '24h', deviceId)).total_analyzed, 5);
    await expectSettled(async () => (await queries.summary(orgId, '24h', null)).total_analyzed, 5);
  });

  it('counts a batch sent just after a re-enable that analytics applies long after the batch arrived', async () => {
    const { orgId, deviceId } = org();
    await enrolled(orgId, deviceId, minutesAgo(10));
    const device = { org_id: orgId, device_id: deviceId, hostname: 'desk-11' };
    await publishEvent('device.disabled', { ...device, at: new Date().toISOString() });
    await eventually(async () => (await stateChanges(deviceId)).includes('disabled'));

    // Analytics' device-event consumer falls behind (a restart, a ClickHouse write retried with backoff).
    let release = () => undefined as void;
    deviceEventsHeld = new Promise((resolve) => (release = resolve));
    try {
      const enabledAt = Date.now();
      await publishEvent(
        'device.enabled',
        { ...device, at: new Date(enabledAt).toISOString() },
        new Date(enabledAt),
      );
      // The gateway took the re-enable at once and accepts the device's next batch.
      outcomes.splice(0);
      const receivedAt = enabledAt + 1;
      await publishBatch(
        { org_id: orgId, device_id: deviceId, batch_id: 'next', events: events(4, 'allowed') },
        undefined,
        receivedAt,
      );
      // Tried again well past the grace (TELEMETRY_STATE_SETTLE_MS), while the enable is still held up;
      // a batch dropped meanwhile (as the old rule did at the grace) ends the wait at once.
      const key = telemetryMessageId(deviceId, 'next');
      await eventually(
        () =>
          outcomes.some(
            ({ at, outcome }) =>
              outcome.ofDisabledDevices > 0 || (at >= receivedAt + 2_500 && outcome.unsettled.includes(key)),
          ),
        20_000,
      );
      expect(await stateChanges(deviceId)).toEqual(['active', 'disabled']);
    } finally {
      deviceEventsHeld = Promise.resolve();
      release();
    }

    await eventually(async () => (await stateChanges(deviceId)).at(-1) === 'active');
    await eventually(async () => (await rawCount(orgId)) === 4, 30_000);
    await eventually(() => consumerIdle(nats.jsm));
    await expectSettled(async () => (await queries.summary(orgId, '24h', null)).total_analyzed, 4);
  });

  it("drops events observed before the device's enrollment and counts a latency up to a minute", async () => {
    const { orgId, deviceId } = org();
    await enrolled(orgId, deviceId, minutesAgo(10));
    await publishBatch({
      org_id: orgId,
      device_id: deviceId,
      batch_id: 'mixed',
      events: [
        // Backdated to before the device existed (but within the gateway's 30 days and the 24h window).
        ...events(2, 'blocked', minutesAgo(120), 10),
        ...events(1, 'allowed', minutesAgo(1), 600_000),
        ...events(1, 'allowed', minutesAgo(1), 20),
      ],
    });
    await eventually(async () => (await rawCount(orgId)) > 0);
    await eventually(() => consumerIdle(nats.jsm));
    expect(await queries.summary(orgId, '24h', deviceId)).toEqual({
      total_analyzed: 2,
      dangerous_blocks: 0,
      risky_warnings: 0,
      avg_classification_ms: (60_000 + 20) / 2,
    });
  });

  it('purges a deleted device from the raw table and every rollup', async () => {
    const { orgId, deviceId } = org();
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 'x1', events: events(3, 'blocked') });
    await eventually(async () => (await rawCount(orgId)) === 3);
    await publishEvent('device.deleted', {
      org_id: orgId,
      device_id: deviceId,
      machine_id: 'm-1',
      hostname: 'gone',
      at: new Date().toISOString(),
    });
    // Left out of every answer at once…
    await eventually(async () => (await queries.summary(orgId, '24h', deviceId)).total_analyzed === 0);
    // …and gone from every table once the mutations ran.
    for (const table of ['telemetry_events', 'telemetry_hourly', 'telemetry_daily']) {
      await eventually(async () => {
        const result = await clickhouse.client.query({
          query: `SELECT count() AS n FROM ${table} WHERE device_id = '${deviceId}'`,
          format: 'JSONEachRow',
        });
        const [row] = await result.json<{ n: string }>();
        return Number(row?.n) === 0;
      });
    }
    // A late batch of the deleted device is dropped.
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 'x2', events: events(2, 'allowed') });
    await eventually(() => consumerIdle(nats.jsm));
    expect(await rawCount(orgId)).toBe(0);
  });

  it('keeps organizations apart, also for a device id of another organization', async () => {
    const a = org();
    const b = org();
    await publishBatch({
      org_id: a.orgId,
      device_id: a.deviceId,
      batch_id: 'i1',
      events: events(7, 'blocked'),
    });
    await eventually(async () => (await queries.summary(a.orgId, '24h', null)).total_analyzed === 7);
    expect((await queries.summary(b.orgId, '24h', null)).total_analyzed).toBe(0);
    expect((await queries.summary(b.orgId, '24h', a.deviceId)).total_analyzed).toBe(0);
    const series = await queries.series(b.orgId, 'dangerous_blocks', '30d', a.deviceId);
    expect(series.every((point) => point.value === 0)).toBe(true);
  });

  it('emits threat.detected once per device and cooldown when blocks pass the threshold', async () => {
    const { orgId, deviceId } = org();
    await publishEvent('device.enrolled', {
      org_id: orgId,
      device_id: deviceId,
      machine_id: 'm-threat',
      hostname: 'kiosk-3',
      enrolled_at: new Date().toISOString(),
      re_enrolled: false,
    });
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 't1', events: events(4, 'blocked') });
    await eventually(async () => (await rawCount(orgId)) === 4);
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 't2', events: events(2, 'blocked') });
    await publishBatch({ org_id: orgId, device_id: deviceId, batch_id: 't3', events: events(3, 'blocked') });
    await eventually(async () => (await rawCount(orgId)) === 9);
    await eventually(() => consumerIdle(nats.jsm));

    const detected = await eventsOfType('threat.detected', (data) => data.device_id === deviceId);
    expect(detected).toHaveLength(1);
    expect(detected[0]).toMatchObject({
      org_id: orgId,
      device_id: deviceId,
      hostname: 'kiosk-3',
      window_minutes: 10,
    });
    expect((detected[0] as { dangerous_blocks: number }).dangerous_blocks).toBeGreaterThanOrEqual(5);
  });

  it('shares the work between two processes on one durable consumer and counts exactly', async () => {
    const second = await startAnalyticsService(config, logger);
    running.push(second);
    const { orgId } = org();
    const devices = Array.from({ length: 10 }, () => randomUUID());
    await Promise.all(
      devices.flatMap((deviceId) =>
        Array.from({ length: 20 }, (_, i) =>
          publishBatch({
            org_id: orgId,
            device_id: deviceId,
            batch_id: `s${i}`,
            events: events(5, 'allowed'),
          }),
        ),
      ),
    );
    await eventually(async () => (await rawCount(orgId)) >= 1000, 30_000);
    await eventually(() => consumerIdle(nats.jsm));
    await expectSettled(() => rawCount(orgId), 1000);
    await expectSettled(async () => (await queries.summary(orgId, '24h', null)).total_analyzed, 1000);
  });

  it('counts exactly when the process is killed between the insert and the acknowledgement', async () => {
    const { orgId, deviceId } = org();
    // Only the child consumes: it dies the hard way right after its first insert.
    for (const service of running.splice(0)) await service.stop();
    for (let i = 0; i < 20; i++) {
      await publishBatch({
        org_id: orgId,
        device_id: deviceId,
        batch_id: `k${i}`,
        events: events(10, 'allowed'),
      });
    }
    const child = spawnAnalytics(testOptionsVariable({ killAfterIngest: true }));
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
    const partial = await rawCount(orgId);
    expect(partial).toBeGreaterThan(0);

    // The batches it stored come back (never acknowledged) and must not be counted twice.
    const restarted = await startAnalyticsService(config, logger);
    running.push(restarted);
    await eventually(async () => (await rawCount(orgId)) >= 200, 90_000);
    await eventually(() => consumerIdle(nats.jsm), 90_000);
    await expectSettled(() => rawCount(orgId), 200);
    await expectSettled(async () => (await queries.summary(orgId, '24h', deviceId)).total_analyzed, 200);
  }, 120_000);
});

function spawnAnalytics(extraEnv: Record<string, string>): ChildProcess {
  const root = resolve(__dirname, '../../..');
  return spawn(process.execPath, ['--import', 'tsx', 'apps/analytics/src/main.ts'], {
    cwd: root,
    env: { ...process.env, ...env, ...extraEnv },
    stdio: 'ignore',
  });
}

/** Data of the events of `type` in the namespace's events stream that match. */
async function eventsOfType(
  type: EventType,
  matches: (data: Record<string, unknown>) => boolean,
): Promise<unknown[]> {
  const stream = await nats.jsm.streams.get(eventsStreamName(namespace));
  const subject = eventSubject(namespace, type);
  const found: unknown[] = [];
  const info = await stream.info();
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const message = await stream.getMessage({ seq }).catch(() => null);
    if (!message || message.subject !== subject) continue;
    const envelope = message.json<{ data: Record<string, unknown> }>();
    if (matches(envelope.data)) found.push(envelope.data);
  }
  return found;
}
