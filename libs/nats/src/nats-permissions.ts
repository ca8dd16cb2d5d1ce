import { EVENT_CONSUMERS, TELEMETRY_CONSUMERS } from '@sts/events/event-consumers';
import { EVENT_PRODUCERS } from '@sts/events/event-producers';
import { deviceStatesAppliedSubject } from '@sts/events/device-states-applied';
import type { EventType } from '@sts/events/event-catalogue';
import { eventsStreamName, eventSubject } from '@sts/events/subjects';
import { allTelemetrySubject, telemetryClaimsBucketName, telemetryStreamName } from '@sts/events/telemetry';
import { SERVICE_NAMES, type ServiceName } from '@sts/vocabulary/services';
import { DEVICE_PURGES_CONSUMER, devicePurgeSubject, devicePurgesStreamName } from './event-stream';
import { limitsBucketName } from './kv-buckets';

/** The user that provisions streams, consumers and buckets (nats-setup), and tests' cleanup: every permission. */
export const NATS_ADMIN_USER = 'admin' as const;

/**
 * Replies to a user's requests (JetStream answers, pulled messages) go to subjects under this prefix,
 * which only that user may subscribe to; with the shared `_INBOX.>` any user could read the messages
 * another service pulls. `connectJetStream` takes it from the user name in the URL.
 */
export function natsInboxPrefix(user: string): string {
  return `_INBOX_${user}`;
}

export interface NatsUserPermissions {
  publish: string[];
  subscribe: string[];
}

/**
 * What each service may do on NATS, least privilege (docs/decisions.md, "Trust model"):
 * - publish the event subjects it produces (EVENT_PRODUCERS), nothing else of the events stream;
 * - read the information of the streams it uses, and use its own durable consumers (EVENT_CONSUMERS,
 *   TELEMETRY_CONSUMERS): their information, pulling their messages, acknowledging them;
 * - the gateway also publishes telemetry batches, subscribes to membership, device and license events
 *   and to analytics' word that it applied a device change (cache evictions) and reads and writes its
 *   limits bucket; analytics reads and writes its claims bucket, parks device purges in a stream of its
 *   own, which it consumes, and publishes that word;
 * - receive replies under its own inbox prefix only.
 * No service may create, change, purge or delete a stream, consumer or bucket, read a stream's messages
 * directly, or use another service's consumer: nats-setup, with the admin user, makes them.
 */
export function natsPermissions(namespace: string, service: ServiceName): NatsUserPermissions {
  const publish = new Set<string>(['$JS.API.INFO']);
  const subscribe = new Set<string>([`${natsInboxPrefix(service)}.>`]);
  const streamInfo = (stream: string) => publish.add(`$JS.API.STREAM.INFO.${stream}`);
  const useConsumer = (stream: string, durable: string) => {
    streamInfo(stream);
    publish.add(`$JS.API.CONSUMER.INFO.${stream}.${durable}`);
    publish.add(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${durable}`);
    publish.add(`$JS.ACK.${stream}.${durable}.>`);
  };
  const useBucket = (bucket: string) => {
    streamInfo(`KV_${bucket}`);
    publish.add(`$KV.${bucket}.>`);
    publish.add(`$JS.API.DIRECT.GET.KV_${bucket}.>`);
    publish.add(`$JS.API.STREAM.MSG.GET.KV_${bucket}`);
  };

  for (const [type, producer] of Object.entries(EVENT_PRODUCERS) as [EventType, ServiceName][]) {
    if (producer !== service) continue;
    publish.add(eventSubject(namespace, type));
    streamInfo(eventsStreamName(namespace));
  }
  for (const [durable, consumer] of Object.entries(EVENT_CONSUMERS)) {
    if (consumer.service === service) useConsumer(eventsStreamName(namespace), durable);
  }
  for (const [durable, consumer] of Object.entries(TELEMETRY_CONSUMERS)) {
    if (consumer.service === service) useConsumer(telemetryStreamName(namespace), durable);
  }
  if (service === 'gateway') {
    publish.add(allTelemetrySubject(namespace));
    streamInfo(telemetryStreamName(namespace));
    useBucket(limitsBucketName(namespace));
    subscribe.add(`${namespace}.events.member.*`);
    subscribe.add(`${namespace}.events.device.*`);
    subscribe.add(eventSubject(namespace, 'billing.updated'));
    subscribe.add(deviceStatesAppliedSubject(namespace));
  }
  if (service === 'analytics') {
    useBucket(telemetryClaimsBucketName(namespace));
    // Its own stream of parked device purges: it parks them and works them off.
    publish.add(devicePurgeSubject(namespace));
    useConsumer(devicePurgesStreamName(namespace), DEVICE_PURGES_CONSUMER);
    // Plain NATS: tells the gateways it applied a device change (their cached answers are stale).
    publish.add(deviceStatesAppliedSubject(namespace));
  }
  return { publish: [...publish], subscribe: [...subscribe] };
}

/** A password in the configuration: a literal, or `$NAME` for the server to read from its environment. */
export type NatsPassword = string | { env: string };

/** The environment variable a deployed nats-server reads a user's password from (deploy/nats/auth.conf). */
export function natsPasswordVariable(user: ServiceName | typeof NATS_ADMIN_USER): string {
  return `NATS_PASSWORD_${user.toUpperCase()}`;
}

/** The configuration's `authorization` block with every password read from the server's environment. */
export function natsAuthorizationConfigFromEnvironment(namespace: string): string {
  const users: (ServiceName | typeof NATS_ADMIN_USER)[] = [...SERVICE_NAMES, NATS_ADMIN_USER];
  return natsAuthorizationConfig(
    namespace,
    Object.fromEntries(users.map((user) => [user, { env: natsPasswordVariable(user) }])) as Record<
      ServiceName | typeof NATS_ADMIN_USER,
      NatsPassword
    >,
  );
}

/**
 * The `authorization` block of a nats-server configuration: one user per service with the permissions
 * above, and the admin. Passwords are the caller's (generated by the project's scripts, or environment
 * variables of the server's container in deploy/).
 */
export function natsAuthorizationConfig(
  namespace: string,
  passwords: Record<ServiceName | typeof NATS_ADMIN_USER, NatsPassword>,
): string {
  const quote = (value: string) => JSON.stringify(value);
  const password = (value: NatsPassword) => (typeof value === 'string' ? quote(value) : `$${value.env}`);
  const list = (values: string[]) => `[${values.map(quote).join(', ')}]`;
  const users = SERVICE_NAMES.map((service) => {
    const { publish, subscribe } = natsPermissions(namespace, service);
    return `    { user: ${quote(service)}, password: ${password(passwords[service])}, permissions: { publish: { allow: ${list(publish)} }, subscribe: { allow: ${list(subscribe)} } } }`;
  });
  users.push(`    { user: ${quote(NATS_ADMIN_USER)}, password: ${password(passwords[NATS_ADMIN_USER])} }`);
  return `authorization {\n  users: [\n${users.join(',\n')}\n  ]\n}\n`;
}
