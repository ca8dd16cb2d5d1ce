import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import type { z } from 'zod';
import { EVENT_CATALOGUE, type EventData, type EventType } from '@sts/events/event-catalogue';
import { eventEnvelopeSchema } from '@sts/events/event-envelope';
import { eventSubject } from '@sts/events/subjects';
import type { Logger } from '@sts/logger/create-logger';

/**
 * Plain NATS subscriptions (no durable consumer: a missed message only means a cache entry lives until
 * its TTL) to events whose data `onEvent` receives validated. Anyone who can publish on a subject can
 * send anything: what fails to parse is logged and dropped, and nothing thrown escapes, or the client
 * library would end the subscription and evictions would stop.
 */
export function subscribeToEvents<Type extends EventType>(
  nc: NatsConnection,
  namespace: string,
  types: readonly Type[],
  onEvent: (type: Type, data: EventData<Type>) => void,
  logger: Logger,
): Subscription[] {
  return types.map((type) =>
    subscribeValidated(
      nc,
      eventSubject(namespace, type),
      (payload) => {
        const envelope = eventEnvelopeSchema.safeParse(payload);
        const data = envelope.success ? EVENT_CATALOGUE[type].safeParse(envelope.data.data) : null;
        return data?.success ? (data.data as EventData<Type>) : undefined;
      },
      (data) => onEvent(type, data),
      logger,
      { type },
    ),
  );
}

/** The same for a message outside the event catalogue (a plain JSON body with its own schema). */
export function subscribeToMessages<Schema extends z.ZodType>(
  nc: NatsConnection,
  subject: string,
  schema: Schema,
  onMessage: (data: z.infer<Schema>) => void,
  logger: Logger,
): Subscription {
  return subscribeValidated(
    nc,
    subject,
    (payload) => {
      const parsed = schema.safeParse(payload);
      return parsed.success ? parsed.data : undefined;
    },
    onMessage,
    logger,
    { subject },
  );
}

function subscribeValidated<Data>(
  nc: NatsConnection,
  subject: string,
  parse: (payload: unknown) => Data | undefined,
  handle: (data: Data) => void,
  logger: Logger,
  /** What the log lines name (the event type, or the subject). */
  context: Record<string, string>,
): Subscription {
  return nc.subscribe(subject, {
    callback: (error, message) => {
      if (error) {
        logger.warn({ err: error, ...context }, 'event subscription failed');
        return;
      }
      let payload: unknown;
      try {
        payload = message.json();
      } catch {
        payload = undefined;
      }
      const data = parse(payload);
      if (data === undefined) {
        logger.warn(context, 'ignored a malformed event');
        return;
      }
      try {
        handle(data);
      } catch (failure) {
        logger.warn({ err: failure, ...context }, 'event handler failed');
      }
    },
  });
}
