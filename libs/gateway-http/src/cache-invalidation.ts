import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';
import { subscribeToEvents } from './event-subscriptions';
import type { GatewayCaches } from './gateway-caches';

/**
 * Events that make cached answers stale, from any gateway or service: membership events evict the
 * user's resolved callers and the organization's member pages; `billing.updated` (a payment event any
 * gateway took, a checkout) evicts the organization's license.
 */
export function subscribeToCacheEvictions(
  nc: NatsConnection,
  namespace: string,
  caches: GatewayCaches,
  logger: Logger,
): Subscription[] {
  return subscribeToEvents(
    nc,
    namespace,
    ['member.joined', 'member.updated', 'member.removed', 'billing.updated'] as const,
    (type, data) => {
      if (type === 'billing.updated') caches.licenseChanged(data.org_id);
      else caches.membershipChanged(data.org_id, 'user_id' in data ? data.user_id : null);
    },
    logger,
  );
}
