import { randomUUID } from 'node:crypto';
import { loadConfig } from '@sts/config/load-config';
import type { DomainEvent } from '@sts/events/event-catalogue';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import { DEVICE_PURGES_CONSUMER, devicePurgesStreamName } from '@sts/nats/event-stream';
import {
  telemetryMessageId,
  telemetryStreamName,
  telemetrySubject,
  type TelemetryEvent,
} from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { testServiceAuth } from '@sts/testing/service-auth';
import { analyticsEnvSchema } from './analytics-config';
import { DEVICE_TELEMETRY_TABLES } from './analytics-migrations';
import { startAnalyticsService, TELEMETRY_CONSUMER, type RunningService } from './start-analytics-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ORGS = 3;
const DEVICES_PER_ORG = 10;
const BATCHES_PER_DEVICE = 10;
/** One of them blocked: every device that reports reaches the threat threshold (5) halfway. */
const EVENTS_PER_BATCH = 4;

interface Device {
  orgId: string;
  deviceId: string;
  fate: 'kept' | 'disabled' | 'deleted';
}

/**
 * Two replicas of the analytics service share its durable consumers (telemetry into ClickHouse, device
 * events, parked purges): every batch is stored once, every device event applied, every threat raised
 * once, whichever replica takes a message, also when each batch arrives twice (a redelivery, and an
 * agent's repeat the stream's duplicate window no longer catches) and each device event twice. A
 * disabled device's batches count when a copy was received before the disable, never otherwise.
 */
