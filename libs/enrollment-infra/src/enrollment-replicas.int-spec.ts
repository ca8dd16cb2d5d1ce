import { randomBytes, randomUUID } from 'node:crypto';
import { headers as natsHeaders } from '@nats-io/nats-core';
import { Client } from 'pg';
import { loadConfig } from '@sts/config/load-config';
import { TELEMETRY_HEADERS, telemetryStreamName, telemetrySubject } from '@sts/events/telemetry';
import { createLogger } from '@sts/logger/create-logger';
import { ensureTelemetryStream } from '@sts/nats/event-stream';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { enrollmentEnvSchema } from './enrollment-config';
import { startEnrollmentService, type RunningService } from './start-enrollment-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const DEVICES = 40;
const BATCHES_PER_DEVICE = 15;

/**
 * Two replicas of the enrollment service share the telemetry consumer that moves devices'
 * `last_seen_at`: each device ends at the time of its latest batch, whichever replica took it, with
 * batches out of order and each delivered twice; one replica stopping midway loses none of it.
 */
describe('enrollment replicas (PostgreSQL, NATS)', () => {
  const logger = createLogger('enrollment-replicas', 'silent');
  const namespace = uniqueNatsNamespace('enrep');
  let database: TestDatabase;
  let nats: JetStreamConnection;
  let db: Client;
  const replicas: RunningService[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('enrollment_replicas');
    const config = loadConfig(enrollmentEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
      ENROLLMENT_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      GRPC_PORT: '0',
      ...testServiceAuth().envOf('enrollment'),
      LOG_LEVEL: 'silent',
      LAST_SEEN_FLUSH_MS: '50',
    });
    // One after the other: the first migrates.
    replicas.push(await startEnrollmentService(config, logger));
    replicas.push(await startEnrollmentService(config, logger));
    nats = await connectJetStream({ url: NATS_URL, name: 'enrollment-replicas-test', logger });
    await ensureTelemetryStream(nats.jsm, namespace);
    db = new Client({ connectionString: database.url });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await Promise.all(replicas.map((replica) => replica.stop()));
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await database?.drop();
  });

  it("moves each device's last_seen_at to its latest batch, with both replicas consuming and one stopping", async () => {
    const orgId = randomUUID();
    const enrolledAt = new Date(Date.now() - 3_600_000);
    const devices = Array.from({ length: DEVICES }, () => randomUUID());
    await db.query(
      `insert into enrollment.devices (id, org_id, machine_id, hostname, status, token_hash, enrolled_at, last_seen_at)
       select id, $1, id::text, 'host', 'active', encode(sha256(id::text::bytea), 'hex'), $2, $2
         from unnest($3::uuid[]) as id`,
      [orgId, enrolledAt, devices],
    );
    // Batches received over the last half hour, sent in random order, each twice (a redelivery).
    const sends = devices
      .flatMap((deviceId) =>
        Array.from({ length: BATCHES_PER_DEVICE }, (_, n) => ({
          deviceId,
          at: enrolledAt.getTime() + 1_800_000 + n * 60_000 + Math.floor(Math.random() * 1_000),
        })),
      )
      .flatMap((sighting) => [sighting, sighting])
      .sort(() => Math.random() - 0.5);
    const latest = new Map<string, number>();
    for (const { deviceId, at } of sends) latest.set(deviceId, Math.max(latest.get(deviceId) ?? 0, at));
    const publish = ({ deviceId, at }: { deviceId: string; at: number }) => {
      const headers = natsHeaders();
      headers.set(TELEMETRY_HEADERS.orgId, orgId);
      headers.set(TELEMETRY_HEADERS.deviceId, deviceId);
      headers.set(TELEMETRY_HEADERS.receivedAt, String(at));
      return nats.js.publish(telemetrySubject(namespace, orgId), '{}', { headers });
    };
    const half = Math.floor(sends.length / 2);
    await Promise.all(sends.slice(0, half).map(publish));
    // A replica stops while the stream is being consumed: what it took is written or handed back.
    await Promise.all([replicas[0]!.stop(), Promise.all(sends.slice(half).map(publish))]);

    const lastSeen = async () =>
      new Map(
        (
          await db.query<{ id: string; ms: number }>(
            `select id, (extract(epoch from last_seen_at) * 1000)::float8 as ms
               from enrollment.devices where org_id = $1`,
            [orgId],
          )
        ).rows.map((row) => [row.id, Math.round(row.ms)]),
      );
    // Every batch delivered and acknowledged (each after its write committed): every write has landed.
    await eventually(async () => {
      const info = await nats.jsm.consumers.info(telemetryStreamName(namespace), 'enrollment-last-seen');
      return info.num_pending === 0 && info.num_ack_pending === 0;
    }, 20_000);
    expect(await lastSeen()).toEqual(latest);
  }, 60_000);
});
