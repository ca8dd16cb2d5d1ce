import type { NatsConnection, Subscription } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';
import { subscribeToEvents } from './event-subscriptions';
import type { GatewayCaches } from './gateway-caches';

/** Membership events evict what they make stale (resolved callers, member pages). */
export function subscribeToMembershipChanges(
  nc: NatsConnection,
  namespace: string,
  caches: GatewayCaches,
  logger: Logger,
): Subscription[] {
  return subscribeToEvents(
    nc,
    namespace,
    ['member.joined', 'member.updated', 'member.removed'] as const,
    (_type, data) => caches.membershipChanged(data.org_id, data.user_id),
    logger,
  );
}

/** `billing.updated` (from any gateway's webhook, or a checkout) evicts the organization's license. */
export function subscribeToLicenseChanges(
  nc: NatsConnection,
  namespace: string,
  caches: GatewayCaches,
  logger: Logger,
): Subscription[] {
  return subscribeToEvents(
    nc,
    namespace,
    ['billing.updated'] as const,
    (_type, data) => caches.licenseChanged(data.org_id),
    logger,
  );
}
