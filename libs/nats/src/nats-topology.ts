import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import {
  EVENT_CONSUMERS,
  TELEMETRY_CONSUMERS,
  type TelemetryConsumerName,
} from '@sts/events/event-consumers';
import { allTelemetrySubject, telemetryStreamName } from '@sts/events/telemetry';
import type { Logger } from '@sts/logger/create-logger';
import { batchConsumerSpec } from './batch-consumer';
import { ensureDurableConsumer, type DurableConsumerSpec } from './durable-consumer';
import { eventConsumerServerSettings } from './event-consumer';
import {
  DEVICE_PURGES_CONSUMER,
  devicePurgeSubject,
  devicePurgesStreamName,
  ensureDevicePurgesStream,
  ensureEventsStream,
  ensureTelemetryStream,
} from './event-stream';
import { ensureKvBucket, limitsBucketSpec, telemetryClaimsBucketSpec } from './kv-buckets';

/** How the server keeps a telemetry consumer, as its process asks for it. */
export interface TelemetryConsumerSettings {
  ackWaitMs?: number;
  maxBatchMessages?: number;
}

/**
 * What the server keeps of a telemetry consumer (stream, subjects, headers-only, limits), for its
 * process and for the provisioning step alike.
 */
export function telemetryConsumerServerSettings(
  namespace: string,
  name: TelemetryConsumerName,
  settings: TelemetryConsumerSettings = {},
) {
  return {
    stream: telemetryStreamName(namespace),
    durableName: name,
    filterSubjects: [allTelemetrySubject(namespace)],
    headersOnly: TELEMETRY_CONSUMERS[name].headersOnly,
    ackWaitMs: settings.ackWaitMs,
    maxBatchMessages: settings.maxBatchMessages ?? TELEMETRY_CONSUMERS[name].maxBatchMessages,
  };
}

/**
 * What the server keeps of analytics' consumer of parked device purges, for its process and for the
 * provisioning step alike: never gives a purge up (a deleted device's telemetry must go).
 */
export function devicePurgesConsumerServerSettings(namespace: string) {
  return {
    stream: devicePurgesStreamName(namespace),
    durableName: DEVICE_PURGES_CONSUMER,
    filterSubjects: [devicePurgeSubject(namespace)],
    maxDeliver: -1,
    ackWaitMs: 60_000,
    maxBatchMessages: 100,
  };
}

/** The settings of the system's NATS topology that operators choose (the analytics service's too). */
export interface NatsTopologySettings {
  namespace: string;
  /** Copies kept of every stream and bucket by a NATS cluster (1 on a single server). */
  replicas?: number;
  /** Bytes the telemetry stream may hold. */
  telemetryMaxBytes: number;
  /** The consumers' settings, as their processes are configured (TELEMETRY_ACK_WAIT_MS, …). */
  telemetryConsumers: Partial<Record<TelemetryConsumerName, TelemetryConsumerSettings>>;
}

/** Every durable consumer of the system, as the server keeps it. */
export function natsConsumerSpecs(settings: NatsTopologySettings): DurableConsumerSpec[] {
  const { namespace } = settings;
  return [
    ...(Object.keys(TELEMETRY_CONSUMERS) as TelemetryConsumerName[]).map((name) =>
      batchConsumerSpec(telemetryConsumerServerSettings(namespace, name, settings.telemetryConsumers[name])),
    ),
    ...Object.entries(EVENT_CONSUMERS).map(([durableName, declaration]) =>
      batchConsumerSpec(
        eventConsumerServerSettings(namespace, {
          durableName,
          eventTypes: declaration.eventTypes,
          maxDeliver: 'maxDeliver' in declaration ? declaration.maxDeliver : undefined,
        }),
      ),
    ),
    batchConsumerSpec(devicePurgesConsumerServerSettings(namespace)),
  ];
}

/**
 * Makes the telemetry stream (with its consumers when the stream is new: under interest retention a
 * batch that arrives before them would not be kept), as a process that may create it does at start.
 */
export function ensureTelemetry(
  jsm: JetStreamManager,
  namespace: string,
  logger: Logger,
  options: { maxBytes?: number; replicas?: number } = {},
): Promise<unknown> {
  return ensureTelemetryStream(jsm, namespace, {
    maxBytes: options.maxBytes,
    replicas: options.replicas,
    logger,
    consumers: async () => {
      for (const name of Object.keys(TELEMETRY_CONSUMERS) as TelemetryConsumerName[]) {
        const spec = batchConsumerSpec(telemetryConsumerServerSettings(namespace, name));
        await ensureDurableConsumer(jsm, spec, logger, false);
      }
    },
  });
}

/**
 * Creates or brings up to date everything the system keeps on NATS: the events, telemetry and device
 * purge streams, every durable consumer, the gateways' limits bucket and analytics' claims bucket. Run with the admin
 * user by nats-setup (once per release, before the services start); idempotent.
 */
export async function provisionNatsTopology(
  nc: NatsConnection,
  jsm: JetStreamManager,
  settings: NatsTopologySettings,
  logger: Logger,
): Promise<void> {
  const { namespace, replicas } = settings;
  await ensureEventsStream(jsm, namespace, { replicas, logger });
  await ensureTelemetryStream(jsm, namespace, { replicas, maxBytes: settings.telemetryMaxBytes, logger });
  await ensureDevicePurgesStream(jsm, namespace, { replicas, logger });
  for (const spec of natsConsumerSpecs(settings)) {
    await ensureDurableConsumer(jsm, spec, logger.child({ consumer: spec.durableName }), true);
  }
  await ensureKvBucket(nc, limitsBucketSpec(namespace, replicas));
  await ensureKvBucket(nc, telemetryClaimsBucketSpec(namespace, replicas));
}
