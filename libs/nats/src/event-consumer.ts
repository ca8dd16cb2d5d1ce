import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type ConsumerConfig,
  type ConsumerInfo,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import {
  ClosedConnectionError,
  DrainingConnectionError,
  InvalidArgumentError,
  nanos,
} from '@nats-io/nats-core';
import { isEventType, parseEventData, type DomainEvent, type EventType } from '@sts/events/event-catalogue';
import { UnprocessableEventError } from '@sts/events/unprocessable-event';
import { eventEnvelopeSchema } from '@sts/events/event-envelope';
import { allEventsSubject, eventSubject, eventsStreamName, eventTypeFromSubject } from '@sts/events/subjects';
import type { Logger } from '@sts/logger/create-logger';
import { ZodError } from 'zod';
import { ensureEventsStream } from './event-stream';

/**
 * One event of one of the types a consumer asked for. Distributes over the union, so a handler can
 * `switch (event.type)` and get the `data` of that type.
 */
export type ConsumedEvent<Type extends EventType = EventType> = Type extends EventType
  ? DomainEvent<Type>
  : never;

export interface EventConsumerOptions<Type extends EventType = EventType> {
  js: JetStreamClient;
  jsm: JetStreamManager;
  namespace: string;
  /** Durable consumer name, unique per consuming service and purpose (e.g. `notification-feed`). */
  durableName: string;
  eventTypes: readonly Type[];
  /**
   * Handles one event. Resolving acknowledges the message; throwing makes JetStream redeliver it
   * later. Delivery is at least once, so handlers must be idempotent (dedupe by `event.id`).
   * Handlers run one at a time per consumer; they should bound their own I/O with timeouts.
   * May resolve to an outcome (e.g. `'applied'`, `'duplicate'`) for the "event handled" log line.
   */
  handle: (event: ConsumedEvent<Type>) => Promise<string | void>;
  logger: Logger;
  /** Deliveries before a failing event is given up (terminated and logged). Default 10. */
  maxDeliver?: number;
  /** Time the server waits for an acknowledgement before redelivering. Default 30 s. */
  ackWaitMs?: number;
  /** Delay before redelivering an event whose handler failed: doubles per attempt. */
  retryDelay?: { initialMs?: number; maxMs?: number };
  /** Messages pulled ahead of the handler. Default 10. */
  maxMessages?: number;
  /** Where a newly created consumer starts: every retained event (default) or only new ones. */
  deliverPolicy?: 'all' | 'new';
}

export interface EventConsumer {
  /** Stops pulling, lets the event in hand finish (acked or retried), returns the rest to the stream. */
  stop(): Promise<void>;
}

/** JetStream API error codes (nats-server `server/errors.json`). */
const CONSUMER_NOT_FOUND = 10014;
const CONSUMER_NAME_EXISTS = 10013;
const CONSUMER_ALREADY_EXISTS = 10148;

function isConsumerNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === CONSUMER_NOT_FOUND;
}

function isConsumerExists(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === CONSUMER_ALREADY_EXISTS || error.code === CONSUMER_NAME_EXISTS)
  );
}

class InvalidEventError extends Error {
  constructor(
    message: string,
    readonly issues: { path: string; message: string }[] = [],
  ) {
    super(message);
    this.name = 'InvalidEventError';
  }
}

/**
 * Creates (or updates) a durable pull consumer on the events stream of `namespace` and hands every
 * event of `eventTypes` to `handle`, acknowledging only after the handler succeeded.
 *
 * - A message that is not valid JSON, not a valid envelope, or whose data does not match the
 *   catalogue is terminated (never redelivered) and logged: a poison message cannot block the consumer.
 * - A handler failure is negatively acknowledged with an exponential delay; after `maxDeliver`
 *   deliveries the event is terminated and logged as given up.
 * - If the consumer or the stream disappears (deleted by an operator, lost by a server), it is
 *   recreated and consumption resumes. Reconnects after a NATS restart are handled by the client.
 */
