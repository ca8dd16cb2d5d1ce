import type { NatsConnection, Subscription } from '@nats-io/nats-core';
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
    nc.subscribe(eventSubject(namespace, type), {
      callback: (error, message) => {
        if (error) {
          logger.warn({ err: error, type }, 'event subscription failed');
          return;
        }
        let payload: unknown;
        try {
          payload = message.json();
        } catch {
          payload = undefined;
        }
        const envelope = eventEnvelopeSchema.safeParse(payload);
        const data = envelope.success ? EVENT_CATALOGUE[type].safeParse(envelope.data.data) : null;
        if (!data?.success) {
          logger.warn({ type }, 'ignored a malformed event');
          return;
        }
        try {
          onEvent(type, data.data as EventData<Type>);
        } catch (failure) {
          logger.warn({ err: failure, type }, 'event handler failed');
        }
      },
    }),
  );
}
