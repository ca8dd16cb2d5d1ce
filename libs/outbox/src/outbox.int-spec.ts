import { setTimeout as sleep } from 'node:timers/promises';
import { Migration } from '@mikro-orm/migrations';
import { createServiceOrm, migrateToLatest, type ServiceOrm } from '@sts/db/service-orm';
import {
  PROCESSED_EVENTS_RETENTION,
  ProcessedEventEntity,
  processedEventsTableSql,
  recordEventOnce,
} from '@sts/db/processed-events';
import { deleteExpiredRows, startRetention } from '@sts/db/retention';
import type { EventEnvelope } from '@sts/events/event-envelope';
import { createLogger } from '@sts/logger/create-logger';
import { outboxDeadLettered } from '@sts/observability/metrics';
import { createEventPublisher } from '@sts/nats/event-publisher';
import { ensureEventsStream } from '@sts/nats/event-stream';
import { isBrokerUnavailable } from '@sts/nats/broker-failures';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import {
  enqueueEvent,
  OUTBOX_RETENTION,
  OutboxEntity,
  outboxDeadLetterSql,
  outboxTableSql,
  outboxTraceContextSql,
} from './outbox';
import { OutboxRelay } from './outbox-relay';

class InitialMigration extends Migration {
  override up(): void {
    this.addSql(outboxTableSql('outbox_test'));
    this.addSql(outboxDeadLetterSql('outbox_test'));
    this.addSql(outboxTraceContextSql('outbox_test'));
    this.addSql(processedEventsTableSql('outbox_test'));
    this.addSql('create table "outbox_test"."things" (id text primary key);');
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;
const orgCreated = (id: string) => ({
  org_id: id,
  name: 'Acme',
  domain: null,
  created_at: new Date().toISOString(),
});

/** sts_outbox_dead_lettered_total of this spec's schema. */
async function deadLetteredCount(): Promise<number> {
  const { values } = await outboxDeadLettered.get();
  return values.find((value) => value.labels.schema === 'outbox_test')?.value ?? 0;
}

describe('transactional outbox', () => {
  const logger = createLogger('outbox-test', 'silent');
  let database: TestDatabase;
  let orm: ServiceOrm;

  beforeAll(async () => {
    database = await createTestDatabase('outbox');
    orm = await createServiceOrm({
      databaseUrl: database.url,
      schema: 'outbox_test',
      entities: [OutboxEntity, ProcessedEventEntity],
      migrations: [{ name: '0001_initial', class: InitialMigration }],
      logger,
    });
    await migrateToLatest(orm, logger);
    await migrateToLatest(orm, logger); // idempotent
  });

  afterAll(async () => {
    await orm.close(true);
    await database.drop();
  });

  it('publishes events of committed transactions only, in order, once', async () => {
    const em = orm.em.fork();
    await em.transactional(async (tx) => {
      await tx
        .getConnection()
        .execute(`insert into outbox_test.things values ('a')`, [], 'run', tx.getTransactionContext());
      await enqueueEvent(tx, 'org.created', orgCreated('o1'));
      await enqueueEvent(tx, 'org.created', orgCreated('o2'));
    });
    await expect(
      em.transactional(async (tx) => {
        await enqueueEvent(tx, 'org.created', orgCreated('rolled-back'));
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');

    const published: EventEnvelope[] = [];
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        published.push(envelope);
      },
      logger,
    );
    expect(await relay.drain()).toBe(2);
    expect(published.map((e) => (e.data as { org_id: string }).org_id)).toEqual(['o1', 'o2']);
    expect(await relay.drain()).toBe(0);
  });

  it('rejects event data that does not match the catalogue', async () => {
    const em = orm.em.fork();
    await expect(
      em.transactional((tx) => enqueueEvent(tx, 'org.created', { org_id: 1 } as never)),
    ).rejects.toThrow();
  });

  it('keeps a row whose publish failed and retries it later', async () => {
    const em = orm.em.fork();
    await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('retry')));
    let fail = true;
    const published: EventEnvelope[] = [];
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        if (fail) throw new Error('nats down');
        published.push(envelope);
      },
      logger,
    );
    expect(await relay.drain()).toBe(0);
    fail = false;
    expect(await relay.drain()).toBe(1);
    expect(published).toHaveLength(1);
  });

