import { ClickHouseError } from '@clickhouse/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { AckPolicy, RetentionPolicy, StorageType, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import type { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { capturedLogger } from '@sts/logger/captured-logger';
import { consumerMessagesEnded, consumerRedeliveries, renderMetrics } from '@sts/observability/metrics';
import { recordSpansInMemory } from '@sts/observability/test/spans-in-memory';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import {
  startBatchConsumer,
  type BatchConsumer,
  type BatchConsumerOptions,
  type BatchFailures,
  type Decoded,
} from './batch-consumer';
import { connectJetStream, type JetStreamConnection } from './jetstream-connection';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** What ClickHouse answers an insert it cannot parse: the message quotes the row, with its values. */
const SECRET_HOST = 'private-clinic.example';
const clickHouseFailure = () =>
  new ClickHouseError({
    message: `Cannot parse input: expected ',' before: {"org_id":"o1","host":"${SECRET_HOST}","verdict":"blocked"}`,
    code: '27',
    type: 'CANNOT_PARSE_INPUT_ASSERTION_FAILED',
  });
/** What may be logged of it (the client's error class does not name itself: `Error`). */
const REDACTED = {
  name: clickHouseFailure().name,
  code: '27',
  type: 'CANNOT_PARSE_INPUT_ASSERTION_FAILED',
};

/**
 * A failing handler's error reaches logs and traces redacted (class, code and type), never with its
 * message: ClickHouse echoes the failing query or input in it, and with it telemetry content.
 */
describe('batch consumer failures in logs and traces (NATS)', () => {
  const namespace = uniqueNatsNamespace('bcred');
  const stream = `${namespace.toUpperCase()}_REDACT`;
  const { logger, lines } = capturedLogger('batch-consumer-test');
  let exporter: InMemorySpanExporter;
  let nats: JetStreamConnection;
  const consumers: BatchConsumer[] = [];

  beforeAll(async () => {
    exporter = recordSpansInMemory();
    nats = await connectJetStream({ url: NATS_URL, name: 'batch-consumer-test', logger });
    await nats.jsm.streams.add({
      name: stream,
      subjects: [`${namespace}.redact.>`],
      storage: StorageType.Memory,
      retention: RetentionPolicy.Limits,
    });
  });

  afterAll(async () => {
    for (const consumer of consumers) await consumer.stop();
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });

  async function consume(
    name: string,
    handleBatch: (messages: JsMsg[]) => Promise<Map<JsMsg, unknown> | void>,
  ): Promise<void> {
    consumers.push(
      await startBatchConsumer<string>({
        js: nats.js,
        jsm: nats.jsm,
        stream,
        ensureStream: async () => undefined,
        durableName: name,
        filterSubjects: [`${namespace}.redact.${name}`],
        decode: (msg) => msg.string(),
        handleBatch: (batch) => handleBatch(batch.map(({ msg }) => msg)),
        logger,
        maxWaitMs: 10,
        retryDelay: { initialMs: 50, maxMs: 50 },
      }),
    );
    await nats.js.publish(`${namespace}.redact.${name}`, 'one batch');
  }

  const linesWith = (message: string) => lines.filter((line) => line['msg'] === message);

  it('logs a failed batch by class and code, and keeps the message out of its span', async () => {
    let calls = 0;
    await consume('whole', async () => {
      calls++;
      if (calls === 1) throw clickHouseFailure();
    });
    // The batch handled on its second delivery: the failure's line and span are written by then.
    await eventually(() => calls === 2);
    const [line] = await eventually(() => {
      const found = linesWith('batch failed; will retry');
      return found.length > 0 && found;
    });
    expect(line!['err']).toEqual(REDACTED);
    const failed = await eventually(() =>
      exporter.getFinishedSpans().find((span) => span.status.message !== undefined),
    );
    expect(failed.status.message).toBe(`${REDACTED.name} 27 CANNOT_PARSE_INPUT_ASSERTION_FAILED`);
    expect(failed.events).toEqual([]);
    expect(JSON.stringify(lines)).not.toContain(SECRET_HOST);
  });

  it("logs a message's own failure by class and code", async () => {
    let calls = 0;
    await consume('single', async (messages) => {
      calls++;
      if (calls === 1) return new Map(messages.map((msg) => [msg, clickHouseFailure()]));
    });
    await eventually(() => calls === 2);
    const [line] = await eventually(() => {
      const found = linesWith('handler failed; will retry');
      return found.length > 0 && found;
    });
    expect(line!['err']).toEqual(REDACTED);
    expect(JSON.stringify(lines)).not.toContain(SECRET_HOST);
    expect(
      JSON.stringify(exporter.getFinishedSpans().map((span) => [span.status, span.events])),
    ).not.toContain(SECRET_HOST);
  });
  it('makes a span per batch, named for the consumer, and names a failure without code or type by class alone', async () => {
    let calls = 0;
    await consume('plain', async () => {
      calls++;
      if (calls === 1) throw new Error(`no route to ${SECRET_HOST}`);
    });
    await eventually(() => calls === 2);
    const spans = await eventually(() => {
      const found = exporter.getFinishedSpans().filter((span) => span.name === 'process plain');
      return found.length === 2 && found;
    });
    expect(spans.map((span) => span.status.message)).toEqual(['Error', undefined]);
    expect(spans[1]!.attributes).toEqual({ 'messaging.system': 'nats', 'messaging.batch.message_count': 1 });
  });

  it('makes no span when told the handler makes its own', async () => {
    const handled: string[] = [];
    consumers.push(
      await startBatchConsumer<string>({
        js: nats.js,
        jsm: nats.jsm,
        stream,
        ensureStream: async () => undefined,
        durableName: 'nospan',
        filterSubjects: [`${namespace}.redact.nospan`],
        decode: (msg) => msg.string(),
        handleBatch: async (batch) => {
          handled.push(...batch.map(({ value }) => value));
        },
        logger,
        maxWaitMs: 10,
        spanPerBatch: false,
      }),
    );
    await nats.js.publish(`${namespace}.redact.nospan`, 'no span');
    // Acknowledged: the batch's span, had there been one, ended before that.
    await eventually(async () => {
      const info = await nats.jsm.consumers.info(stream, 'nospan');
      return (info.delivered.consumer_seq === 1 && info.num_ack_pending === 0) || undefined;
    });
    expect(handled).toEqual(['no span']);
    expect(exporter.getFinishedSpans().filter((span) => span.name === 'process nospan')).toEqual([]);
  });
});

