import { EVENT_PRODUCERS } from '@sts/events/event-producers';
import type { EventType } from '@sts/events/event-catalogue';
import { eventSubject } from '@sts/events/subjects';
import { allTelemetrySubject, telemetryClaimsBucketName } from '@sts/events/telemetry';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';
import { limitsBucketName } from './limits-bucket';

/** A user of the NATS server with every permission: for the project's scripts and tests' cleanup. */
export const NATS_ADMIN_USER = 'admin';

export interface NatsUserPermissions {
  publish: string[];
  /** Subjects refused even where `publish` allows them (a deny wins over an allow). */
  publishDeny: string[];
  subscribe: string[];
}

/**
 * What each service may do on NATS. Every service may use the JetStream API (ensure the events
 * stream, create and read its durable consumer, fetch), ack its messages and receive replies; it may
 * publish only the event subjects it produces (EVENT_PRODUCERS). The gateway also publishes telemetry
 * batches, listens to membership, device and license events (plain subscriptions, for cache evictions)
 * and writes its rate-limit counters (`$KV.<bucket>.>`); the other services may neither write nor read
 * that bucket, nor manage its stream through the JetStream API. Analytics writes its batch claims.
 */
export function natsPermissions(namespace: string, service: ServiceName): NatsUserPermissions {
  const own = (Object.entries(EVENT_PRODUCERS) as [EventType, ServiceName][])
    .filter(([, producer]) => producer === service)
    .map(([type]) => eventSubject(namespace, type));
  const subscribe = ['_INBOX.>'];
  const bucket = limitsBucketName(namespace);
  let publishDeny: string[] = [];
  // Telemetry batches are published by the gateway only, straight to their stream.
  if (service === 'gateway') {
    subscribe.push(
      `${namespace}.events.member.*`,
      `${namespace}.events.device.*`,
      eventSubject(namespace, 'billing.updated'),
    );
    own.push(allTelemetrySubject(namespace), `$KV.${bucket}.>`);
  } else {
    // Every API subject naming the bucket's stream: STREAM.INFO.<stream>, STREAM.MSG.GET.<stream>,
    // DIRECT.GET.<stream>.<subject>, CONSUMER.CREATE.<stream>.…, CONSUMER.DURABLE.CREATE.<stream>.…
    const stream = `KV_${bucket}`;
    publishDeny = [
      `$JS.API.*.*.${stream}`,
      `$JS.API.*.*.${stream}.>`,
      `$JS.API.*.*.*.${stream}`,
      `$JS.API.*.*.*.${stream}.>`,
    ];
  }
  // Analytics replicas claim the telemetry batches they store in a bucket of their own.
  if (service === 'analytics') own.push(`$KV.${telemetryClaimsBucketName(namespace)}.>`);
  return { publish: ['$JS.API.>', '$JS.ACK.>', ...own], publishDeny, subscribe };
}

/**
 * The `authorization` block of a nats-server configuration: one user per service with the permissions
 * above, and the admin. Passwords are the caller's (generated once by the project's scripts).
 */
export function natsAuthorizationConfig(
  namespace: string,
  passwords: Record<ServiceName | typeof NATS_ADMIN_USER, string>,
): string {
  const quote = (value: string) => JSON.stringify(value);
  const list = (values: string[]) => `[${values.map(quote).join(', ')}]`;
  const users = SERVICE_NAMES.map((service) => {
    const { publish, publishDeny, subscribe } = natsPermissions(namespace, service);
    const deny = publishDeny.length > 0 ? `, deny: ${list(publishDeny)}` : '';
    return `    { user: ${quote(service)}, password: ${quote(passwords[service])}, permissions: { publish: { allow: ${list(publish)}${deny} }, subscribe: { allow: ${list(subscribe)} } } }`;
  });
  users.push(`    { user: ${quote(NATS_ADMIN_USER)}, password: ${quote(passwords[NATS_ADMIN_USER])} }`);
  return `authorization {\n  users: [\n${users.join(',\n')}\n  ]\n}\n`;
}
