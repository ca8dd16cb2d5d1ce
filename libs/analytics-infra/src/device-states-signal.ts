import type { NatsConnection } from '@nats-io/nats-core';
import type { DeviceStateStore } from '@sts/analytics-domain/analytics-ports';
import { deviceStatesAppliedSubject, type DeviceStatesApplied } from '@sts/events/device-states-applied';
import type { Logger } from '@sts/logger/create-logger';

/**
 * The device states as `store` keeps them, and once a change is in ClickHouse (a state set, a deleted
 * device's rows purged) the word to the gateways that the organization's analytics answers changed
 * (`deviceStatesAppliedSubject`): they drop their cached answers on it, not on the device event, which
 * they hear before this service has applied it (docs/decisions.md, "Analytics answers are reused").
 */
export function signallingDeviceStates(
  store: DeviceStateStore,
  nc: Pick<NatsConnection, 'publish'>,
  namespace: string,
  logger: Logger,
): DeviceStateStore {
  const subject = deviceStatesAppliedSubject(namespace);
  const applied = (orgId: string) => {
    const signal: DeviceStatesApplied = { org_id: orgId };
    try {
      nc.publish(subject, JSON.stringify(signal));
    } catch (error) {
      // Closed or draining: the gateways' TTL bounds what they keep meanwhile.
      logger.warn({ err: error, org_id: orgId }, 'cannot tell the gateways that device states changed');
    }
  };
  return {
    setState: async (device, hostname, state, version, enrolledAt) => {
      await store.setState(device, hostname, state, version, enrolledAt);
      applied(device.orgId);
    },
    purge: async (device) => {
      await store.purge(device);
      applied(device.orgId);
    },
  };
}
