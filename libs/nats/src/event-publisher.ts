import type { JetStreamClient } from '@nats-io/jetstream';
import { isEventType } from '@sts/events/event-catalogue';
import type { EventEnvelope } from '@sts/events/event-envelope';
import { eventSubject, eventsStreamName } from '@sts/events/subjects';
import { traceHeaders } from './trace-headers';

export type EventPublisher = (envelope: EventEnvelope) => Promise<void>;

export interface EventPublisherOptions {
  /** Milliseconds to wait for the stream's acknowledgement (default: the connection's timeout). */
  timeoutMs?: number;
}

/**
 * Publishes event envelopes to the events stream of `namespace`. The envelope id travels as
 * `Nats-Msg-Id`, so a retry within the stream's duplicate window stores the event once. The returned
 * promise resolves only once JetStream has stored the message (or recognised it as a duplicate)
 * and rejects otherwise, so an outbox relay marks a row as sent only after that. The active trace
 * context (the relay's producer span, an analytics batch) travels in the message's headers.
 */
export function createEventPublisher(
  js: JetStreamClient,
  namespace: string,
  options: EventPublisherOptions = {},
): EventPublisher {
  const streamName = eventsStreamName(namespace);
  return async (envelope) => {
    if (!isEventType(envelope.type)) {
      throw new Error(`cannot publish event ${envelope.id}: unknown event type "${envelope.type}"`);
    }
    const ack = await js.publish(eventSubject(namespace, envelope.type), JSON.stringify(envelope), {
      msgID: envelope.id,
      headers: traceHeaders(),
      // Fail rather than store the event in some other stream that happens to capture the subject.
      expect: { streamName },
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    });
    if (ack.stream !== streamName) {
      throw new Error(`event ${envelope.id} was stored in stream ${ack.stream}, expected ${streamName}`);
    }
  };
}