/**
 * A handler slower than the messages arrive: what arrives meanwhile goes as the next batch, not as a queue
 * of small batches, and a stop returns once the batch in hand and the one waiting are done.
 */
describe('batch consumer under a slow handler (NATS)', () => {
  const namespace = uniqueNatsNamespace('bcslow');
  const stream = `${namespace.toUpperCase()}_SLOW`;
  const subject = `${namespace}.slow.work`;
  const { logger } = capturedLogger('batch-consumer-slow');
  let nats: JetStreamConnection;

  beforeAll(async () => {
    nats = await connectJetStream({ url: NATS_URL, name: 'batch-consumer-slow', logger });
    await nats.jsm.streams.add({
      name: stream,
      subjects: [subject],
      storage: StorageType.Memory,
      retention: RetentionPolicy.Limits,
    });
  });

  afterAll(async () => {
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });

  const start = (handleBatch: (values: string[]) => Promise<void>) =>
    startBatchConsumer<string>({
      js: nats.js,
      jsm: nats.jsm,
      stream,
      ensureStream: async () => undefined,
      durableName: 'slow',
      filterSubjects: [subject],
      decode: (msg) => msg.string(),
      handleBatch: (batch) => handleBatch(batch.map(({ value }) => value)),
      logger,
      maxWaitMs: 5,
      maxBatchMessages: 50,
    });

  it('batches what arrived during a slow batch, and a stop waits for the batch in hand and the one waiting only', async () => {
    const batches: string[][] = [];
    // Each batch is held until the test lets it go.
    const releases: (() => void)[] = [];
    const first = await start(async (values) => {
      batches.push(values);
      await new Promise<void>((resolve) => releases.push(resolve));
    });
    // Delivered to the consumer (pulled, not yet acknowledged): the consumer's own count.
    const delivered = (count: number) =>
      eventually(
        async () => (await nats.jsm.consumers.info(stream, 'slow')).num_ack_pending === count || undefined,
      );
    await nats.js.publish(subject, 'm0');
    await eventually(() => batches.length === 1 || undefined);
    // Thirty messages, each delivered before the next is sent (each past the batch wait), while the first
    // batch is held.
    for (let n = 1; n <= 30; n++) {
      await nats.js.publish(subject, `m${n}`);
      await delivered(n + 1);
    }
    releases[0]!();
    await eventually(() => batches.length === 2 || undefined);
    // Everything that waited went as one batch (the old code made thirty batches of one).
    expect(batches[1]).toHaveLength(30);

    // Another thirty arrive while the second batch is in hand; the stop comes then.
    for (let n = 31; n <= 60; n++) await nats.js.publish(subject, `m${n}`);
    await delivered(60);
    const stopping = Date.now();
    const stopped = first.stop();
    releases[1]!();
    await eventually(() => batches.length === 3 || undefined);
    releases[2]!();
    await stopped;
    // The batch in hand and the one waiting behind it were handled, nothing was lost.
    expect(Date.now() - stopping).toBeLessThan(1_000);
    expect(batches.map((batch) => batch.length)).toEqual([1, 30, 30]);
    expect(new Set(batches.flat()).size).toBe(61);
  });
});