  it('parks a row NATS refuses after a bounded number of attempts, without holding up other organizations', async () => {
    const nats = await connectJetStream({
      url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      name: 'outbox-poison',
      logger,
    });
    const namespace = uniqueNatsNamespace();
    try {
      await ensureEventsStream(nats.jsm, namespace);
      const stored: string[] = [];
      const publishToNats = createEventPublisher(nats.js, namespace);
      const relay = new OutboxRelay(
        orm,
        async (envelope) => {
          await publishToNats(envelope);
          stored.push((envelope.data as { org_id: string }).org_id + ':' + envelope.id);
        },
        logger,
        {
          maxAttempts: 3,
          brokerAnswers: () => nats.jsm.getAccountInfo().then(() => true),
          // As the service host wires it: an event the server would refuse is caught before sending.
          maxPayloadBytes: nats.nc.info?.max_payload,
        },
      );
      await relay.drain(); // rows of earlier tests

      // The poison: an event larger than the server's max_payload (1 MiB by default), as a bug might write.
      const em = orm.em.fork();
      const poisonId = '00000000-0000-4000-8000-00000000dead';
      const poison = {
        id: poisonId,
        type: 'org.created',
        occurred_at: new Date().toISOString(),
        data: { ...orgCreated('poisoned'), name: 'x'.repeat(2 * 1024 * 1024) },
      };
      await em
        .getConnection()
        .execute(`insert into outbox_test.outbox (id, type, envelope) values (?, ?, ?)`, [
          poisonId,
          poison.type,
          JSON.stringify(poison),
        ]);
      const behindPoison = await em.transactional((tx) =>
        enqueueEvent(tx, 'org.created', orgCreated('poisoned')),
      );
      const otherOrg = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('healthy')));

      const parkedBefore = await deadLetteredCount();
      const waiting = await relay.backlog();
      expect([waiting.events, waiting.parked]).toEqual([3, 0]);
      expect(waiting.oldestAgeSeconds).toBeGreaterThan(0);

      // First pass: the other organization's event goes through; the poisoned organization's later event waits.
      expect(await relay.drain()).toBe(1);
      expect(stored).toEqual([`healthy:${otherOrg.id}`]);
      // Nothing else is pending: the broker answers, so the row is to blame; the third attempt parks it,
      // and the next pass publishes what waited behind it.
      expect(await relay.drain()).toBe(0);
      expect(await relay.drain()).toBe(0);
      expect(stored).toHaveLength(1);
      expect(await relay.drain()).toBe(1);
      expect(stored).toEqual([`healthy:${otherOrg.id}`, `poisoned:${behindPoison.id}`]);

      const [row] = await em
        .getConnection()
        .execute<
          { attempts: number; parked: boolean; last_error: string }[]
        >(`select attempts, dead_lettered_at is not null as parked, last_error from outbox_test.outbox where id = ?`, [poisonId]);
      expect(row).toEqual({ attempts: 3, parked: true, last_error: expect.stringMatching(/payload/i) });
      expect(await relay.drain()).toBe(0); // parked rows are not retried
      // The metrics see it parked, and nothing else waiting.
      expect(await relay.backlog()).toEqual({ events: 0, oldestAgeSeconds: 0, parked: 1 });
      expect((await deadLetteredCount()) - parkedBefore).toBe(1);
    } finally {
      await deleteNamespaceStreams(nats.jsm, namespace);
      await nats.close();
    }
  });

  it("holds a failed organization's later rows in the same pass, across batches, and ends a pass during an outage", async () => {
    const em = orm.em.fork();
    const settle = new OutboxRelay(orm, async () => undefined, logger);
    await settle.drain(); // rows of earlier tests
    // Created in this order; batches of two: [a1, b1], [a2, b2], [a3].
    const ids: Record<string, string> = {};
    for (const name of ['a1', 'b1', 'a2', 'b2', 'a3']) {
      const event = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated(name[0]!)));
      ids[name] = event.id;
    }
    const nameOf = (id: string) => Object.keys(ids).find((name) => ids[name] === id);
    const published: string[] = [];
    let failA1 = true;
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        if (failA1 && envelope.id === ids.a1) throw new Error('timeout');
        published.push(nameOf(envelope.id)!);
      },
      logger,
      { batchSize: 2 },
    );
    // a1 fails in the first batch: a2 and a3, in later batches of the same pass, wait behind it.
    expect(await relay.drain()).toBe(2);
    expect(published).toEqual(['b1', 'b2']);
    failA1 = false;
    expect(await relay.drain()).toBe(3);
    expect(published).toEqual(['b1', 'b2', 'a1', 'a2', 'a3']);

    // An outage with more than a batch pending: the pass ends (every organization blocked), it does not
    // claim the same rows again and again.
    for (const name of ['c1', 'c2', 'c3'])
      await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated(name)));
    const down = new OutboxRelay(orm, () => Promise.reject(new Error('CONNECTION_REFUSED')), logger, {
      batchSize: 2,
    });
    const pass = down.drain();
    const ended = await Promise.race([pass.then(() => true), sleep(5_000).then(() => false)]);
    expect(ended).toBe(true);
    expect(await settle.drain()).toBe(3);
  });

  it('blames no row while the broker is down', async () => {
    const em = orm.em.fork();
    const waiting = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('outage')));
    const relay = new OutboxRelay(orm, () => Promise.reject(new Error('CONNECTION_REFUSED')), logger, {
      maxAttempts: 1,
      brokerAnswers: () => Promise.reject(new Error('CONNECTION_REFUSED')),
    });
    for (let pass = 0; pass < 3; pass += 1) expect(await relay.drain()).toBe(0);
    const [row] = await em
      .getConnection()
      .execute<
        { attempts: number; parked: boolean }[]
      >(`select attempts, dead_lettered_at is not null as parked from outbox_test.outbox where id = ?`, [waiting.id]);
    expect(row).toEqual({ attempts: 0, parked: false });
    await em
      .getConnection()
      .execute(`update outbox_test.outbox set published_at = now() where id = ?`, [waiting.id]);
  });

  it('blames no row for "no responders" while the broker answers (a NATS cluster electing a stream leader)', async () => {
    const nats = await connectJetStream({
      url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      name: 'outbox-no-responders',
      logger,
    });
    const em = orm.em.fork();
    const waiting = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('electing')));
    try {
      // No stream takes the namespace's subjects: every publish gets "no responders", as while a stream of
      // a cluster elects its leader, and yet the account answers.
      const relay = new OutboxRelay(orm, createEventPublisher(nats.js, uniqueNatsNamespace()), logger, {
        maxAttempts: 1,
        brokerAnswers: () => nats.jsm.getAccountInfo().then(() => true),
        isBrokerFailure: isBrokerUnavailable,
      });
      for (let pass = 0; pass < 3; pass += 1) expect(await relay.drain()).toBe(0);
      const [row] = await em
        .getConnection()
        .execute<
          { attempts: number; parked: boolean; last_error: string }[]
        >(`select attempts, dead_lettered_at is not null as parked, last_error from outbox_test.outbox where id = ?`, [waiting.id]);
      expect(row).toEqual({
        attempts: 0,
        parked: false,
        last_error: expect.stringMatching(/no responders|jetstream is not enabled/i),
      });
    } finally {
      await em
        .getConnection()
        .execute(`update outbox_test.outbox set published_at = now() where id = ?`, [waiting.id]);
      await nats.close();
    }
  });

  it('deletes published rows past the retention, never unpublished ones', async () => {
    const em = orm.em.fork();
    const sql = (statement: string) => em.getConnection().execute<Record<string, unknown>[]>(statement);
    const relay = new OutboxRelay(orm, async () => undefined, logger);
    const outboxForADay = { ...OUTBOX_RETENTION, retentionMs: DAY_MS };
    await relay.drain();
    await em.transactional(async (tx) => {
      for (const id of ['old-published', 'recent-published', 'old-pending'])
        await enqueueEvent(tx, 'org.created', orgCreated(id));
    });
    expect(await relay.drain()).toBe(3);
    const age = (orgId: string, set: string) =>
      sql(`update outbox_test.outbox set ${set} where envelope->'data'->>'org_id' = '${orgId}'`);
    await age('old-published', `published_at = now() - interval '25 hours'`);
    await age('recent-published', `published_at = now() - interval '23 hours'`);
    // A row that has waited 30 days for NATS: still owed to the stream, so kept.
    await age('old-pending', `published_at = null, created_at = now() - interval '30 days'`);

    expect(await deleteExpiredRows(orm.em.fork(), outboxForADay)).toBe(1);
    expect(await deleteExpiredRows(orm.em.fork(), outboxForADay)).toBe(0);
    const left = await sql(
      `select envelope->'data'->>'org_id' as org, published_at is not null as published from outbox_test.outbox
       where envelope->'data'->>'org_id' in ('old-published', 'recent-published', 'old-pending') order by 1`,
    );
    expect(left).toEqual([
      { org: 'old-pending', published: false },
      { org: 'recent-published', published: true },
    ]);

    // Retention as the service host runs it prunes on its own, at once and then once per interval.
    await age('recent-published', `published_at = now() - interval '25 hours'`);
    const retention = startRetention(orm, logger, [outboxForADay]);
    try {
      await eventually(async () => {
        const rows = await sql(
          `select 1 from outbox_test.outbox where envelope->'data'->>'org_id' = 'recent-published'`,
        );
        return rows.length === 0;
      });
    } finally {
      await retention.stop();
    }
  });

  it('records each event id once', async () => {
    const em = orm.em.fork();
    const id = '9f1c2f8e-4e0b-4a8e-9b1a-7d3f2a1b0c9d';
    expect(await em.transactional((tx) => recordEventOnce(tx, id, 'org.created'))).toBe(true);
    expect(await em.transactional((tx) => recordEventOnce(tx, id, 'org.created'))).toBe(false);
  });

  it('forgets handled event ids after the retention (8 days by default), at once and then periodically', async () => {
    const em = orm.em.fork();
    const ids = [
      '0a1c2f8e-4e0b-4a8e-9b1a-7d3f2a1b0c01',
      '0a1c2f8e-4e0b-4a8e-9b1a-7d3f2a1b0c02',
      '0a1c2f8e-4e0b-4a8e-9b1a-7d3f2a1b0c03',
    ];
    for (const id of ids)
      expect(await em.transactional((tx) => recordEventOnce(tx, id, 'org.created'))).toBe(true);
    const handledAgo = (id: string, interval: string) =>
      em
        .getConnection()
        .execute(
          `update outbox_test.processed_events set processed_at = now() - interval '${interval}' where event_id = '${id}'`,
        );
    const kept = async () =>
      (
        await em
          .getConnection()
          .execute<
            { event_id: string }[]
          >(`select event_id from outbox_test.processed_events where event_id in (${ids.map((id) => `'${id}'`).join(', ')}) order by 1`)
      ).map((row) => row.event_id);
    await handledAgo(ids[0] as string, '9 days');
    await handledAgo(ids[1] as string, '7 days');

    expect(await deleteExpiredRows(orm.em.fork(), PROCESSED_EVENTS_RETENTION)).toBe(1);
    expect(await kept()).toEqual([ids[1], ids[2]]);
    // A forgotten id counts as new again: what the retention trades away, safe once the stream has dropped the event.
    expect(await em.transactional((tx) => recordEventOnce(tx, ids[0] as string, 'org.created'))).toBe(true);

    const retention = startRetention(orm, logger, [{ ...PROCESSED_EVENTS_RETENTION, retentionMs: DAY_MS }]);
    try {
      await eventually(async () => (await kept()).length === 2 || undefined);
      expect(await kept()).toEqual([ids[0], ids[2]]);
    } finally {
      await retention.stop();
    }
  });
});
