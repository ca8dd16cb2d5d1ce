import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { isEventType, parseEventData, type DomainEvent, type EventType } from '@sts/events/event-catalogue';
import type { EventResult } from '@sts/events/event-result';
import { UnprocessableEventError } from '@sts/events/unprocessable-event';
import { eventEnvelopeSchema } from '@sts/events/event-envelope';
import { allEventsSubject, eventSubject, eventsStreamName, eventTypeFromSubject } from '@sts/events/subjects';
import type { Logger } from '@sts/logger/create-logger';
import { ZodError } from 'zod';
import { eventsHandled } from '@sts/observability/metrics';
import { contextFromHeaders, inSpan, SpanKind } from '@sts/observability/trace-context';
import { startBatchConsumer, type BatchConsumer, type Decoded } from './batch-consumer';
import { ensureEventsStream } from './event-stream';
import { DEFAULT_MAX_BATCH_MESSAGES } from './durable-consumer';
import { natsHeaderGetter } from './trace-headers';

/**
 * One event of one of the types a consumer asked for. Distributes over the union, so a handler can
 * `switch (event.type)` and get the `data` of that type.
 */
export type ConsumedEvent<Type extends EventType = EventType> = Type extends EventType
  ? DomainEvent<Type>
  : never;

/**
 * A consumer's handler, per event or per batch (as kafkajs offers `eachMessage` and `eachBatch`).
 * Delivery is at least once, so handlers must be idempotent (dedupe by `event.id`).
 */
export type EventHandler<Type extends EventType> =
  | {
      /**
       * Handles one event. Resolving acknowledges it; throwing makes JetStream redeliver it later
       * (an `UnprocessableEventError` ends it at once). May resolve to an outcome for the log line.
       * Events are handled one at a time; handlers should bound their own I/O with timeouts.
       */
      handle: (event: ConsumedEvent<Type>) => Promise<string | void>;
      handleBatch?: never;
    }
  | {
      /**
       * Handles a batch of events (in stream order) at once, for handlers that can write them in a few
       * statements. Returns one result per event, in the same order; throwing fails them all.
       */
      handleBatch: (events: ConsumedEvent<Type>[]) => Promise<EventResult[]>;
      handle?: never;
    };

/** How a consumer takes events, apart from its handler and its connection. */
export interface EventConsumerSettings<Type extends EventType = EventType> {
  /** Durable consumer name, unique per consuming service and purpose (e.g. `notification-feed`). */
  durableName: string;
  eventTypes: readonly Type[];
  /**
   * Deliveries before a failing event is given up (terminated and logged). Default -1: never, since most
   * failures are a dependency of ours being down, which no count of tries outlasts; an event that can never
   * be handled throws `UnprocessableEventError` instead.
   */
  maxDeliver?: number;
  /** Time the server waits for an acknowledgement before redelivering. Default 30 s (kept alive while handled). */
  ackWaitMs?: number;
  /** Delay before redelivering an event whose handler failed: doubles per attempt. */
  retryDelay?: { initialMs?: number; maxMs?: number };
  /** Events per batch at most. Default 200. */
  maxBatchMessages?: number;
  /** How long the first event of a batch waits for more. Default 20 ms. */
  maxWaitMs?: number;
  /** Where a newly created consumer starts: every retained event (default) or only new ones. */
  deliverPolicy?: 'all' | 'new';
}

export type EventConsumerOptions<Type extends EventType = EventType> = EventHandler<Type> &
  EventConsumerSettings<Type> & {
    js: JetStreamClient;
    jsm: JetStreamManager;
    namespace: string;
    /** Copies of the events stream a NATS cluster keeps, should this consumer make it (NATS_STREAM_REPLICAS). */
    streamReplicas?: number;
    logger: Logger;
  };

export type EventConsumer = BatchConsumer;

class InvalidEventError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidEventError';
  }
}

/**
 * A durable consumer of the events stream of `namespace` (the batch consumer underneath) that hands
 * every event of `eventTypes` to its handler, validated against the catalogue, and acknowledges only
 * after the handler succeeded.
 *
 * - A message that is not valid JSON, not a valid envelope, or whose data does not match the
 *   catalogue is terminated (never redelivered) and logged: a poison message cannot block the consumer.
 * - A failed event is negatively acknowledged with an exponential delay (capped), again and again
 *   unless `maxDeliver` bounds the deliveries; from the tenth on each failure is logged as an error.
 * - Events arrive in batches (up to `maxBatchMessages`, gathered for `maxWaitMs`), so that a batch
 *   handler can apply many in one transaction; a per-event handler sees them one at a time, in order.
 */
