import { setTimeout as sleep } from 'node:timers/promises';
import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { ClosedConnectionError, DrainingConnectionError, type Subscription } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';
import { redactedError } from '@sts/logger/redacted-error';
import { consumerBacklog, consumerMessagesEnded, consumerRedeliveries } from '@sts/observability/metrics';
import { linkToRecordedSpan, SpanKind, startSpan } from '@sts/observability/trace-context';
import {
  DEFAULT_MAX_BATCH_MESSAGES,
  ensureDurableConsumer,
  maxAckPendingFor,
  type DurableConsumerSpec,
} from './durable-consumer';
import { untilJetStreamAnswers } from './jetstream-availability';
import { natsHeaderGetter } from './trace-headers';
import { retryDelayMs, type RetryDelayPolicy } from './retry-delay';

/** From this delivery on a failure is logged as an error: something is down or broken, not unlucky. */
const LOUD_AFTER_DELIVERIES = 10;

/** A handler's failure as one line for a span's status: its class, code and type (`redactedError`), never its message. */
function redactedErrorText(error: unknown): string {
  const { name, code, type } = redactedError(error);
  return [name, code, type].filter((part) => part !== undefined).join(' ');
}

/** A message and what `decode` made of it. */
export interface Decoded<T> {
  msg: JsMsg;
  value: T;
}

/** Messages of a batch that failed, with why; the others succeeded. */
export type BatchFailures = ReadonlyMap<JsMsg, unknown>;

export interface BatchConsumerOptions<T> {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** Creates or updates the stream (called at start and when the stream or consumer vanished). */
  ensureStream: () => Promise<unknown>;
  /** Durable consumer name; processes sharing it share the work. */
  durableName: string;
  /** Subjects taken (one, or several on NATS 2.10 and later). */
  filterSubjects: readonly string[];
  /** For servers before 2.10 with several subjects: one covering them all (`decode` skips the rest). */
  fallbackFilterSubject?: string;
  /** Where a newly created consumer starts. Default every retained message. */
  deliverPolicy?: 'all' | 'new';
  /** Deliver message headers only, without bodies (for consumers that read nothing else). */
  headersOnly?: boolean;
  /**
   * Turns a message into the handler's input; `undefined` skips it (acknowledged, not handled).
   * Throwing marks the message poison: it is terminated (never redelivered) and logged without its content.
   */
  decode: (msg: JsMsg) => T | undefined;
  /**
   * Handles a batch. Resolving acknowledges every message of it except those in the failures it
   * returns; throwing fails them all. A failed message comes back after a delay that grows with its
   * deliveries, until `maxDeliver` or a permanent failure ends it. Delivery is at least once: the
   * handler must recognise what it already did.
   */
  handleBatch: (batch: Decoded<T>[]) => Promise<BatchFailures | void>;
  /** Failures that no retry can fix: the message is terminated at once (and logged). */
  isPermanentFailure?: (error: unknown) => boolean;
  /** Log fields naming a message's content (never secrets), for failure lines. */
  describe?: (value: T) => Record<string, unknown>;
  logger: Logger;
  /**
   * How long the start waits for a restarted cluster to elect the stream's and the consumer's leaders
   * (default 120 s); a refusal fails it at once.
   */
  readyTimeoutMs?: number;
  /** Deliveries before a failing message is given up (terminated, logged). Default -1: never. */
  maxDeliver?: number;
  /** Messages per batch at most. Default 200. */
  maxBatchMessages?: number;
  /** How long the first message of a batch waits for more. Default 200 ms. */
  maxWaitMs?: number;
  /** The server redelivers a message not acknowledged in this time. Default 60 s (kept alive while handled). */
  ackWaitMs?: number;
  /** Delay before a failed message comes back: doubles per delivery, up to the maximum. */
  retryDelay?: Partial<RetryDelayPolicy>;
  /**
   * A span per batch, linked to the spans that published its messages (default). Off for a handler
   * that makes a span per message itself, continuing each message's trace.
   */
  spanPerBatch?: boolean;
}

