import type { ServiceName } from '@sts/vocabulary/services';
import type { EventType } from './event-catalogue';

/** A durable consumer of the events stream: the service that reads it and the event types it takes. */
export interface EventConsumerDeclaration {
  service: ServiceName;
  eventTypes: readonly EventType[];
  /** Deliveries before a failing event is given up; absent: never. */
  maxDeliver?: number;
}

/**
 * Every durable consumer of the events stream, by name. The NATS topology (streams and consumers made
 * by the provisioning step) and each service's permissions (it may read its own consumers only) are
 * made from this, like EVENT_PRODUCERS for publishing.
 */
export const EVENT_CONSUMERS = {
  // Feed items, taken in batches, many items per transaction.
  notification: {
    service: 'notification',
    eventTypes: ['member.joined', 'device.enrolled', 'device.disabled', 'threat.detected', 'billing.updated'],
  },
  // E-mails, one at a time on a consumer of their own, so an SMTP outage never holds up the feed. Retries
  // back off to 5 minutes apart: 100 deliveries ride out an SMTP outage of about 8 hours.
  'notification-email': {
    service: 'notification',
    eventTypes: ['invite.created', 'enrollment_code.email_requested', 'billing.payment_failed'],
    maxDeliver: 100,
  },
  billing: { service: 'billing', eventTypes: ['org.created'] },
  // Analytics' projection of the device lifecycle; a deleted device's telemetry must go, never given up.
  analytics: {
    service: 'analytics',
    eventTypes: ['device.enrolled', 'device.disabled', 'device.enabled', 'device.deleted'],
  },
} as const satisfies Record<string, EventConsumerDeclaration>;

export type EventConsumerName = keyof typeof EVENT_CONSUMERS;

/**
 * Every durable consumer of the telemetry stream, by name, with the service that reads it: whether it
 * takes the headers alone, and how many batches it takes at once unless its configuration says.
 */
export const TELEMETRY_CONSUMERS = {
  // Batches into ClickHouse (TELEMETRY_BATCH_MESSAGES).
  'analytics-telemetry': { service: 'analytics', headersOnly: false, maxBatchMessages: 200 },
  // Devices' last_seen_at, read from the batches' headers alone; one flush writes many sightings.
  'enrollment-last-seen': { service: 'enrollment', headersOnly: true, maxBatchMessages: 5_000 },
} as const satisfies Record<string, { service: ServiceName; headersOnly: boolean; maxBatchMessages: number }>;

export type TelemetryConsumerName = keyof typeof TELEMETRY_CONSUMERS;
