import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { loadConfig } from '@sts/config/load-config';
import { newEnvelope } from '@sts/events/event-envelope';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import { createPromiseClient } from '@sts/grpc/grpc-client';
import { createLogger } from '@sts/logger/create-logger';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { BillingServiceService } from '@sts/proto/gen/billing/v1/billing';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';
import { billingEnvSchema } from './billing-config';
import { BILLING_CONSUMER, startBillingService, type RunningService } from './start-billing-service';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const ORGS = 200;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Two replicas of billing share its durable consumer of `org.created`: every organization gets one
 * license and every event one entry in the ledger, whichever replica takes it, also when each event is
 * delivered twice and licenses are read (and so created) through either replica meanwhile.
 */
describe('billing replicas (PostgreSQL, NATS)', () => {
  const serviceAuth = testServiceAuth();
  const logger = createLogger('billing-replicas', 'silent');
  const namespace = uniqueNatsNamespace('billrep');
  let database: TestDatabase;
  let nats: JetStreamConnection;
  let db: Client;
  const replicas: RunningService[] = [];
  const clients: ReturnType<typeof createPromiseClient<typeof BillingServiceService>>[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('billing_replicas');
    const config = loadConfig(billingEnvSchema, {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_NAMESPACE: namespace,
      GRPC_PORT: '0',
      ...serviceAuth.envOf('billing'),
      LOG_LEVEL: 'silent',
    });
    // One after the other: the first migrates.
    replicas.push(await startBillingService(config, logger));
    replicas.push(await startBillingService(config, logger));
    for (const replica of replicas) {
      clients.push(
        createPromiseClient(
          BillingServiceService,
          `127.0.0.1:${replica.grpcPort}`,
          5_000,
          serviceAuth.as('billing'),
        ),
      );
    }
    nats = await connectJetStream({ url: NATS_URL, name: 'billing-replicas-test', logger });
    db = new Client({ connectionString: database.url });
    await db.connect();
  });

  afterAll(async () => {
    clients.forEach((client) => client.close());
    await db?.end();
    await Promise.all(replicas.map((replica) => replica.stop()));
    if (nats) {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
    await database?.drop();
  });

  it('creates one license per organization and records each event once, with both replicas consuming', async () => {
    const publish = createEventPublisher(nats.js, namespace);
    const createdAt = new Date(Date.now() - 60_000);
    const events = Array.from({ length: ORGS }, () =>
      newEnvelope('org.created', {
        org_id: randomUUID(),
        name: 'Acme',
        domain: null,
        created_at: createdAt.toISOString(),
      }),
    );
    await Promise.all([
      ...events.map(async (event) => {
        await publish(event);
        // Again without a message id: the stream keeps the copy, a redelivery the ledger must absorb.
        await nats.js.publish(eventSubject(namespace, 'org.created'), JSON.stringify(event));
      }),
      // Every other organization's license is read (and so created) through one replica or the other.
      ...events
        .filter((_, n) => n % 2 === 0)
        .map((event, n) => clients[n % 2]!.getLicense({ orgId: event.data.org_id })),
    ]);

    const count = async (sql: string, params: unknown[] = []) =>
      Number((await db.query<{ n: string }>(sql, params)).rows[0]!.n);
    const orgIds = events.map((event) => event.data.org_id);
    // Every message, copies included, delivered and acknowledged (each after its transaction committed):
    // any double effect has shown by now.
    await eventually(async () => {
      const info = await nats.jsm.consumers.info(eventsStreamName(namespace), BILLING_CONSUMER);
      return info.num_pending === 0 && info.num_ack_pending === 0;
    }, 20_000);

    expect(await count('select count(*) as n from billing.licenses where org_id = any($1)', [orgIds])).toBe(
      ORGS,
    );
    expect(
      await count('select count(*) as n from billing.processed_events where event_id = any($1)', [
        events.map((event) => event.id),
      ]),
    ).toBe(ORGS);
    // Each as the first of its creators made it: pending, its window from the organization's creation or
    // from the first read, never extended by the later one.
    const licenses = await db.query<{ status: string; expires_at: Date }>(
      'select status, expires_at from billing.licenses where org_id = any($1)',
      [orgIds],
    );
    for (const license of licenses.rows) {
      expect(license.status).toBe('pending');
      expect(license.expires_at.getTime()).toBeGreaterThanOrEqual(createdAt.getTime() + 14 * DAY_MS);
      expect(license.expires_at.getTime()).toBeLessThanOrEqual(Date.now() + 14 * DAY_MS);
    }
  }, 60_000);
});
