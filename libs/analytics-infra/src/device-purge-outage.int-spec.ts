import { randomUUID } from 'node:crypto';
import { loadConfig } from '@sts/config/load-config';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventsStreamName } from '@sts/events/subjects';
import { telemetryMessageId, telemetrySubject } from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
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
 * A deleted device's telemetry is purged however long ClickHouse stays away: the device event is
 * retried past any count of deliveries (here well over ten, the old limit) and applied once ClickHouse
 * answers again.
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
      SERVICE_AUTH_KEY: testServiceAuth().SERVICE_AUTH_KEY,
      GRPC_PORT: '0',
      TELEMETRY_BATCH_WAIT_MS: '20',
    });
    // Retries a few milliseconds apart instead of seconds to minutes: many deliveries in a short test.
    service = await startAnalyticsService(config, logger, {
      deviceEventRetryDelay: { initialMs: 20, maxMs: 100 },
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
  const deliveries = async () =>
    (await nats.jsm.consumers.info(eventsStreamName(namespace), DEVICE_CONSUMER)).delivered.consumer_seq;

  it('purges the device once ClickHouse is back, after more than ten failed deliveries', async () => {
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

    proxy.cut();
    const before = await deliveries();
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
    await eventually(async () => (await deliveries()) - before >= 15, 20_000);
    // Still held for another try, not terminated; and nothing purged while ClickHouse was away.
    const info = await nats.jsm.consumers.info(eventsStreamName(namespace), DEVICE_CONSUMER);
    expect(info.num_ack_pending).toBe(1);
    expect(await rows('telemetry_events', deviceId)).toBe(3);

    proxy.restore();
    for (const table of DEVICE_TELEMETRY_TABLES) {
      await eventually(async () => (await rows(table, deviceId)) === 0, 15_000);
    }
    await eventually(async () => {
      const settled = await nats.jsm.consumers.info(eventsStreamName(namespace), DEVICE_CONSUMER);
      return settled.num_ack_pending === 0 && settled.num_pending === 0;
    });
  }, 60_000);
});