describe('analytics replicas (ClickHouse, NATS)', () => {
  const logger = createLogger('analytics-replicas', 'silent');
  const namespace = uniqueNatsNamespace('anrep');
  const clickhouse = testClickHouseDatabase('anrep');
  let nats: JetStreamConnection;
  const replicas: RunningService[] = [];

  beforeAll(async () => {
    const config = loadConfig(analyticsEnvSchema, {
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      NATS_URL,
      NATS_NAMESPACE: namespace,
      CLICKHOUSE_URL: clickhouse.url,
      CLICKHOUSE_DATABASE: clickhouse.name,
      CLICKHOUSE_CLUSTER: clickhouse.cluster ?? '',
      NATS_STREAM_REPLICAS: process.env.NATS_STREAM_REPLICAS ?? '1',
      ...testServiceAuth().envOf('analytics'),
      GRPC_PORT: '0',
      // Small batches, so that both replicas hold some at any moment.
      TELEMETRY_BATCH_MESSAGES: '10',
      TELEMETRY_BATCH_WAIT_MS: '10',
      // One cooldown period for the whole test (a period boundary would make a second detection legitimate).
      THREAT_COOLDOWN_MINUTES: '1440',
      // Batches received after a disable are dropped once the device events are applied this long past them.
      TELEMETRY_STATE_SETTLE_MS: '200',
    });
    // One after the other: the first migrates.
    replicas.push(await startAnalyticsService(config, logger));
    replicas.push(await startAnalyticsService(config, logger));
    nats = await connectJetStream({ url: NATS_URL, name: 'analytics-replicas-test', logger });
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await clickhouse.drop();
  });

  const scalar = async (query: string) => {
    const result = await clickhouse.client.query({ query, format: 'JSONEachRow' });
    return Number((await result.json<{ n: string }>())[0]?.n ?? 0);
  };
  const idle = async (stream: string, consumer: string) => {
    const info = await nats.jsm.consumers.info(stream, consumer);
    return info.num_pending === 0 && info.num_ack_pending === 0;
  };

  it('stores each batch once, applies each device event and raises each threat once, with both replicas consuming', async () => {
    const orgIds = Array.from({ length: ORGS }, () => randomUUID());
    const devices: Device[] = orgIds.flatMap((orgId) =>
      Array.from({ length: DEVICES_PER_ORG }, (_, n) => ({
        orgId,
        deviceId: randomUUID(),
        fate: n === 0 ? 'deleted' : n === 1 ? 'disabled' : 'kept',
      })),
    );
    const publishEvent = createEventPublisher(nats.js, namespace);
    // Every device event twice: once as its producer sends it, once more without a message id (a redelivery).
    const twice = async (event: DomainEvent) => {
      await publishEvent(event);
      await nats.js.publish(eventSubject(namespace, event.type), JSON.stringify(event));
    };
    const named = (device: Device) => ({
      org_id: device.orgId,
      device_id: device.deviceId,
      hostname: `host-${device.deviceId.slice(0, 8)}`,
    });
    const at = () => new Date().toISOString();
    await Promise.all(
      devices.map((device) =>
        twice(
          newEnvelope('device.enrolled', {
            ...named(device),
            machine_id: `m-${device.deviceId}`,
            enrolled_at: at(),
            re_enrolled: false,
          }),
        ),
      ),
    );

    const batches = devices.flatMap((device) =>
      Array.from({ length: BATCHES_PER_DEVICE }, (_, n) => ({
        org_id: device.orgId,
        device_id: device.deviceId,
        batch_id: `b-${n}`,
        events: Array.from({ length: EVENTS_PER_BATCH }, (_, i): TelemetryEvent => ({
          observed_at: Date.now() - 60_000 - i,
          host: `site-${i}.example`,
          // Deleted devices never block: whether they raise a threat before their deletion is a race.
          verdict: i === 0 && device.fate !== 'deleted' ? 'blocked' : 'allowed',
          classification_ms: 5,
        })),
      })),
    );
    // Shuffled, each twice: as the gateway sends it, and as an agent repeating it after the stream's
    // duplicate window (another message id).
    const sends = batches
      .flatMap((batch) => {
        const key = telemetryMessageId(batch.device_id, batch.batch_id);
        return [
          { batch, msgID: key },
          { batch, msgID: `${key}/repeat` },
        ];
      })
      .sort(() => Math.random() - 0.5);
    const half = Math.floor(sends.length / 2);
    const sendTelemetry = (part: typeof sends) =>
      Promise.all(
        part.map(({ batch, msgID }) =>
          nats.js.publish(
            telemetrySubject(namespace, batch.org_id),
            JSON.stringify({ ...batch, received_at: Date.now() }),
            { msgID },
          ),
        ),
      );
    await sendTelemetry(sends.slice(0, half));
    // Every copy sent so far was received before the disables below.
    const firstHalfSent = Date.now();
    await eventually(() => Date.now() > firstHalfSent);
    // Devices are disabled and deleted while their batches are being stored.
    await Promise.all(
      devices
        .filter((device) => device.fate !== 'kept')
        .map((device) =>
          twice(
            device.fate === 'deleted'
              ? newEnvelope('device.deleted', {
                  ...named(device),
                  machine_id: `m-${device.deviceId}`,
                  at: at(),
                })
              : newEnvelope('device.disabled', { ...named(device), at: at() }),
          ),
        ),
    );
    // The rest is received after analytics applied the disables: of a disabled device, those copies
    // are dropped (a batch of it counts when its other copy came before the disable). A delete waits for its
    // purge's mutations, which ClickHouse 18.16 on a loaded 2-core machine may take well over 10 s to finish.
    await eventually(() => idle(eventsStreamName(namespace), 'analytics'), 60_000);
    await sendTelemetry(sends.slice(half));

    const kept = devices.filter((device) => device.fate !== 'deleted');
    const deleted = devices.filter((device) => device.fate === 'deleted');
    const receivedBeforeDisable = new Set(
      sends.slice(0, half).map(({ batch }) => telemetryMessageId(batch.device_id, batch.batch_id)),
    );
    const storedBatches = (device: Device) =>
      device.fate === 'kept'
        ? BATCHES_PER_DEVICE
        : batches.filter(
            (batch) =>
              batch.device_id === device.deviceId &&
              receivedBeforeDisable.has(telemetryMessageId(batch.device_id, batch.batch_id)),
          ).length;
    const expectedEvents = kept.reduce((sum, device) => sum + storedBatches(device) * EVENTS_PER_BATCH, 0);
    // Each stored batch holds one block: a threat for each device with at least 5 of them.
    const expectedThreats = kept.filter((device) => storedBatches(device) >= 5).length;
    const inOrgs = `org_id IN (${orgIds.map((id) => `'${id}'`).join(', ')})`;
    const ofDeleted = `device_id IN (${deleted.map((device) => `'${device.deviceId}'`).join(', ')})`;
    await eventually(
      async () =>
        (await idle(telemetryStreamName(namespace), TELEMETRY_CONSUMER)) &&
        (await idle(eventsStreamName(namespace), 'analytics')) &&
        (await idle(devicePurgesStreamName(namespace), DEVICE_PURGES_CONSUMER)) &&
        (await scalar(`SELECT count() AS n FROM telemetry_events WHERE ${inOrgs}`)) >= expectedEvents &&
        (await scalar(`SELECT count() AS n FROM system.mutations WHERE NOT is_done`)) === 0,
      30_000,
    );
    // Every consumer has acknowledged all it was given (after storing it) and no mutation is pending: no
    // effect can still land.

    expect(await scalar(`SELECT count() AS n FROM telemetry_events WHERE ${inOrgs}`)).toBe(expectedEvents);
    for (const rollup of ['telemetry_hourly', 'telemetry_daily']) {
      expect([
        rollup,
        await scalar(`SELECT sum(total_analyzed) AS n FROM ${rollup} WHERE ${inOrgs}`),
      ]).toEqual([rollup, expectedEvents]);
    }
    for (const table of DEVICE_TELEMETRY_TABLES) {
      expect([table, await scalar(`SELECT count() AS n FROM ${table} WHERE ${ofDeleted}`)]).toEqual([
        table,
        0,
      ]);
    }
    const states = await clickhouse.client.query({
      query: `SELECT device_id, toString(argMax(state, version)) AS state FROM device_states
              WHERE ${inOrgs} GROUP BY device_id`,
      format: 'JSONEachRow',
    });
    const stateOf = new Map(
      (await states.json<{ device_id: string; state: string }>()).map((row) => [row.device_id, row.state]),
    );
    expect(devices.map((device) => stateOf.get(device.deviceId))).toEqual(
      devices.map((device) => (device.fate === 'kept' ? 'active' : device.fate)),
    );
    // One threat.detected per device that blocked, in the events stream (the notifier's input).
    const stream = await nats.jsm.streams.info(eventsStreamName(namespace), {
      subjects_filter: eventSubject(namespace, 'threat.detected'),
    });
    expect(stream.state.subjects?.[eventSubject(namespace, 'threat.detected')]).toBe(expectedThreats);
  }, 90_000);
});
