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
import { outboxDeadLettered, outboxPublished } from '@sts/observability/metrics';
import { currentTraceHeaders, SpanKind, SpanStatusCode, startSpan } from '@sts/observability/trace-context';
import { recordSpansInMemory } from '@sts/observability/test/spans-in-memory';
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

/** sts_outbox_published_total of this spec's schema. */
async function publishedCount(): Promise<number> {
  const { values } = await outboxPublished.get();
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
        .execute<{ attempts: number; parked: boolean; last_error: string }[]>(
          `select attempts, dead_lettered_at is not null as parked, last_error from outbox_test.outbox where id = ?`,
          [poisonId],
        );
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
      .execute<{ attempts: number; parked: boolean }[]>(
        `select attempts, dead_lettered_at is not null as parked from outbox_test.outbox where id = ?`,
        [waiting.id],
      );
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
        .execute<{ attempts: number; parked: boolean; last_error: string }[]>(
          `select attempts, dead_lettered_at is not null as parked, last_error from outbox_test.outbox where id = ?`,
          [waiting.id],
        );
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

  /** Holds the relays' advisory lock of the spec's schema, as another replica's relay in a pass does. */
  async function holdRelayLock(): Promise<() => Promise<void>> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let acquired!: () => void;
    const held = new Promise<void>((resolve) => (acquired = resolve));
    const done = orm.em.fork().transactional(async (tx) => {
      await tx
        .getConnection()
        .execute(
          `select pg_advisory_xact_lock(hashtext('sts-outbox:outbox_test'))`,
          [],
          'all',
          tx.getTransactionContext(),
        );
      acquired();
      await released;
    });
    await Promise.race([held, done]);
    return async () => {
      release();
      await done;
    };
  }

  const rowOf = async (id: string) => {
    const [row] = await orm.em
      .fork()
      .getConnection()
      .execute<{ attempts: number; parked: boolean; last_error: string | null; published: boolean }[]>(
        `select attempts, dead_lettered_at is not null as parked, last_error, published_at is not null as published from outbox_test.outbox where id = ?`,
        [id],
      );
    return row;
  };

  const markPublished = (ids: string[]) =>
    orm.em
      .fork()
      .getConnection()
      .execute(
        `update outbox_test.outbox set published_at = now() where id in (${ids.map(() => '?').join(', ')})`,
        ids,
      );

  it("publishes nothing while another relay of the schema holds the schema's lock, and takes over when it ends", async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const em = orm.em.fork();
    const waiting = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('locked-out')));
    const published: string[] = [];
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        published.push(envelope.id);
      },
      logger,
    );
    const release = await holdRelayLock();
    try {
      // The pass claims nothing and records no failure (which would wait for the lock).
      expect(await relay.drain()).toBe(0);
    } finally {
      await release();
    }
    expect(published).toEqual([]);
    expect(await relay.drain()).toBe(1);
    expect(published).toEqual([waiting.id]);
  });

  it("counts a failure against its row only when another row went through, and records the error's message", async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const em = orm.em.fork();
    const failing = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('blame-x')));
    const message = `timeout ${'x'.repeat(600)}`;
    let rejection: unknown = new Error(message);
    // No `brokerAnswers`: only a row published in the same pass tells that the broker works.
    const relay = new OutboxRelay(
      orm,
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a publisher may reject with anything
      (envelope) => (envelope.id === failing.id ? Promise.reject(rejection) : Promise.resolve()),
      logger,
      { maxAttempts: 5 },
    );
    expect(await relay.drain()).toBe(0);
    expect(await rowOf(failing.id)).toEqual({
      attempts: 0,
      parked: false,
      last_error: message.slice(0, 500),
      published: false,
    });

    const healthy = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('blame-y')));
    expect(await relay.drain()).toBe(1);
    expect(await rowOf(failing.id)).toMatchObject({ attempts: 1, parked: false });
    expect(await rowOf(healthy.id)).toMatchObject({ published: true });

    // A publisher may reject with anything, even nothing.
    rejection = null;
    expect(await relay.drain()).toBe(0);
    expect(await rowOf(failing.id)).toEqual({
      attempts: 1,
      parked: false,
      last_error: 'null',
      published: false,
    });
    await markPublished([failing.id]);
  });

  it("refuses an event over max_payload once the publisher's headers are counted, and takes one that fits exactly", async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const em = orm.em.fork();
    const event = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('payload-edge')));
    const bytes = Buffer.byteLength(JSON.stringify(event)) + 1_024; // the envelope and the headers' allowance
    const published: string[] = [];
    const publish = async (envelope: EventEnvelope) => {
      published.push(envelope.id);
    };
    const tooSmall = new OutboxRelay(orm, publish, logger, { maxPayloadBytes: bytes - 1 });
    expect(await tooSmall.drain()).toBe(0);
    expect(published).toEqual([]);
    expect(await rowOf(event.id)).toMatchObject({
      published: false,
      last_error: `event of ${bytes} bytes exceeds the broker's max_payload of ${bytes - 1}`,
    });

    const before = await publishedCount();
    const exact = new OutboxRelay(orm, publish, logger, { maxPayloadBytes: bytes });
    expect(await exact.drain()).toBe(1);
    expect(published).toEqual([event.id]);
    expect((await publishedCount()) - before).toBe(1);
  });

  it('logs a failed publish at warn and a parked row at error, naming the event and its organization', async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const lines: Record<string, unknown>[] = [];
    const captured = createLogger('outbox-test', 'warn', {
      write: (line: string) => {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    });
    const em = orm.em.fork();
    const failing = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('logged')));
    const relay = new OutboxRelay(orm, () => Promise.reject(new Error('refused')), captured, {
      maxAttempts: 2,
      brokerAnswers: async () => true,
    });
    const parkedBefore = await deadLetteredCount();
    expect(await relay.drain()).toBe(0);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        msg: 'outbox publish failed',
        eventId: failing.id,
        blamed: true,
        err: expect.objectContaining({ message: 'refused' }),
      }),
    ]);
    expect(await relay.drain()).toBe(0);
    expect(lines[1]).toEqual(
      expect.objectContaining({
        level: 50,
        msg: 'outbox row parked after repeated publish failures; later events of its organization go on',
        eventId: failing.id,
        org_id: 'logged',
        attempts: 2,
        err: expect.objectContaining({ message: 'refused' }),
      }),
    );
    expect(lines).toHaveLength(2);
    expect((await deadLetteredCount()) - parkedBefore).toBe(1);
    expect(await rowOf(failing.id)).toMatchObject({ attempts: 2, parked: true });
  });

  it('runs a pass at start, at once when woken (again after a pass woken during), soon after meeting another relay, and none after stop', async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const em = orm.em.fork();
    const enqueue = (name: string) =>
      em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated(name)));
    const published: string[] = [];
    let gate: Promise<void> | undefined;
    let open = () => undefined as void;
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        published.push(envelope.id);
        await gate;
      },
      logger,
      { pollIntervalMs: 1_000 },
    );
    // Only setTimeout and clearTimeout are faked (the relay's schedule: the test moves its clock); the clock,
    // ticks and immediates the database client and `eventually` use stay real.
    jest.useFakeTimers({
      doNotFake: [
        'Date',
        'hrtime',
        'nextTick',
        'performance',
        'queueMicrotask',
        'setImmediate',
        'clearImmediate',
        'setInterval',
        'clearInterval',
      ],
    });
    try {
      /** The pass in flight ended and the next one is scheduled. */
      const passEnded = () => eventually(() => jest.getTimerCount() === 1);

      relay.wake(); // not started: no pass
      expect(jest.getTimerCount()).toBe(0);
      const first = await enqueue('sched-1');
      relay.start();
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(0);
      await eventually(() => published.includes(first.id));
      await passEnded();
      // The next pass waits for the poll interval...
      jest.advanceTimersByTime(999);
      expect(jest.getTimerCount()).toBe(1);

      // ...unless the relay is woken: the pending pass is replaced by one at once.
      const second = await enqueue('sched-2');
      relay.wake();
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(0);
      await eventually(() => published.includes(second.id));
      await passEnded();

      // Woken during a pass: no second pass alongside, but one at once after it.
      gate = new Promise<void>((resolve) => (open = resolve));
      const third = await enqueue('sched-3');
      relay.wake();
      jest.advanceTimersByTime(0);
      await eventually(() => published.includes(third.id));
      const fourth = await enqueue('sched-4');
      relay.wake();
      expect(jest.getTimerCount()).toBe(0);
      gate = undefined;
      open();
      await passEnded();
      jest.advanceTimersByTime(0);
      await eventually(() => published.includes(fourth.id));
      await passEnded();
      jest.advanceTimersByTime(999); // and then the poll interval again
      expect(jest.getTimerCount()).toBe(1);

      // Another relay of the schema in a pass: this one looks again after 50 ms, then polls as before.
      const fifth = await enqueue('sched-5');
      const release = await holdRelayLock();
      relay.wake();
      jest.advanceTimersByTime(0);
      await passEnded();
      await release();
      jest.advanceTimersByTime(49);
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(1);
      await eventually(() => published.includes(fifth.id));
      await passEnded();
      jest.advanceTimersByTime(999);
      expect(jest.getTimerCount()).toBe(1);

      // Stopped while idle: the pending pass is cancelled, and a wake starts none.
      await relay.stop();
      expect(jest.getTimerCount()).toBe(0);
      relay.wake();
      expect(jest.getTimerCount()).toBe(0);

      // Stopped during a pass: the pass ends, and no next one is scheduled.
      gate = new Promise<void>((resolve) => (open = resolve));
      const sixth = await enqueue('sched-6');
      relay.start();
      jest.advanceTimersByTime(0);
      await eventually(() => published.includes(sixth.id));
      const stopped = relay.stop();
      gate = undefined;
      open();
      await stopped;
      expect(jest.getTimerCount()).toBe(0);
      expect(await rowOf(sixth.id)).toMatchObject({ published: true });
    } finally {
      gate = undefined;
      open();
      jest.useRealTimers();
      await relay.stop();
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
          .execute<{ event_id: string }[]>(
            `select event_id from outbox_test.processed_events where event_id in (${ids.map((id) => `'${id}'`).join(', ')}) order by 1`,
          )
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

  // Last: it turns tracing on for the rest of the file.
  it("publishes a traced change's event in a producer span of that trace, and an untraced one in none", async () => {
    await new OutboxRelay(orm, async () => undefined, logger).drain(); // rows of earlier tests
    const exporter = recordSpansInMemory();

    const em = orm.em.fork();
    const change = startSpan('change', { kind: SpanKind.SERVER });
    const traced = await change.run(() =>
      em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('traced'))),
    );
    change.end();
    const untraced = await em.transactional((tx) => enqueueEvent(tx, 'org.created', orgCreated('untraced')));
    exporter.reset();

    const seen = new Map<string, string | undefined>();
    let fail = true;
    const relay = new OutboxRelay(
      orm,
      async (envelope) => {
        seen.set(envelope.id, currentTraceHeaders()?.traceparent);
        if (fail && envelope.id === traced.id) throw new Error('refused');
      },
      logger,
    );
    expect(await relay.drain()).toBe(1);
    const [failed, ...others] = exporter.getFinishedSpans();
    expect(others).toEqual([]);
    expect(failed).toMatchObject({
      name: 'publish org.created',
      kind: SpanKind.PRODUCER,
      status: { code: SpanStatusCode.ERROR },
      attributes: { 'messaging.system': 'nats', 'messaging.message.id': traced.id },
    });
    expect(failed?.spanContext().traceId).toBe(change.traceId);
    expect(seen.get(traced.id)).toContain(failed?.spanContext().spanId);
    expect(seen.get(untraced.id)).toBeUndefined();

    exporter.reset();
    fail = false;
    expect(await relay.drain()).toBe(1);
    const [publish, ...rest] = exporter.getFinishedSpans();
    expect(rest).toEqual([]);
    expect(publish).toMatchObject({ name: 'publish org.created', status: { code: SpanStatusCode.UNSET } });
    expect(publish?.spanContext().traceId).toBe(change.traceId);
  });
});