export function startEventConsumer<Type extends EventType>(
  options: EventConsumerOptions<Type>,
): Promise<EventConsumer> {
  const { namespace, logger } = options;
  if (options.eventTypes.length === 0) throw new Error('startEventConsumer needs at least one event type');
  const wanted = new Set<string>(options.eventTypes);
  const stream = eventsStreamName(namespace);
  const eventLogger = logger.child({ stream, consumer: options.durableName });
  const consumer = options.durableName;
  const handleBatch = options.handleBatch
    ? (batch: Decoded<ConsumedEvent<Type>>[]) => options.handleBatch(batch.map((item) => item.value))
    : oneAtATime(options.handle, consumer);

  function decode(msg: JsMsg): ConsumedEvent<Type> | undefined {
    const subjectType = eventTypeFromSubject(namespace, msg.subject);
    // Only when the server cannot filter several subjects (before 2.10): not ours, skip it.
    if (!wanted.has(subjectType)) return undefined;
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
        const issues = error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ');
        throw new InvalidEventError(`envelope or data does not match the event catalogue (${issues})`);
      }
      throw error;
    }
  }

  return startBatchConsumer<ConsumedEvent<Type>>({
    ...eventConsumerServerSettings(namespace, options),
    js: options.js,
    jsm: options.jsm,
    ensureStream: () =>
      ensureEventsStream(options.jsm, namespace, { logger, replicas: options.streamReplicas }),
    decode,
    // A per-event handler continues each event's trace in a span of its own; a batch gets one span.
    spanPerBatch: !options.handle,
    handleBatch: async (batch) => {
      const results = await handleBatch(batch);
      if (results.length !== batch.length) {
        throw new Error(`the handler returned ${results.length} results for ${batch.length} events`);
      }
      const failures = new Map<JsMsg, unknown>();
      batch.forEach((item, i) => {
        const result = results[i] as EventResult;
        if ('error' in result) {
          eventsHandled.inc({ consumer, event_type: item.value.type, outcome: 'failed' });
          failures.set(item.msg, result.error);
          return;
        }
        eventsHandled.inc({ consumer, event_type: item.value.type, outcome: 'ok' });
        eventLogger.debug(
          { event_id: item.value.id, event_type: item.value.type, outcome: result.outcome },
          'event handled',
        );
      });
      if (failures.size < batch.length) {
        eventLogger.info({ events: batch.length - failures.size, failed: failures.size }, 'events handled');
      }
      return failures;
    },
    isPermanentFailure: (error) => error instanceof UnprocessableEventError,
    describe: (event) => ({ event_id: event.id, event_type: event.type }),
    logger,
    retryDelay: {
      initialMs: options.retryDelay?.initialMs ?? 1_000,
      maxMs: options.retryDelay?.maxMs ?? 5 * 60_000,
    },
    maxWaitMs: options.maxWaitMs ?? 20,
  });
}

/**
 * What the server keeps of an event consumer (its stream, subjects and limits), for its process and for
 * the provisioning step alike (`batchConsumerSpec` of it).
 */
export function eventConsumerServerSettings(
  namespace: string,
  settings: Pick<
    EventConsumerSettings,
    'durableName' | 'eventTypes' | 'maxDeliver' | 'ackWaitMs' | 'maxBatchMessages' | 'deliverPolicy'
  >,
) {
  return {
    stream: eventsStreamName(namespace),
    durableName: settings.durableName,
    filterSubjects: [...new Set(settings.eventTypes)].map((type) => eventSubject(namespace, type)),
    fallbackFilterSubject: allEventsSubject(namespace),
    deliverPolicy: settings.deliverPolicy,
    maxDeliver: settings.maxDeliver ?? -1,
    ackWaitMs: settings.ackWaitMs ?? 30_000,
    maxBatchMessages: settings.maxBatchMessages ?? DEFAULT_MAX_BATCH_MESSAGES,
  };
}

/**
 * A per-event handler applied to a batch: one event after another, each failing on its own, each in a
 * span that continues the trace its message carries (the change that caused the event).
 */
function oneAtATime<Event extends ConsumedEvent>(
  handle: (event: Event) => Promise<string | void>,
  consumer: string,
) {
  return async (items: Decoded<Event>[]): Promise<EventResult[]> => {
    const results: EventResult[] = [];
    for (const { msg, value: event } of items) {
      try {
        const outcome = await inSpan(
          `handle ${event.type}`,
          {
            kind: SpanKind.CONSUMER,
            parent: contextFromHeaders(msg.headers, natsHeaderGetter),
            attributes: {
              'messaging.system': 'nats',
              'messaging.consumer.group.name': consumer,
              'messaging.message.id': event.id,
            },
          },
          () => handle(event),
        );
        results.push({ outcome: outcome ?? undefined });
      } catch (error) {
        results.push({ error });
      }
    }
    return results;
  };
}
