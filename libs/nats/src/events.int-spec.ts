import { createServer, connect as tcpConnect, type AddressInfo, type Socket } from 'node:net';
import { nanos } from '@nats-io/nats-core';
import { StorageType, RetentionPolicy } from '@nats-io/jetstream';
import type { DomainEvent, EventData, EventType } from '@sts/events/event-catalogue';
import { newEnvelope, type EventEnvelope } from '@sts/events/event-envelope';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import pino from 'pino';
import { startEventConsumer, type ConsumedEvent, type EventConsumer } from './event-consumer';
import { createEventPublisher, type EventPublisher } from './event-publisher';
import { ensureEventsStream } from './event-stream';
import { connectJetStream, type JetStreamConnection } from './jetstream-connection';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** A pino logger whose lines land in an array, so tests can check what was logged. */
function capturingLogger() {
  const lines: { level: number; msg: string; [key: string]: unknown }[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => lines.push(JSON.parse(line) as (typeof lines)[number]) },
  );
  return { logger, lines };
}

const orgCreated = (name = 'Acme'): EventEnvelope<'org.created', EventData<'org.created'>> =>
  newEnvelope('org.created', {
    org_id: `org-${name}`,
    name,
    domain: null,
    created_at: new Date().toISOString(),
  });

const memberJoined = (): EventEnvelope<'member.joined', EventData<'member.joined'>> =>
  newEnvelope('member.joined', {
    org_id: 'org-1',
    member_id: 'm-1',
    user_id: 'u-1',
    email: 'ada@example.com',
    name: 'Ada',
    role: 'ANALYST',
    joined_at: new Date().toISOString(),
  });