export interface BatchConsumer {
  /** Stops pulling, lets the batch in hand and the one waiting finish, returns later messages to the stream. */
  stop(): Promise<void>;
}

/** What the server keeps of a batch consumer: the same for its process and for the provisioning step. */
export function batchConsumerSpec(
  options: Pick<
    BatchConsumerOptions<unknown>,
    | 'stream'
    | 'durableName'
    | 'filterSubjects'
    | 'fallbackFilterSubject'
    | 'deliverPolicy'
    | 'headersOnly'
    | 'ackWaitMs'
    | 'maxDeliver'
    | 'maxBatchMessages'
  >,
): DurableConsumerSpec {
  return {
    stream: options.stream,
    durableName: options.durableName,
    filterSubjects: options.filterSubjects,
    fallbackFilterSubject: options.fallbackFilterSubject,
    deliverPolicy: options.deliverPolicy,
    headersOnly: options.headersOnly,
    ackWaitMs: options.ackWaitMs ?? 60_000,
    maxDeliver: options.maxDeliver ?? -1,
    maxAckPending: maxAckPendingFor(options.maxBatchMessages ?? DEFAULT_MAX_BATCH_MESSAGES),
  };
}

/**
 * The one way this codebase consumes a JetStream stream: a durable pull consumer that hands messages
 * to its handler in batches, as many as arrive within `maxWaitMs` of the first, up to
 * `maxBatchMessages`. Batches are handled one at a time per process; several processes on the same
 * durable split the stream between them. Acknowledges only what the handler finished; a poison
 * message is terminated instead of blocking the rest. If the consumer or the stream disappears it is
 * recreated; reconnects after a NATS restart are the client's.
 */
