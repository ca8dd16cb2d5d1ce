import { randomUUID } from 'node:crypto';
import { loadConfig } from '@sts/config/load-config';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventsStreamName } from '@sts/events/subjects';
import { telemetryMessageId, telemetrySubject } from '@sts/events/telemetry';
import { dependencyHealthName } from '@sts/grpc/dependency-health';
import { grpcHealth } from '@sts/grpc/health-probe';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { DEVICE_PURGES_CONSUMER, devicePurgesStreamName } from '@sts/nats/event-stream';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { testClickHouseDatabase } from '@sts/testing/clickhouse';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { testServiceAuth } from '@sts/testing/service-auth';
import { startTcpProxy, type TcpProxy } from '@sts/testing/tcp-proxy';
import { analyticsEnvSchema } from './analytics-config';
import { DEVICE_TELEMETRY_TABLES } from './analytics-migrations';
import { startAnalyticsService, type RunningService } from './start-analytics-service';

const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
/** The analytics service's durable consumer of device events (named after the service). */
const DEVICE_CONSUMER = 'analytics';

/**
 * A deleted device's telemetry is purged however long ClickHouse stays away: the deletion is parked in
 * analytics' stream of purges (kept until done, no age limit), tried again far past the old limit of
 * ten deliveries, shown by readiness while it waits, not lost when the events stream forgets the
 * deletion (its 7 days; here the stream is purged by hand), and done once ClickHouse answers again.
 */
describe('device purge through a ClickHouse outage (ClickHouse, NATS)', () => {
  const logger = createLogger('device-purge-outage', 'silent');
  const namespace = uniqueNatsNamespace('purge');
  const clickhouse = testClickHouseDatabase('purge');
  let proxy: TcpProxy;
  let nats: JetStreamConnection;
  let service: RunningService | undefined;

  beforeAll(async () => {
    const target = new URL(clickhouse.url);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 8123) });
    target.host = `127.0.0.1:${proxy.port}`;
    nats = await connectJetStream({ url: natsUrl, name: 'device-purge-outage-test', logger });
    const config = loadConfig(analyticsEnvSchema, {
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      NATS_URL: natsUrl,
      NATS_NAMESPACE: namespace,
      CLICKHOUSE_URL: target.toString(),
      CLICKHOUSE_DATABASE: clickhouse.name,
      CLICKHOUSE_CLUSTER: clickhouse.cluster ?? '',
      NATS_STREAM_REPLICAS: process.env.NATS_STREAM_REPLICAS ?? '1',
      ...testServiceAuth().envOf('analytics'),
      GRPC_PORT: '0',
      TELEMETRY_BATCH_WAIT_MS: '20',
      // Readiness names a purge waiting longer than this.
      DEVICE_PURGE_MAX_WAIT_MS: '500',
    });
    // Retries a few milliseconds apart instead of seconds to minutes: many deliveries in a short test.
    service = await startAnalyticsService(config, logger, {
      deviceEventRetryDelay: { initialMs: 20, maxMs: 100 },
      devicePurgeRetryDelay: { initialMs: 20, maxMs: 100 },
      dependencyCheckIntervalMs: 100,
    });
  });

  afterAll(async () => {
    proxy?.restore();
    await service?.stop();
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await proxy?.close();
    await clickhouse.drop();
  });

  const rows = async (table: string, deviceId: string) => {
    const result = await clickhouse.client.query({
      query: `SELECT count() AS n FROM ${table} WHERE device_id = '${deviceId}'`,
      format: 'JSONEachRow',
    });
    return Number((await result.json<{ n: string }>())[0]!.n);
  };
  const consumerInfo = (stream: string, consumer: string) => nats.jsm.consumers.info(stream, consumer);
  const purgeDeliveries = async () =>
    (await consumerInfo(devicePurgesStreamName(namespace), DEVICE_PURGES_CONSUMER)).delivered.consumer_seq;
  const purgesReady = () =>
    grpcHealth(`127.0.0.1:${service!.grpcPort}`, 2_000, null, dependencyHealthName('device-purges'));

  it('purges the device once ClickHouse is back, after more than ten failed tries and the events stream forgot it', async () => {
    const orgId = randomUUID();
    const deviceId = randomUUID();
    await nats.js.publish(
      telemetrySubject(namespace, orgId),
      JSON.stringify({
        org_id: orgId,
        device_id: deviceId,
        batch_id: 'b1',
        received_at: Date.now(),
        events: Array.from({ length: 3 }, (_, i) => ({
          observed_at: Date.now() - 60_000 - i,
          host: 'example.com',
          verdict: 'blocked',
          classification_ms: 5,
        })),
      }),
      { msgID: telemetryMessageId(deviceId, 'b1') },
    );
    await eventually(async () => (await rows('telemetry_events', deviceId)) === 3);
    expect(await purgesReady()).toBe('serving');

    proxy.cut();
    const before = await purgeDeliveries();
    await createEventPublisher(
      nats.js,
      namespace,
    )(
      newEnvelope('device.deleted', {
        org_id: orgId,
        device_id: deviceId,
        machine_id: 'm-1',
        hostname: 'gone',
        at: new Date().toISOString(),
      }),
    );
    // The deletion is taken off the events stream (parked), and its purge tried again and again.
    await eventually(async () => {
      const info = await consumerInfo(eventsStreamName(namespace), DEVICE_CONSUMER);
      return info.delivered.consumer_seq > 0 && info.num_ack_pending === 0 && info.num_pending === 0;
    });
    await eventually(async () => (await purgeDeliveries()) - before >= 15, 20_000);
    await eventually(async () => (await purgesReady()) === 'not-serving');
    const parked = await consumerInfo(devicePurgesStreamName(namespace), DEVICE_PURGES_CONSUMER);
    expect(parked.num_ack_pending + parked.num_pending).toBe(1);
    // The events stream forgets the deletion (as its retention would after 7 days).
    await nats.jsm.streams.purge(eventsStreamName(namespace));
    expect(await rows('telemetry_events', deviceId)).toBe(3);

    proxy.restore();
    for (const table of DEVICE_TELEMETRY_TABLES) {
      await eventually(async () => (await rows(table, deviceId)) === 0, 15_000);
    }
    await eventually(async () => {
      const settled = await consumerInfo(devicePurgesStreamName(namespace), DEVICE_PURGES_CONSUMER);
      return settled.num_ack_pending === 0 && settled.num_pending === 0;
    });
    await eventually(async () => (await purgesReady()) === 'serving');
    const state = await clickhouse.client.query({
      query: `SELECT toString(argMax(state, version)) AS state FROM device_states WHERE device_id = '${deviceId}'`,
      format: 'JSONEachRow',
    });
    expect(await state.json()).toEqual([{ state: 'deleted' }]);
  }, 60_000);
});
