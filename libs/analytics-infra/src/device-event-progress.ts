import type { JetStreamManager } from '@nats-io/jetstream';
import type { DeviceEventProgress } from '@sts/analytics-domain/analytics-ports';
import type { EventConsumerName } from '@sts/events/event-consumers';
import { eventsStreamName } from '@sts/events/subjects';

/** Analytics' durable consumer of the device events (device-lifecycle-handler.ts). */
export const DEVICE_EVENTS_CONSUMER = 'analytics' satisfies EventConsumerName;

export interface DeviceEventProgressOptions {
  jsm: JetStreamManager;
  namespace: string;
  /** How long one answer of the server is used again (default 1 s). */
  cacheMs?: number;
  now?: () => number;
}

/**
 * How far the device events are applied, read from the server's information on analytics' device-event
 * consumer (shared by every replica, so each answers the same): when it shows nothing pending and nothing
 * unacknowledged, every event the stream held when it was asked has been handled, and its effect is in
 * ClickHouse (a handler acknowledges after its write). Answers the latest moment it was asked and seen so,
 * asking again at most every `cacheMs`; a failed question answers what was known before.
 */
export function deviceEventProgress(options: DeviceEventProgressOptions): DeviceEventProgress {
  const { jsm } = options;
  const stream = eventsStreamName(options.namespace);
  const cacheMs = options.cacheMs ?? 1_000;
  const now = options.now ?? Date.now;
  let appliedUntil: number | null = null;
  let askedAt = Number.NEGATIVE_INFINITY;
  let asking: Promise<number | null> | undefined;

  const ask = async (): Promise<number | null> => {
    const at = now();
    try {
      const info = await jsm.consumers.info(stream, DEVICE_EVENTS_CONSUMER);
      askedAt = at;
      if (info.num_pending === 0 && info.num_ack_pending === 0)
        appliedUntil = Math.max(appliedUntil ?? at, at);
    } catch {
      // NATS away: what was applied before still was; the next batch asks again.
    }
    return appliedUntil;
  };

  return {
    appliedUntil: () => {
      if (now() - askedAt < cacheMs) return Promise.resolve(appliedUntil);
      asking ??= ask().finally(() => (asking = undefined));
      return asking;
    },
  };
}