/** What a consumer told the server about each message: `+ACK`, `-NAK …`, `+WPI`, `+TERM`, in order. */
interface Settlement {
  /** The delivery's reply subject: `$JS.ACK.<stream>.<consumer>.…`. */
  reply: string;
  verb: string;
  at: number;
}

/**
 * How the consumer settles messages, read off the wire: a plain subscription on the stream's ack
 * subjects sees every acknowledgement, negative acknowledgement (with its delay), progress heartbeat
 * and termination the consumer sends.
 */
describe('batch consumer settling messages (NATS)', () => {
  const namespace = uniqueNatsNamespace('bcsettle');
  const stream = `${namespace.toUpperCase()}_SETTLE`;
  const { logger, lines } = capturedLogger('batch-consumer-settle');
  let nats: JetStreamConnection;
  const consumers: BatchConsumer[] = [];
  /** Reply subject of each delivery → the message's body. */
  const bodies = new Map<string, string>();
  const settlements: Settlement[] = [];

  beforeAll(async () => {
    nats = await connectJetStream({ url: NATS_URL, name: 'batch-consumer-settle', logger });
    await nats.jsm.streams.add({
      name: stream,
      subjects: [`${namespace}.settle.>`],
      storage: StorageType.Memory,
      retention: RetentionPolicy.Limits,
    });
    nats.nc.subscribe(`$JS.ACK.${stream}.>`, {
      callback: (_error, msg) => {
        settlements.push({ reply: msg.subject, verb: msg.string(), at: Date.now() });
      },
    });
    await nats.nc.flush();
  });

  /** Lets go of what a test held, also when it failed. */
  const cleanups: (() => void)[] = [];
  afterEach(() => cleanups.splice(0).forEach((cleanup) => cleanup()));

  afterAll(async () => {
    for (const consumer of consumers) await consumer.stop();
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });

  class PermanentError extends Error {}

  async function start(
    name: string,
    handleBatch: (batch: Decoded<string>[]) => Promise<BatchFailures | void>,
    overrides: Partial<BatchConsumerOptions<string>> = {},
  ): Promise<BatchConsumer> {
    const consumer = await startBatchConsumer<string>({
      js: nats.js,
      jsm: nats.jsm,
      stream,
      ensureStream: async () => undefined,
      durableName: name,
      filterSubjects: [`${namespace}.settle.${name}`],
      decode: (msg) => {
        const body = msg.string();
        // The message's reply subject is the subject of its acknowledgements (the implementation has it;
        // the JsMsg interface does not name it).
        bodies.set((msg as JsMsg & { readonly reply: string }).reply, body);
        if (body.startsWith('skip')) return undefined;
        if (body.startsWith('poison')) throw new Error(`cannot read ${body}`);
        return body;
      },
      handleBatch,
      isPermanentFailure: (error) => error instanceof PermanentError,
      logger,
      maxWaitMs: 10,
      retryDelay: { initialMs: 10, maxMs: 10 },
      ...overrides,
    });
    consumers.push(consumer);
    return consumer;
  }
  const publish = (name: string, body: string) => nats.js.publish(`${namespace}.settle.${name}`, body);
  const settlementsOf = (value: string) => settlements.filter((s) => bodies.get(s.reply) === value);
  const verbsOf = (value: string) => settlementsOf(value).map((s) => s.verb);
  const settled = (value: string, verb: string) =>
    eventually(() => verbsOf(value).some((v) => v.startsWith(verb)) || undefined);
  const linesWith = (message: string) => lines.filter((line) => line['msg'] === message);
  const ended = async (name: string, reason: string) =>
    (await consumerMessagesEnded.get()).values.find(
      (v) => v.labels['consumer'] === name && v.labels['reason'] === reason,
    )?.value ?? 0;
  const redeliveries = async (name: string) =>
    (await consumerRedeliveries.get()).values.find((v) => v.labels['consumer'] === name)?.value ?? 0;

  it('acknowledges a skipped message without a batch, and terminates an undecodable one', async () => {
    const batches: string[][] = [];
    await start('decode', async (batch) => {
      batches.push(batch.map(({ value }) => value));
    });
    await publish('decode', 'skip-1');
    await settled('skip-1', '+ACK');
    await publish('decode', 'poison-1');
    await settled('poison-1', '+TERM');
    await publish('decode', 'good-1');
    await settled('good-1', '+ACK');
    // Only the message the handler got made a batch: no empty batch for the skipped or the poison one.
    expect(batches).toEqual([['good-1']]);
    expect(verbsOf('skip-1')).toEqual(['+ACK']);
    expect(verbsOf('poison-1')).toEqual(['+TERM']);
    const [line] = linesWith('undecodable message terminated (it will not be redelivered)');
    expect(line).toMatchObject({
      level: 50,
      subject: `${namespace}.settle.decode`,
      seq: 2,
      reason: 'cannot read poison-1',
      stream,
      consumer: 'decode',
    });
    expect(await ended('decode', 'undecodable')).toBe(1);
  });

  it('terminates a message that failed permanently at once, without retrying it', async () => {
    let calls = 0;
    await start('permanent', async (batch) => {
      calls++;
      return new Map(batch.map(({ msg }) => [msg, new PermanentError('no such org')]));
    });
    await publish('permanent', 'perm-1');
    await settled('perm-1', '+TERM');
    expect(verbsOf('perm-1')).toEqual(['+TERM']);
    expect(calls).toBe(1);
    const [line] = linesWith('unprocessable message terminated (it will not be redelivered)');
    expect(line).toMatchObject({
      level: 50,
      subject: `${namespace}.settle.permanent`,
      seq: expect.any(Number),
      delivery: 1,
      err: { name: 'Error' },
    });
    expect(await ended('permanent', 'unprocessable')).toBe(1);
  });

  it('gives a failing message up after maxDeliver deliveries', async () => {
    const deliveries: number[] = [];
    await start(
      'giveup',
      async (batch) => {
        deliveries.push(...batch.map(({ msg }) => msg.info.deliveryCount));
        return new Map(batch.map(({ msg }) => [msg, new Error('down')]));
      },
      { maxDeliver: 3 },
    );
    await publish('giveup', 'giveup-1');
    await settled('giveup-1', '+TERM');
    expect(deliveries).toEqual([1, 2, 3]);
    expect(verbsOf('giveup-1').map((verb) => verb.split(' ')[0])).toEqual(['-NAK', '-NAK', '+TERM']);
    const [line] = linesWith('handler failed 3 times; giving up on this message');
    expect(line).toMatchObject({ level: 50, delivery: 3, subject: `${namespace}.settle.giveup` });
    expect(await ended('giveup', 'out_of_deliveries')).toBe(1);
  });

  it('retries a failed message after a delay doubling per delivery up to the maximum, loudly from the tenth', async () => {
    const deliveries: number[] = [];
    await start(
      'retry',
      async (batch) => {
        deliveries.push(...batch.map(({ msg }) => msg.info.deliveryCount));
        const failing = batch.filter(({ msg }) => msg.info.deliveryCount <= 10);
        return new Map(failing.map(({ msg }) => [msg, new Error('down')]));
      },
      { retryDelay: { initialMs: 10, maxMs: 40 } },
    );
    await publish('retry', 'retry-1');
    await settled('retry-1', '+ACK');
    expect(deliveries).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    const naks = verbsOf('retry-1').filter((verb) => verb.startsWith('-NAK'));
    // Each delay is its delivery's nominal one (10, 20, 40, 40 … ms) within ±20% jitter.
    const delaysMs = naks.map((verb) => (JSON.parse(verb.slice(5)) as { delay: number }).delay / 1e6);
    expect(delaysMs).toHaveLength(10);
    delaysMs.forEach((delay, i) => {
      const nominal = Math.min(10 * 2 ** i, 40);
      expect(delay).toBeGreaterThanOrEqual(Math.floor(nominal * 0.8));
      expect(delay).toBeLessThanOrEqual(Math.ceil(nominal * 1.2));
    });
    const quiet = linesWith('handler failed; will retry').filter((line) => line['consumer'] === 'retry');
    expect(quiet.map((line) => [line['level'], line['delivery']])).toEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 9].map((delivery) => [40, delivery]),
    );
    expect(quiet[0]).toMatchObject({ retry_in_ms: delaysMs[0], stream, consumer: 'retry' });
    const loud = linesWith('handler failed 10 times; will retry');
    expect(loud).toHaveLength(1);
    expect(loud[0]).toMatchObject({ level: 50, delivery: 10, retry_in_ms: delaysMs[9] });
    expect(await redeliveries('retry')).toBe(10);
  });

  it('retries a failed batch without a line per message, loudly from the tenth delivery', async () => {
    const deliveries: number[] = [];
    await start('batchretry', async (batch) => {
      deliveries.push(...batch.map(({ msg }) => msg.info.deliveryCount));
      if (batch.some(({ msg }) => msg.info.deliveryCount <= 10)) throw new Error('down');
    });
    await publish('batchretry', 'batchretry-1');
    await settled('batchretry-1', '+ACK');
    expect(deliveries).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(verbsOf('batchretry-1').filter((verb) => verb.startsWith('-NAK'))).toHaveLength(10);
    const quiet = linesWith('batch failed; will retry').filter((line) => line['consumer'] === 'batchretry');
    expect(quiet.map((line) => [line['level'], line['delivery'], line['messages']])).toEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 9].map((delivery) => [40, delivery, 1]),
    );
    const loud = linesWith('batch failed 10 times; will retry');
    expect(loud).toHaveLength(1);
    expect(loud[0]).toMatchObject({ level: 50, delivery: 10, messages: 1, err: { name: 'Error' } });
    // The batch's line says it all: no line per message of it.
    expect(
      lines.filter(
        (line) => line['consumer'] === 'batchretry' && String(line['msg']).startsWith('handler failed'),
      ),
    ).toEqual([]);
  });

  it('keeps a batch slower than the ack wait alive with progress heartbeats until it is acknowledged', async () => {
    const started = new Map<string, number>();
    const releases = new Map<string, () => void>();
    const deliveries: number[] = [];
    let finished = false;
    await start(
      'slow',
      async (batch) => {
        deliveries.push(...batch.map(({ msg }) => msg.info.deliveryCount));
        const [{ value }] = batch as [Decoded<string>];
        started.set(value, Date.now());
        if (!finished) await new Promise<void>((resolve) => releases.set(value, resolve));
      },
      { ackWaitMs: 1_500 },
    );
    const heartbeats = (value: string) => settlementsOf(value).filter((s) => s.verb === '+WPI');
    // A failure must not leave a batch held: the consumer's stop waits for it.
    cleanups.push(() => {
      finished = true;
      releases.forEach((release) => release());
    });
    await publish('slow', 'slow-1');
    // Two heartbeats, a second apart (a third of the ack wait is less than the one-second floor): the
    // batch outlives the ack wait without being redelivered.
    await eventually(() => heartbeats('slow-1').length >= 2 || undefined);
    expect(heartbeats('slow-1')[0]!.at - started.get('slow-1')!).toBeGreaterThanOrEqual(900);
    releases.get('slow-1')!();
    await settled('slow-1', '+ACK');
    const info = await nats.jsm.consumers.info(stream, 'slow');
    expect(info.num_redelivered).toBe(0);
    expect(deliveries).toEqual([1]);
  });

  it("stops a batch's heartbeat timer when the batch ends, acknowledged or failed", async () => {
    // Nothing shows a forgotten timer on the wire (the client sends no progress for a message it has
    // settled); it would hold its batch in memory and run for ever, one more per batch. So the timers
    // are counted where they are made: those with the heartbeat's period, a third of the ack wait.
    const ackWaitMs = 3_600;
    const heartbeatPeriod = ackWaitMs / 3;
    const intervalsMade = jest.spyOn(globalThis, 'setInterval');
    const intervalsCleared = jest.spyOn(globalThis, 'clearInterval');
    cleanups.push(() => {
      intervalsMade.mockRestore();
      intervalsCleared.mockRestore();
    });
    await start(
      'tidy',
      async (batch) => {
        if (batch.some(({ value, msg }) => value === 'tidy-fail' && msg.info.deliveryCount === 1))
          throw new Error('fails once');
      },
      { ackWaitMs },
    );
    await publish('tidy', 'tidy-ok');
    await settled('tidy-ok', '+ACK');
    await publish('tidy', 'tidy-fail');
    await settled('tidy-fail', '+ACK');
    expect(verbsOf('tidy-fail').map((verb) => verb.split(' ')[0])).toEqual(['-NAK', '+ACK']);

    const heartbeatTimers = intervalsMade.mock.calls.flatMap(([, period], call) =>
      period === heartbeatPeriod ? [intervalsMade.mock.results[call]!.value as NodeJS.Timeout] : [],
    );
    // One a batch: tidy-ok, tidy-fail, and tidy-fail again.
    expect(heartbeatTimers).toHaveLength(3);
    const cleared = new Set<unknown>(intervalsCleared.mock.calls.map(([timer]) => timer));
    expect(heartbeatTimers.filter((timer) => !cleared.has(timer))).toEqual([]);
  });

  it('waits maxWaitMs for a batch to fill, and hands over a full batch at once', async () => {
    const batches: string[][] = [];
    await start(
      'fill',
      async (batch) => {
        batches.push(batch.map(({ value }) => value));
      },
      { maxBatchMessages: 3, maxWaitMs: 60_000 },
    );
    await publish('fill', 'fill-1');
    await eventually(
      async () => (await nats.jsm.consumers.info(stream, 'fill')).num_ack_pending === 1 || undefined,
    );
    // Longer than the default wait: the first message still waits for the batch to fill.
    await sleep(300);
    await publish('fill', 'fill-2');
    await publish('fill', 'fill-3');
    await settled('fill-3', '+ACK');
    expect(batches).toEqual([['fill-1', 'fill-2', 'fill-3']]);
  });

  it('on stop, finishes the batch in hand and hands back at once what it pulled but did not take', async () => {
    const batches: string[][] = [];
    let release: (() => void) | undefined;
    let finished = false;
    const consumer = await start(
      'stop',
      async (batch) => {
        batches.push(batch.map(({ value }) => value));
        if (!finished) await new Promise<void>((resolve) => (release = resolve));
      },
      { maxBatchMessages: 1 },
    );
    cleanups.push(() => {
      finished = true;
      release?.();
    });
    await publish('stop', 'stop-1');
    await publish('stop', 'stop-2');
    // Both delivered: the first in hand, the second in the client's buffer.
    await eventually(
      async () => (await nats.jsm.consumers.info(stream, 'stop')).num_ack_pending === 2 || undefined,
    );
    const { body: before } = await renderMetrics();
    expect(before).toContain('sts_consumer_ack_pending_messages{consumer="stop"} 2');
    const stopped = consumer.stop();
    release!();
    await stopped;
    expect(batches).toEqual([['stop-1']]);
    await settled('stop-1', '+ACK');
    expect(verbsOf('stop-1')).toEqual(['+ACK']);
    // Handed back without a delay (a plain `-NAK`) rather than left to wait out the ack wait.
    // The second message never reached `decode`: it is known by its consumer's ack subject only.
    const secondOf = () =>
      settlements
        .filter((s) => s.reply.startsWith(`$JS.ACK.${stream}.stop.`) && bodies.get(s.reply) !== 'stop-1')
        .map((s) => s.verb);
    await eventually(() => secondOf().length > 0 || undefined);
    expect(secondOf()).toEqual(['-NAK']);
    expect(linesWith('consumer stopped').filter((line) => line['consumer'] === 'stop')).toHaveLength(1);
    const { body: after } = await renderMetrics();
    expect(after).not.toContain('consumer="stop"');
  });

  it('recreates its consumer when it is deleted, and goes on consuming', async () => {
    const values: string[] = [];
    await start('vanish', async (batch) => {
      values.push(...batch.map(({ value }) => value));
    });
    await publish('vanish', 'vanish-1');
    await eventually(() => values.includes('vanish-1') || undefined);
    await nats.jsm.consumers.delete(stream, 'vanish');
    await eventually(() =>
      linesWith('consumer interrupted; restarting').find((line) => line['consumer'] === 'vanish'),
    );
    await publish('vanish', 'vanish-2');
    await eventually(() => values.includes('vanish-2') || undefined);
    const [line] = linesWith('consumer interrupted; restarting').filter((l) => l['consumer'] === 'vanish');
    expect(line).toMatchObject({ level: 40, attempt: 1 });
    const status = await eventually(() =>
      linesWith('consumer or stream disappeared; recreating').find((l) => l['consumer'] === 'vanish'),
    );
    expect(status).toMatchObject({ level: 40, status: 'consumer_deleted' });
    const consuming = linesWith('consuming').filter((l) => l['consumer'] === 'vanish');
    expect(consuming).toHaveLength(2);
    // After a first failure it waits half a second before recreating (backing off to ten at most).
    const waited = Date.parse(String(consuming[1]!['time'])) - Date.parse(String(line!['time']));
    expect(waited).toBeGreaterThanOrEqual(400);
    expect(waited).toBeLessThan(5_000);
  });

  it('brings an existing consumer to its spec at start', async () => {
    await nats.jsm.consumers.add(stream, {
      durable_name: 'reconcile',
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(30_000),
      filter_subject: `${namespace}.settle.reconcile`,
    });
    await start('reconcile', async () => undefined, { ackWaitMs: 45_000 });
    const info = await nats.jsm.consumers.info(stream, 'reconcile');
    expect(info.config.ack_wait).toBe(nanos(45_000));
  });

  it('stops when its NATS connection closes', async () => {
    const own = await connectJetStream({ url: NATS_URL, name: 'batch-consumer-closing', logger });
    const consumer = await startBatchConsumer<string>({
      js: own.js,
      jsm: own.jsm,
      stream,
      ensureStream: async () => undefined,
      durableName: 'closing',
      filterSubjects: [`${namespace}.settle.closing`],
      decode: (msg) => msg.string(),
      handleBatch: async () => undefined,
      logger,
    });
    await eventually(() => linesWith('consuming').find((line) => line['consumer'] === 'closing'));
    await own.nc.close();
    const [line] = await eventually(() => {
      const found = linesWith('NATS connection closed; consumer stopped').filter(
        (l) => l['consumer'] === 'closing',
      );
      return found.length > 0 && found;
    });
    expect(line).toMatchObject({ level: 40 });
    await consumer.stop();
    expect(linesWith('consumer interrupted; restarting').filter((l) => l['consumer'] === 'closing')).toEqual(
      [],
    );
  });
});