export async function startEventConsumer<Type extends EventType>(
  options: EventConsumerOptions<Type>,
): Promise<EventConsumer> {
  const { js, jsm, namespace, durableName, logger: parentLogger } = options;
  if (options.eventTypes.length === 0) throw new Error('startEventConsumer needs at least one event type');
  const stream = eventsStreamName(namespace);
  const logger = parentLogger.child({ stream, consumer: durableName });
  const wanted = new Set<string>(options.eventTypes);
  const maxDeliver = options.maxDeliver ?? 10;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const retryInitialMs = options.retryDelay?.initialMs ?? 1_000;
  const retryMaxMs = options.retryDelay?.maxMs ?? 5 * 60_000;

  const baseConfig: Partial<ConsumerConfig> = {
    durable_name: durableName,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: options.deliverPolicy === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
    ack_wait: nanos(ackWaitMs),
    max_deliver: maxDeliver,
  };
  const subjects = [...wanted].sort().map((type) => eventSubject(namespace, type as EventType));

  /**
   * Makes sure the durable consumer exists. At start (`reconcile`) it also brings an existing one to
   * this configuration; when recovering from a vanished consumer it only recreates a missing one, so
   * that instances of two versions during a rolling deploy do not keep replacing each other's consumer.
   */
  async function ensureConsumer(reconcile: boolean): Promise<void> {
    await ensureEventsStream(jsm, namespace);
    const existing = await consumerInfo();
    if (!existing) {
      try {
        await createConsumer({});
      } catch (error) {
        // A twin instance created it a moment ago: fine.
        if (!isConsumerExists(error)) throw error;
      }
      return;
    }
    if (!reconcile) return;
    if (!filterMatches(existing.config)) {
      // Changing a live consumer's filter is unreliable across server versions (2.9 skips messages
      // after such an update), so start a new consumer where the old one had got to.
      const fromSeq = existing.ack_floor.stream_seq + 1;
      logger.info(
        { from_stream_seq: fromSeq },
        'event types changed; recreating the consumer from its acknowledged position',
      );
      await jsm.consumers.delete(stream, durableName).catch((error: unknown) => {
        if (!isConsumerNotFound(error)) throw error;
      });
      await createConsumer({ deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq });
      return;
    }
    if (
      existing.config.ack_wait !== baseConfig.ack_wait ||
      existing.config.max_deliver !== baseConfig.max_deliver
    ) {
      await jsm.consumers.update(stream, durableName, {
        ack_wait: baseConfig.ack_wait,
        max_deliver: baseConfig.max_deliver,
      });
    }
  }

  async function consumerInfo(): Promise<ConsumerInfo | undefined> {
    try {
      return await jsm.consumers.info(stream, durableName);
    } catch (error) {
      if (isConsumerNotFound(error)) return undefined;
      throw error;
    }
  }

  async function createConsumer(extra: Partial<ConsumerConfig>): Promise<void> {
    const config = { ...baseConfig, ...extra };
    if (subjects.length === 1) {
      await jsm.consumers.add(stream, { ...config, filter_subject: subjects[0] });
      return;
    }
    try {
      await jsm.consumers.add(stream, { ...config, filter_subjects: subjects });
    } catch (error) {
      // Servers before 2.10 take one filter subject only (the client refuses before asking): take
      // every event and skip the unwanted ones here.
      if (!(error instanceof InvalidArgumentError && error.message.includes('filter_subjects'))) throw error;
      logger.debug('server lacks filter_subjects; filtering event types in the client');
      await jsm.consumers.add(stream, { ...config, filter_subject: allEventsSubject(namespace) });
    }
  }

  function filterMatches(config: ConsumerConfig): boolean {
    const current = config.filter_subjects?.length
      ? [...config.filter_subjects].sort()
      : config.filter_subject
        ? [config.filter_subject]
        : [];
    if (current.length === subjects.length && current.every((subject, i) => subject === subjects[i]))
      return true;
    // The client-side filtering fallback of servers before 2.10.
    return subjects.length > 1 && current.length === 1 && current[0] === allEventsSubject(namespace);
  }

  function decode(msg: JsMsg, subjectType: string): ConsumedEvent<Type> {
    let json: unknown;
    try {
      json = JSON.parse(msg.string());
    } catch {
      throw new InvalidEventError('payload is not JSON');
    }
    try {
      const envelope = eventEnvelopeSchema.parse(json);
      if (!isEventType(envelope.type)) throw new InvalidEventError(`unknown event type "${envelope.type}"`);
      if (subjectType !== envelope.type) {
        throw new InvalidEventError(
          `envelope type "${envelope.type}" does not match subject type "${subjectType}"`,
        );
      }
      const data = parseEventData(envelope.type, envelope.data);
      return {
        id: envelope.id,
        type: envelope.type,
        occurred_at: envelope.occurred_at,
        data,
      } as ConsumedEvent<Type>;
    } catch (error) {
      if (error instanceof ZodError) {
        throw new InvalidEventError(
          'envelope or data does not match the event catalogue',
          error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
        );
      }
      throw error;
    }
  }

  function retryDelayMs(deliveryCount: number): number {
    const exponential = retryInitialMs * 2 ** Math.min(Math.max(deliveryCount - 1, 0), 30);
    const capped = Math.min(exponential, retryMaxMs);
    // ±20% jitter so that events that failed together do not all come back together.
    return Math.round(capped * (0.8 + Math.random() * 0.4));
  }

  async function processMessage(msg: JsMsg): Promise<void> {
    const delivery = msg.info.deliveryCount;
    const where = { subject: msg.subject, seq: msg.seq, delivery };
    const subjectType = eventTypeFromSubject(namespace, msg.subject);
    if (!wanted.has(subjectType)) {
      // Only when the server cannot filter several subjects (before 2.10): not ours, skip it.
      msg.ack();
      return;
    }
    let event: ConsumedEvent<Type>;
    try {
      event = decode(msg, subjectType);
    } catch (error) {
      const details =
        error instanceof InvalidEventError ? { reason: error.message, issues: error.issues } : { err: error };
      logger.error({ ...where, ...details }, 'invalid event terminated (it will not be redelivered)');
      // No reason text: servers before 2.10 ignore a `+TERM` that carries one.
      msg.term();
      return;
    }

    // Spelled out, not `{ ...where, ... }`: a spread followed by new keys gives every object a map of
    // its own in Node 20's V8 (docs/decisions.md, "Platform").
    const eventLog: Record<string, unknown> = {
      subject: where.subject,
      seq: where.seq,
      delivery,
      event_id: event.id,
      event_type: event.type,
      outcome: undefined,
    };
    // Tell the server we are still at it, so a slow handler does not get the event redelivered.
    const keepAlive = setInterval(() => msg.working(), Math.max(Math.floor(ackWaitMs / 3), 1_000));
    let outcome: string | void;
    try {
      outcome = await options.handle(event);
    } catch (error) {
      clearInterval(keepAlive);
      if (error instanceof UnprocessableEventError) {
        logger.error(
          { ...eventLog, err: error },
          'unprocessable event terminated (it will not be redelivered)',
        );
        msg.term();
        return;
      }
      if (delivery >= maxDeliver) {
        logger.error(
          { ...eventLog, err: error },
          `event handler failed ${delivery} times; giving up on this event`,
        );
        msg.term();
        return;
      }
      const retryInMs = retryDelayMs(delivery);
      logger.warn({ ...eventLog, err: error, retry_in_ms: retryInMs }, 'event handler failed; will retry');
      msg.nak(retryInMs);
      return;
    }
    clearInterval(keepAlive);
    try {
      await msg.ackAck();
      eventLog.outcome = outcome; // pino leaves undefined fields out
      logger.info(eventLog, 'event handled');
    } catch (error) {
      // The handler ran; the event comes back after ack_wait and the idempotent handler skips it.
      logger.warn({ ...eventLog, err: error }, 'acknowledgement not confirmed; the event may be redelivered');
    }
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
        case 'no_responders':
          logger.debug('JetStream not answering (yet)');
          break;
        default:
          break;
      }
    }
  }

  // Create the consumer before returning, so that a wrong configuration fails the start.
  await ensureConsumer(true);

  let stopping = false;
  let current: ConsumerMessages | undefined;
  const stopSignal = new AbortController();

  async function run(): Promise<void> {
    let failures = 0;
    let consumerReady = true;
    while (!stopping) {
      try {
        if (!consumerReady) await ensureConsumer(false);
        consumerReady = false;
        const consumer = await js.consumers.get(stream, durableName);
        if (stopping) break;
        // abort_on_missing_resource: end the iterator when the consumer vanishes, so we recreate it here.
        const messages = await consumer.consume({
          max_messages: options.maxMessages ?? 10,
          abort_on_missing_resource: true,
        });
        current = messages;
        // close() takes effect (and its promise resolves) only as the iterator below runs.
        if (stopping) void messages.close();
        void watchStatus(messages);
        logger.info({ event_types: [...wanted] }, 'consuming events');
        for await (const msg of messages) {
          failures = 0;
          if (stopping) {
            // Pulled but not handled: give it back now instead of after ack_wait.
            msg.nak();
            continue;
          }
          await processMessage(msg);
        }
        const closedWith = await messages.closed();
        if (closedWith && !stopping) throw closedWith;
      } catch (error) {
        if (stopping) break;
        if (error instanceof ClosedConnectionError || error instanceof DrainingConnectionError) {
          logger.warn('NATS connection closed; event consumer stopped');
          break;
        }
        failures++;
        logger.warn({ err: error, attempt: failures }, 'event consumer interrupted; restarting');
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
        // Resolves once the loop has drained the iterator; awaiting `running` covers it.
        void current?.close();
        await running;
        logger.info('event consumer stopped');
      })();
      return stopped;
    },
  };
}
