import { z } from 'zod';

/**
 * Analytics' word that it has applied a device's change of state (enrolled, disabled, enabled, deleted,
 * purged) to ClickHouse: answers about the organization read after it include the change. Plain NATS, in
 * no stream: it only tells the gateways when to drop cached analytics answers (a lost one costs at most
 * their TTL), so it is not worth a durable copy. Analytics alone publishes it; only gateways subscribe.
 */
export function deviceStatesAppliedSubject(namespace: string): string {
  return `${namespace}.signals.device-states-applied`;
}

export const deviceStatesAppliedSchema = z.object({ org_id: z.string().min(1).max(64) }).strict();

export type DeviceStatesApplied = z.infer<typeof deviceStatesAppliedSchema>;
