import { Migration } from '@mikro-orm/migrations';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServiceOrm, migrateToLatest, type ServiceOrm } from '@sts/db/service-orm';
import type { EventEnvelope } from '@sts/events/event-envelope';
import { createLogger } from '@sts/logger/create-logger';
import { eventually } from '@sts/testing/eventually';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import {
  enqueueEvent,
  OutboxEntity,
  outboxDeadLetterSql,
  outboxTableSql,
  outboxTraceContextSql,
} from './outbox';
import { OutboxRelay } from './outbox-relay';

class InitialMigration extends Migration {
  override up(): void {
    this.addSql(outboxTableSql('outbox_replicas'));
    this.addSql(outboxDeadLetterSql('outbox_replicas'));
    this.addSql(outboxTraceContextSql('outbox_replicas'));
  }
}

const ORGS = 6;
const EVENTS_PER_ORG = 60;

/**
 * Two replicas of a service, each with its own connection pool and relay, on one schema and one
 * broker that now and then fails a publish: every event is published once, each organization's in the
 * order written, and when one relay stops in the middle the other carries on.
 */
describe('outbox relays of two replicas', () => {
  const logger = createLogger('outbox-replicas-test', 'silent');
  let database: TestDatabase;
  const orms: ServiceOrm[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('outbox_replicas');
    for (let replica = 0; replica < 2; replica++) {
      const orm = await createServiceOrm({
        databaseUrl: database.url,
        schema: 'outbox_replicas',
        entities: [OutboxEntity],
        migrations: [{ name: '0001_initial', class: InitialMigration }],
        logger,
        poolMax: 4,
      });
      await migrateToLatest(orm, logger);
      orms.push(orm);
    }
  });

  afterAll(async () => {
    await Promise.all(orms.map((orm) => orm.close(true)));
    await database.drop();
  });

  it('publishes every event once and in order per organization, and survives one relay stopping', async () => {
    const sent: { relay: number; envelope: EventEnvelope }[] = [];
    // A broker that takes a little while (so that passes of the two relays overlap), and whose connection
    // to a replica now and then drops: what that replica sends in the next few milliseconds fails (as on
    // a lost connection, not one message alone), and its organization's later events must wait for it.
    const refusedOnce = new Set<string>();
    const brokenUntil = [0, 0];
    const relays = orms.map(
      (orm, index) =>
        new OutboxRelay(
          orm,
          async (envelope) => {
            const n = Number((envelope.data as { member_id: string }).member_id.slice(2));
            if (n % 7 === 3 && !refusedOnce.has(envelope.id)) {
              refusedOnce.add(envelope.id);
              brokenUntil[index] = Date.now() + 5;
            }
            if (Date.now() < brokenUntil[index]!) {
              await sleep(5); // a broker that takes a while to fail (passes overlap), not a wait for an effect
              throw new Error('connection lost');
            }
            sent.push({ relay: index, envelope });
            await sleep(1); // a broker that takes a while (passes overlap), not a wait for an effect
          },
          logger,
          { batchSize: 10, pollIntervalMs: 20 },
        ),
    );
    relays.forEach((relay) => relay.start());

    // Both replicas write: event n of an organization is written after event n-1 committed.
    const written = new Map<string, string[]>();
    await Promise.all(
      Array.from({ length: ORGS }, async (_, org) => {
        const orgId = `org-${org}`;
        written.set(orgId, []);
        for (let n = 0; n < EVENTS_PER_ORG; n++) {
          const replica = (org + n) % 2;
          const event = await orms[replica]!.em.fork().transactional((tx) =>
            enqueueEvent(tx, 'member.removed', {
              org_id: orgId,
              member_id: `m-${n}`,
              user_id: `u-${n}`,
              at: new Date().toISOString(),
            }),
          );
          written.get(orgId)!.push(event.id);
          relays[replica]!.wake();
          // Halfway through, one replica goes away (its relay finishes its pass and stops).
          if (org === 0 && n === EVENTS_PER_ORG / 2) await relays[0]!.stop();
        }
      }),
    );

    // The outbox drained (a row is marked published only after the broker took it), then the last relay
    // stopped (it finishes its pass in flight): nothing can be sent again after this.
    await eventually(async () => {
      const [row] = await orms[1]!.em
        .fork()
        .getConnection()
        .execute<{ n: number }[]>(
          'select count(*)::int as n from "outbox_replicas"."outbox" where "published_at" is null',
        );
      return row!.n === 0;
    }, 20_000);
    await relays[1]!.stop();

    const ids = sent.map(({ envelope }) => envelope.id);
    expect(ids.length).toBe(ORGS * EVENTS_PER_ORG);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [orgId, order] of written) {
      const published = sent
        .filter(({ envelope }) => (envelope.data as { org_id: string }).org_id === orgId)
        .map(({ envelope }) => envelope.id);
      expect([orgId, published]).toEqual([orgId, order]);
    }
    // Both relays published (the lock passed between them), and the survivor took over.
    expect(new Set(sent.map(({ relay }) => relay))).toEqual(new Set([0, 1]));
    expect(sent.at(-1)?.relay).toBe(1);
  });
});
