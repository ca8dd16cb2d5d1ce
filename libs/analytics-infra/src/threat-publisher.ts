import { createHash } from 'node:crypto';
import type { ThreatPublisher } from '@sts/analytics-domain/analytics-ports';
import { parseEventData } from '@sts/events/event-catalogue';
import type { EventPublisher } from '@sts/nats/event-publisher';

/**
 * Publishes `threat.detected` straight to the events stream (analytics has no outbox: its state is in
 * ClickHouse). The event id is derived from the device and the cooldown period of the detection, so
 * two analytics processes, or one repeating after a crash, publish the same id and the stream stores
 * the event once.
 */
export function threatPublisher(publish: EventPublisher, cooldownMinutes: number): ThreatPublisher {
  return {
    publish: async (data) => {
      const period = Math.floor(Date.parse(data.detected_at) / (cooldownMinutes * 60_000));
      await publish({
        id: uuidFromName(`threat.detected:${data.org_id}:${data.device_id}:${period}`),
        type: 'threat.detected',
        occurred_at: data.detected_at,
        data: parseEventData('threat.detected', data),
      });
    },
  };
}

/** A name-based UUID (version 8, RFC 9562) from SHA-256. */
function uuidFromName(name: string): string {
  const bytes = createHash('sha256').update(name).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
