import { ClickHouseError } from '@clickhouse/client';
import { RetentionPolicy, StorageType, type JsMsg } from '@nats-io/jetstream';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { capturedLogger } from '@sts/logger/captured-logger';
import { markTracingOn } from '@sts/observability/trace-context';
import { samplerNamed, TraceRoots } from '@sts/observability/trace-roots';
import { eventually } from '@sts/testing/eventually';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { startBatchConsumer, type BatchConsumer } from './batch-consumer';
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
  const exporter = new InMemorySpanExporter();
  let nats: JetStreamConnection;
  const consumers: BatchConsumer[] = [];

  beforeAll(async () => {
    const roots = new TraceRoots(samplerNamed('parentbased_always_on'));
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({
        sampler: roots.sampler,
        idGenerator: roots,
        spanProcessors: [new SimpleSpanProcessor(exporter)],
      }),
    );
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    markTracingOn(roots);
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