describe('JetStream events', () => {
  const namespace = uniqueNatsNamespace();
  const stream = eventsStreamName(namespace);
  const { logger, lines } = capturingLogger();
  let connection: JetStreamConnection;
  let publish: EventPublisher;
  const consumers: EventConsumer[] = [];

  async function consumer(
    durableName: string,
    eventTypes: EventType[],
    handle: (event: ConsumedEvent) => Promise<void>,
    extra: { ackWaitMs?: number; maxDeliver?: number } = {},
  ): Promise<EventConsumer> {
    const started = await startEventConsumer({
      js: connection.js,
      jsm: connection.jsm,
      namespace,
      durableName,
      eventTypes,
      handle,
      logger,
      retryDelay: { initialMs: 100, maxMs: 1_000 },
      ...extra,
    });
    consumers.push(started);
    return started;
  }

  const consumerInfo = (durableName: string) => connection.jsm.consumers.info(stream, durableName);
  const settled = (durableName: string) =>
    eventually(async () => {
      const info = await consumerInfo(durableName);
      return info.num_ack_pending === 0 && info.num_pending === 0 ? info : undefined;
    });

  beforeAll(async () => {
    connection = await connectJetStream({ url: NATS_URL, name: `events-int-${namespace}`, logger });
    publish = createEventPublisher(connection.js, namespace);
  });

  afterAll(async () => {
    // DEBUG_NATS_TEST=1 shows what the consumers logged.
    if (process.env.DEBUG_NATS_TEST)
      process.stderr.write(`${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
    await Promise.all(consumers.map((c) => c.stop()));
    await deleteNamespaceStreams(connection.jsm, namespace);
    await connection.close();
  });

  it('creates the stream once, even with concurrent callers, and fixes an older configuration', async () => {
    await connection.jsm.streams.add({
      name: stream,
      subjects: [`${namespace}.events.>`],
      storage: StorageType.File,
      duplicate_window: nanos(60_000),
    });
    const infos = await Promise.all(
      Array.from({ length: 5 }, () => ensureEventsStream(connection.jsm, namespace)),
    );
    for (const info of infos) expect(info.config.name).toBe(stream);

    const { config } = await connection.jsm.streams.info(stream);
    expect(config.subjects).toEqual([`${namespace}.events.>`]);
    expect(config.storage).toBe(StorageType.File);
    expect(config.retention).toBe(RetentionPolicy.Limits);
    expect(config.max_age).toBe(nanos(7 * 24 * 60 * 60 * 1000));
    expect(config.duplicate_window).toBe(nanos(2 * 60 * 1000));
  });

  it('stores an event published twice with the same id once', async () => {
    const before = (await connection.jsm.streams.info(stream)).state.messages;
    const envelope = orgCreated('dedupe');
    await publish(envelope);
    await publish(envelope);
    const info = await connection.jsm.streams.info(stream);
    expect(info.state.messages).toBe(before + 1);

    const stored = await connection.jsm.streams.getMessage(stream, {
      last_by_subj: eventSubject(namespace, 'org.created'),
    });
    expect(stored?.json()).toEqual(envelope);
    expect(stored?.header.get('Nats-Msg-Id')).toBe(envelope.id);
  });

  it('refuses to publish an event type that is not in the catalogue', async () => {
    await expect(publish(newEnvelope('nope.happened', {}))).rejects.toThrow(/unknown event type/);
  });

  it('hands the wanted events to the handler, validated, and acknowledges them', async () => {
    const received: DomainEvent[] = [];
    await consumer('receiver', ['org.created', 'member.joined'], async (event) => {
      received.push(event);
    });
    const org = orgCreated('receiver');
    const member = memberJoined();
    await publish(org);
    await publish(newEnvelope('invite.created', { not: 'for this consumer' }));
    await publish(member);

    await eventually(() => received.some((event) => event.id === member.id) || undefined);
    const info = await settled('receiver');
    expect(info.num_redelivered).toBe(0);
    expect(received.find((event) => event.id === org.id)).toEqual(org);
    expect(received.find((event) => event.id === member.id)).toEqual(member);
    expect(received.every((event) => event.type === 'org.created' || event.type === 'member.joined')).toBe(
      true,
    );
  });

  it('redelivers an event whose handler failed, until it succeeds', async () => {
    const attempts = new Map<string, number>();
    const handled: string[] = [];
    const envelope = orgCreated('flaky');
    await consumer('flaky', ['org.created'], async (event) => {
      if (event.id !== envelope.id) return;
      const attempt = (attempts.get(event.id) ?? 0) + 1;
      attempts.set(event.id, attempt);
      if (attempt === 1) throw new Error('database is down');
      handled.push(event.id);
    });
    await publish(envelope);

    await eventually(() => handled.includes(envelope.id) || undefined);
    expect(attempts.get(envelope.id)).toBe(2);
    await settled('flaky');
    expect(
      lines.some((line) => line.msg === 'handler failed; will retry' && line.event_id === envelope.id),
    ).toBe(true);
  });

  it('hands a batch handler many events at once and retries only the events it reports failed', async () => {
    const batches: string[][] = [];
    const envelopes = Array.from({ length: 30 }, (_, i) => orgCreated(`batched-${i}`));
    const flaky = envelopes[7] as (typeof envelopes)[number];
    const ids = new Set(envelopes.map((envelope) => envelope.id));
    let flakyAttempts = 0;
    // Published before the consumer starts, so that they are there to be taken together.
    for (const envelope of envelopes) await publish(envelope);
    const started = await startEventConsumer({
      js: connection.js,
      jsm: connection.jsm,
      namespace,
      durableName: 'batched',
      eventTypes: ['org.created'],
      logger,
      maxWaitMs: 500, // all 30 in the first batch, however the pulls arrive
      retryDelay: { initialMs: 100, maxMs: 1_000 },
      handleBatch: async (events) => {
        const ours = events.filter((event) => ids.has(event.id));
        if (ours.length > 0) batches.push(ours.map((event) => event.id));
        return events.map((event) => {
          if (event.id !== flaky.id) return { outcome: 'applied' };
          flakyAttempts++;
          return flakyAttempts === 1 ? { error: new Error('this one is not ready') } : { outcome: 'applied' };
        });
      },
    });
    consumers.push(started);

    await eventually(() => flakyAttempts === 2 || undefined);
    await settled('batched');
    expect(batches[0]?.length).toBe(30);
    // Only the failed event came back, on its own.
    expect(batches.slice(1)).toEqual([[flaky.id]]);
    expect(
      lines.filter((line) => line.msg === 'handler failed; will retry' && line.consumer === 'batched'),
    ).toEqual([expect.objectContaining({ event_id: flaky.id, delivery: 1, level: 40 })]);
  });

  it('gives up on an event after maxDeliver failed deliveries', async () => {
    const envelope = orgCreated('hopeless');
    let attempts = 0;
    await consumer(
      'hopeless',
      ['org.created'],
      async (event) => {
        if (event.id !== envelope.id) return;
        attempts++;
        throw new Error('always fails');
      },
      { maxDeliver: 3 },
    );
    await publish(envelope);

    await eventually(
      () =>
        lines.some(
          (line) => line.consumer === 'hopeless' && line.event_id === envelope.id && line.level === 50,
        ) || undefined,
    );
    // Settled: nothing pending or awaiting an ack, so the terminated event cannot be delivered again.
    const info = await settled('hopeless');
    expect(info.ack_floor.stream_seq).toBeGreaterThanOrEqual(info.delivered.stream_seq);
    expect(attempts).toBe(3);
  });

  it('changes the event types of an existing durable consumer', async () => {
    const handled: string[] = [];
    const first = await consumer('retyped', ['org.created'], async (event) => {
      handled.push(event.id);
    });
    await eventually(() => handled.length > 0 || undefined); // what the stream held so far
    await settled('retyped');
    await first.stop();
    const missed = orgCreated('while-retyping');
    await publish(missed);

    const ids: string[] = [];
    await consumer('retyped', ['org.created', 'member.joined'], async (event) => {
      ids.push(event.id);
    });
    const member = memberJoined();
    await publish(member);
    await eventually(() => (ids.includes(member.id) && ids.includes(missed.id)) || undefined);
    await settled('retyped');
    // Resumed where the old consumer had got to, not from the start of the stream.
    expect(ids).toHaveLength(2);
  });

  it('terminates invalid messages instead of redelivering them, and carries on', async () => {
    const handled: string[] = [];
    await consumer(
      'strict',
      ['org.created'],
      async (event) => {
        handled.push(event.id);
      },
      { ackWaitMs: 1_000 },
    );
    const subject = eventSubject(namespace, 'org.created');
    await connection.js.publish(subject, 'this is not json');
    const badData = newEnvelope('org.created', { org_id: 42 });
    await connection.js.publish(subject, JSON.stringify(badData), { msgID: badData.id });
    const mislabelled = memberJoined();
    await connection.js.publish(subject, JSON.stringify(mislabelled), { msgID: mislabelled.id });
    const good = orgCreated('after-poison');
    await publish(good);

    await eventually(() => handled.includes(good.id) || undefined);
    expect(handled).not.toContain(badData.id);
    expect(handled).not.toContain(mislabelled.id);
    // Terminated messages are acknowledged for good: with nothing pending or awaiting an ack, none can
    // come back, and none was delivered twice.
    const info = await settled('strict');
    expect(info.ack_floor.stream_seq).toBeGreaterThanOrEqual(info.delivered.stream_seq);
    expect(info.num_redelivered).toBe(0);
    const terminated = lines.filter(
      (line) =>
        line.consumer === 'strict' &&
        line.msg === 'undecodable message terminated (it will not be redelivered)',
    );
    expect(terminated).toHaveLength(3);
    expect(terminated.every((line) => line.level === 50)).toBe(true);
  });

  it('delivers every event to each of two consumers with different durable names', async () => {
    const first: string[] = [];
    const second: string[] = [];
    await consumer('fanout-a', ['org.created'], async (event) => {
      first.push(event.id);
    });
    await consumer('fanout-b', ['org.created'], async (event) => {
      second.push(event.id);
    });
    const envelopes = [orgCreated('f1'), orgCreated('f2'), orgCreated('f3')];
    for (const envelope of envelopes) await publish(envelope);

    const ids = envelopes.map((envelope) => envelope.id);
    await eventually(() => ids.every((id) => first.includes(id) && second.includes(id)) || undefined);
    await settled('fanout-a');
    await settled('fanout-b');
  });

  it('stops cleanly, and a restarted consumer picks up what arrived meanwhile', async () => {
    const handled: string[] = [];
    const started = await consumer('stoppable', ['org.created'], async (event) => {
      handled.push(event.id);
    });
    const before = orgCreated('before-stop');
    await publish(before);
    await eventually(() => handled.includes(before.id) || undefined);

    await started.stop();
    await started.stop(); // idempotent
    const during = orgCreated('while-stopped');
    await publish(during);
    // The server holds it for the consumer, undelivered: pending, not awaiting an ack.
    const held = await eventually(async () => {
      const info = await consumerInfo('stoppable');
      return info.num_pending === 1 ? info : undefined;
    });
    expect(held.num_ack_pending).toBe(0);
    expect(handled).not.toContain(during.id);

    await consumer('stoppable', ['org.created'], async (event) => {
      handled.push(event.id);
    });
    await eventually(() => handled.includes(during.id) || undefined);
    await settled('stoppable');
  });

  it('recreates its consumer when it is deleted from under it', async () => {
    const handled = new Set<string>();
    await consumer('phoenix', ['member.joined'], async (event) => {
      handled.add(event.id);
    });
    const first = memberJoined();
    await publish(first);
    await eventually(() => handled.has(first.id) || undefined);

    await connection.jsm.consumers.delete(stream, 'phoenix');
    const second = memberJoined();
    await publish(second);
    await eventually(() => handled.has(second.id) || undefined, 20_000);
    await settled('phoenix');
  });

  it('resumes consuming after the connection to NATS drops and comes back', async () => {
    // A TCP proxy in front of the shared server stands in for a NATS restart.
    const upstream = new URL(NATS_URL.split(',')[0]!);
    const sockets = new Set<Socket>();
    const proxy = createServer((client) => {
      const server = tcpConnect(Number(upstream.port || 4222), upstream.hostname);
      for (const socket of [client, server]) {
        sockets.add(socket);
        socket.on('error', () => socket.destroy());
        socket.on('close', () => sockets.delete(socket));
      }
      client.pipe(server).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as AddressInfo;
    const viaProxy = await connectJetStream({
      url: `nats://127.0.0.1:${port}`,
      name: 'events-int-proxy',
      logger,
      reconnectTimeWaitMs: 100,
    });
    try {
      const handled = new Set<string>();
      const started = await startEventConsumer({
        js: viaProxy.js,
        jsm: viaProxy.jsm,
        namespace,
        durableName: 'survivor',
        eventTypes: ['org.created'],
        handle: async (event) => {
          handled.add(event.id);
        },
        logger,
      });
      consumers.push(started);
      const before = orgCreated('before-drop');
      await publish(before);
      await eventually(() => handled.has(before.id) || undefined);

      for (const socket of sockets) socket.destroy();
      await eventually(() => lines.some((line) => line.msg === 'NATS reconnected') || undefined);
      const after = orgCreated('after-drop');
      await publish(after);
      await eventually(() => handled.has(after.id) || undefined, 25_000);
      await settled('survivor');
      await started.stop();
    } finally {
      await viaProxy.close();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