export async function startBatchConsumer<T>(options: BatchConsumerOptions<T>): Promise<BatchConsumer> {
  const { js, jsm, stream, durableName } = options;
  const logger = options.logger.child({ stream, consumer: durableName });
  const maxBatch = options.maxBatchMessages ?? DEFAULT_MAX_BATCH_MESSAGES;
  const maxWaitMs = options.maxWaitMs ?? 200;
  const spec = batchConsumerSpec(options);
  const { ackWaitMs, maxDeliver } = spec;
  const retryDelay: RetryDelayPolicy = {
    initialMs: options.retryDelay?.initialMs ?? 1_000,
    maxMs: options.retryDelay?.maxMs ?? 30_000,
  };
  const isPermanent = options.isPermanentFailure ?? (() => false);
  const describe = options.describe ?? (() => ({}));

  async function ensureConsumer(reconcile: boolean): Promise<void> {
    await options.ensureStream();
    await ensureDurableConsumer(jsm, spec, logger, reconcile);
  }

  /** Retries a failed message later, or ends it (permanent failure, or out of deliveries). */
  function settleFailure(item: Decoded<T>, error: unknown, logRetry: boolean): void {
    const { msg } = item;
    const delivery = msg.info.deliveryCount;
    const fields = {
      ...describe(item.value),
      subject: msg.subject,
      seq: msg.seq,
      delivery,
      err: redactedError(error),
    };
    if (isPermanent(error)) {
      consumerMessagesEnded.inc({ consumer: durableName, reason: 'unprocessable' });
      logger.error(fields, 'unprocessable message terminated (it will not be redelivered)');
      // No reason text: servers before 2.10 ignore a `+TERM` that carries one.
      msg.term();
    } else if (maxDeliver > 0 && delivery >= maxDeliver) {
      consumerMessagesEnded.inc({ consumer: durableName, reason: 'out_of_deliveries' });
      logger.error(fields, `handler failed ${delivery} times; giving up on this message`);
      msg.term();
    } else {
      const retryInMs = retryDelayMs(delivery, retryDelay);
      if (logRetry && delivery >= LOUD_AFTER_DELIVERIES)
        logger.error({ ...fields, retry_in_ms: retryInMs }, `handler failed ${delivery} times; will retry`);
      else if (logRetry) logger.warn({ ...fields, retry_in_ms: retryInMs }, 'handler failed; will retry');
      msg.nak(retryInMs);
    }
  }

  async function handle(messages: JsMsg[]): Promise<void> {
    const batch: Decoded<T>[] = [];
    for (const msg of messages) {
      if (msg.info.deliveryCount > 1) consumerRedeliveries.inc({ consumer: durableName });
      let value: T | undefined;
      try {
        value = options.decode(msg);
      } catch (error) {
        logger.error(
          {
            subject: msg.subject,
            seq: msg.seq,
            reason: error instanceof Error ? error.message : String(error),
          },
          'undecodable message terminated (it will not be redelivered)',
        );
        consumerMessagesEnded.inc({ consumer: durableName, reason: 'undecodable' });
        msg.term();
        continue;
      }
      if (value === undefined) msg.ack();
      else batch.push({ msg, value });
    }
    if (batch.length === 0) return;
    // Tell the server we are still at it, so a slow batch is not redelivered meanwhile.
    const keepAlive = setInterval(
      () => batch.forEach(({ msg }) => msg.working()),
      Math.max(Math.floor(ackWaitMs / 3), 1_000),
    );
    let failures: BatchFailures | void;
    const span =
      options.spanPerBatch === false
        ? undefined
        : startSpan(`process ${durableName}`, {
            kind: SpanKind.CONSUMER,
            // Only to recorded spans: the SDK keeps 128 links, and a batch of 200 would otherwise
            // lose links to sampled traces to ones pointing at nothing.
            links: batch.flatMap(({ msg }) => linkToRecordedSpan(msg.headers, natsHeaderGetter) ?? []),
            attributes: { 'messaging.system': 'nats', 'messaging.batch.message_count': batch.length },
          });
    try {
      failures = await (span ? span.run(() => options.handleBatch(batch)) : options.handleBatch(batch));
    } catch (error) {
      // Neither the exception nor its message goes into the span: only what the log line keeps.
      span?.fail(undefined, redactedErrorText(error));
      const delivery = Math.max(...batch.map(({ msg }) => msg.info.deliveryCount));
      const fields = { err: redactedError(error), messages: batch.length, delivery };
      if (delivery >= LOUD_AFTER_DELIVERIES)
        logger.error(fields, `batch failed ${delivery} times; will retry`);
      else logger.warn(fields, 'batch failed; will retry');
      batch.forEach((item) => settleFailure(item, error, false));
      return;
    } finally {
      clearInterval(keepAlive);
      span?.end();
    }
    for (const item of batch) {
      if (failures?.has(item.msg)) settleFailure(item, failures.get(item.msg), true);
      else item.msg.ack();
    }
    logger.debug({ messages: batch.length, failed: failures?.size ?? 0 }, 'batch handled');
  }

  async function watchStatus(messages: ConsumerMessages): Promise<void> {
    for await (const status of messages.status()) {
      switch (status.type) {
        case 'heartbeats_missed':
          if (status.count >= 2)
            logger.warn({ missed: status.count }, 'consumer heartbeats missed; re-checking');
          break;
        case 'consumer_deleted':
        case 'consumer_not_found':
        case 'stream_not_found':
          logger.warn({ status: status.type }, 'consumer or stream disappeared; recreating');
          break;
        case 'exceeded_limits':
          logger.warn({ description: status.description }, 'pull request exceeded server limits');
          break;
        default:
          break;
      }
    }
  }

  // Create the consumer before returning, so that a wrong configuration fails the start.
  await untilJetStreamAnswers(`consumer ${durableName} of stream ${stream}`, () => ensureConsumer(true), {
    logger,
    timeoutMs: options.readyTimeoutMs ?? 120_000,
  });
  const stopReportingBacklog = consumerBacklog.add(durableName, async () => {
    const info = await jsm.consumers.info(stream, durableName);
    return { pending: info.num_pending, ackPending: info.num_ack_pending, redelivered: info.num_redelivered };
  });

  let stopping = false;
  let current: ConsumerMessages | undefined;
  const stopSignal = new AbortController();

  async function run(): Promise<void> {
    let failures = 0;
    let consumerReady = true;
    while (!stopping) {
      const pending: JsMsg[] = [];
      let timer: NodeJS.Timeout | undefined;
      let handling: Promise<void> | undefined;
      // One batch in hand at a time. What arrives meanwhile waits in `pending` (the loop below stops
      // taking more at maxBatch) and goes as the next batch: a slow handler gets bigger batches, not a
      // queue of small ones that a stop would have to work through. A stop lets the batch in hand and the
      // one waiting finish: handing them back could send them to this process's pull request, which the
      // server keeps open after we stop listening, to wait out the ack wait.
      const handlePending = async (): Promise<void> => {
        try {
          while (pending.length > 0) await handle(pending.splice(0, maxBatch));
        } finally {
          handling = undefined;
        }
      };
      const flush = (): Promise<void> => {
        if (timer) clearTimeout(timer);
        timer = undefined;
        if (!handling && pending.length > 0) handling = handlePending();
        return handling ?? Promise.resolve();
      };
      try {
        if (!consumerReady) await ensureConsumer(false);
        consumerReady = false;
        const consumer = await js.consumers.get(stream, durableName);
        if (stopping) break;
        // abort_on_missing_resource: end the iterator when the consumer vanishes, so we recreate it here.
        const messages = await consumer.consume({
          max_messages: maxBatch * 2,
          abort_on_missing_resource: true,
        });
        current = messages;
        // close() takes effect (and its promise resolves) only as the iterator below runs.
        if (stopping) void closeDraining(messages);
        void watchStatus(messages);
        logger.info('consuming');
        for await (const msg of messages) {
          failures = 0;
          if (stopping) {
            // Pulled but not handled: give it back now instead of after ack_wait.
            msg.nak();
            continue;
          }
          pending.push(msg);
          if (pending.length >= maxBatch) await flush();
          else timer ??= setTimeout(() => void flush(), maxWaitMs);
        }
        await flush();
        const closedWith = await messages.closed();
        if (closedWith && !stopping) throw closedWith;
      } catch (error) {
        await flush().catch(() => undefined);
        if (stopping) break;
        if (error instanceof ClosedConnectionError || error instanceof DrainingConnectionError) {
          logger.warn('NATS connection closed; consumer stopped');
          break;
        }
        failures++;
        logger.warn({ err: error, attempt: failures }, 'consumer interrupted; restarting');
      }
      if (stopping) break;
      const waitMs = Math.min(250 * 2 ** Math.min(failures, 6), 10_000);
      await sleep(waitMs, undefined, { signal: stopSignal.signal }).catch(() => undefined);
    }
    current = undefined;
  }

  const running = run();
  let stopped: Promise<void> | undefined;
  return {
    stop: () => {
      stopped ??= (async () => {
        stopping = true;
        stopSignal.abort();
        // The loop hands back what still arrives, and ends with the iterator; awaiting `running` covers it.
        await closeDraining(current);
        await running;
        stopReportingBacklog();
        logger.info('consumer stopped');
      })();
      return stopped;
    },
  };
}

/**
 * Ends a `consume()`: its subscription is drained (unsubscribed, then a round trip), so the messages the
 * server sent before it knew arrive and are handed back; `close()` drops them, and they would wait out
 * the ack wait before anyone else got them. nats.js ends the iterator once the drain is done; its
 * subscription is not part of the typed API, hence the look inside.
 */
async function closeDraining(messages: ConsumerMessages | undefined): Promise<void> {
  const sub = (messages as { sub?: Subscription } | undefined)?.sub;
  if (sub && !sub.isClosed() && !sub.isDraining()) {
    const drained = await sub.drain().then(
      () => true,
      () => false,
    );
    if (drained) return;
  }
  void messages?.close();
}
