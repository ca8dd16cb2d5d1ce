import type { ServiceName } from '@sts/vocabulary/services';
import type { EventType } from './event-catalogue';

/**
 * The one service that may publish each event type. NATS permissions are made from this
 * (`@sts/nats/nats-permissions`): a service can publish its own events and no one else's, so a
 * compromised or buggy service cannot forge, say, an e-mail request in another service's name.
 */
export const EVENT_PRODUCERS: Record<EventType, ServiceName> = {
  'org.created': 'identity',
  'member.joined': 'identity',
  'member.updated': 'identity',
  'member.removed': 'identity',
  'invite.created': 'identity',
  'device.enrolled': 'enrollment',
  'device.disabled': 'enrollment',
  'device.enabled': 'enrollment',
  'device.deleted': 'enrollment',
  'enrollment_code.email_requested': 'enrollment',
  'threat.detected': 'analytics',
  'billing.updated': 'billing',
  'billing.payment_failed': 'billing',
};
