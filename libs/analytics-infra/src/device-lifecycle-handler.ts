import { EVENT_CONSUMERS } from '@sts/events/event-consumers';
import type { DevicePurges, DeviceStateStore } from '@sts/analytics-domain/analytics-ports';
import type { ConsumedEvent } from '@sts/nats/event-consumer';

export const DEVICE_EVENT_TYPES = EVENT_CONSUMERS.analytics.eventTypes;

/**
 * Keeps analytics' projection of the device lifecycle: the state as of the event's time (a late,
 * older event never wins; every change kept, so ingestion knows the state when a batch was received),
 * the enrollment time, and a deleted device's telemetry purged: the deletion is parked (`DevicePurges`)
 * and done from there, so no ClickHouse outage outlasts it. Idempotent.
 */
export function deviceLifecycleHandler(
  store: DeviceStateStore,
  purges: DevicePurges,
): (event: ConsumedEvent<(typeof DEVICE_EVENT_TYPES)[number]>) => Promise<string> {
  return async (event) => {
    const device = { orgId: event.data.org_id, deviceId: event.data.device_id };
    const version = Date.parse(event.occurred_at);
    switch (event.type) {
      case 'device.enrolled':
        // Enrolling again keeps the device's status (a disabled device stays disabled).
        if (event.data.re_enrolled) return 'unchanged';
        await store.setState(
          device,
          event.data.hostname,
          'active',
          version,
          Date.parse(event.data.enrolled_at),
        );
        return 'active';
      case 'device.enabled':
        await store.setState(device, event.data.hostname, 'active', version);
        return 'active';
      case 'device.disabled':
        await store.setState(device, event.data.hostname, 'disabled', version);
        return 'disabled';
      case 'device.deleted':
        // The state and the purge are recorded from the parked purge, at once while ClickHouse answers.
        await purges.park(device, { hostname: event.data.hostname, version, eventId: event.id });
        return 'parked';
    }
  };
}
