import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import { deviceStatesAppliedSchema, deviceStatesAppliedSubject } from '@sts/events/device-states-applied';
import type { Logger } from '@sts/logger/create-logger';
import { subscribeToEvents, subscribeToMessages } from './event-subscriptions';
import type { GatewayCaches } from './gateway-caches';

/**
 * Events that make cached answers stale, from any gateway or service: membership events evict the
 * user's resolved callers and the organization's member pages; `billing.updated` (a payment event any
 * gateway took, a checkout) evicts the organization's license; analytics' word that it has applied a
 * device change (`deviceStatesAppliedSubject`) evicts the organization's analytics answers.
 *
 * Why that word and not the device event: the gateway hears `device.*` before analytics has written it
 * to ClickHouse, so an answer loaded in between would keep the old figures for a whole TTL (the old
 * remedy, evicting again a second later, only guessed how long analytics takes). Analytics speaks once
 * the change is in ClickHouse; the eviction also abandons loads in flight, so every answer cached after
 * it was read after the change. Versions on the answers would be exact too, but need a version every
 * gateway and analytics agree on and a call's worth of plumbing; one message per change is the
 * simplest exact signal (docs/decisions.md, "Analytics answers are reused for a second").
 */
export function subscribeToCacheEvictions(
  nc: NatsConnection,
  namespace: string,
  caches: GatewayCaches,
  logger: Logger,
): Subscription[] {
  return [
    ...subscribeToEvents(
      nc,
      namespace,
      ['member.joined', 'member.updated', 'member.removed', 'billing.updated'] as const,
      (type, data) => {
        if (type === 'billing.updated') caches.licenseChanged(data.org_id);
        else caches.membershipChanged(data.org_id, 'user_id' in data ? data.user_id : null);
      },
      logger,
    ),
    subscribeToMessages(
      nc,
      deviceStatesAppliedSubject(namespace),
      deviceStatesAppliedSchema,
      (applied) => caches.devicesChanged(applied.org_id),
      logger,
    ),
  ];
}
