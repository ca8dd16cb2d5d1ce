import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { EVENT_CATALOGUE } from '@sts/events/event-catalogue';
import { eventEnvelopeSchema } from '@sts/events/event-envelope';
import { eventSubject } from '@sts/events/subjects';
import type { Logger } from '@sts/logger/create-logger';
import type { GatewayCaches } from './gateway-caches';

/**
 * Listens (plain NATS, no durable consumer: a missed message only means an entry lives until its
 * TTL) to membership events and evicts what they make stale.
 */
export function subscribeToMembershipChanges(
  nc: NatsConnection,
  namespace: string,
  caches: GatewayCaches,
  logger: Logger,
): Subscription[] {
  return (['member.joined', 'member.updated', 'member.removed'] as const).map((type) =>
    nc.subscribe(eventSubject(namespace, type), {
      callback: (error, message) => {
        if (error) {
          logger.warn({ err: error, type }, 'membership event subscription failed');
          return;
        }
        // Anyone who can publish on the subject can send anything: what throws here must not escape,
        // or the client library would end the subscription and evictions would stop.
        let payload: unknown;
        try {
          payload = message.json();
        } catch {
          payload = undefined;
        }
        const envelope = eventEnvelopeSchema.safeParse(payload);
        const data = envelope.success ? EVENT_CATALOGUE[type].safeParse(envelope.data.data) : null;
        if (!data?.success) {
          logger.warn({ type }, 'ignored a malformed membership event');
          return;
        }
        caches.membershipChanged(data.data.org_id, data.data.user_id);
      },
    }),
  );
}
