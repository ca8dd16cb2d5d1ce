import {
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { allEventsSubject, EVENT_RETENTION_MS, eventsStreamName } from '@sts/events/subjects';
import { allTelemetrySubject, telemetryStreamName } from '@sts/events/telemetry';

/** Error code of "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

export interface EventsStreamOptions {
  /** Copies kept by a NATS cluster (1 on a single server, 3 in production clusters). */
  replicas?: number;
}

/** The configuration of the domain-events stream of a namespace; one place, so every service agrees. */
export function eventsStreamConfig(
  namespace: string,
  options: EventsStreamOptions = {},
): Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'> {
  return {
    name: eventsStreamName(namespace),
    description: `Domain events of namespace ${namespace}`,
    subjects: [allEventsSubject(namespace)],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(EVENT_RETENTION_MS),
    // Publishers set Nats-Msg-Id = event id; a relay retrying within this window is deduplicated.
    duplicate_window: nanos(2 * 60 * 1000),
    max_msgs: -1,
    max_bytes: -1,
    max_msg_size: -1,
    max_msgs_per_subject: -1,
    max_consumers: -1,
    num_replicas: options.replicas ?? 1,
  };
}

export interface TelemetryStreamOptions extends EventsStreamOptions {
  /** How long an unconsumed batch waits (e.g. while ClickHouse is down). Default 7 days. */
  maxAgeMs?: number;
  /** Bytes the stream may hold before the server refuses new batches (the gateway then answers 503). -1: no limit. */
  maxBytes?: number;
}

/** Telemetry batches: one message per accepted batch, removed by age; a full stream refuses, never drops. */
export function telemetryStreamConfig(
  namespace: string,
  options: TelemetryStreamOptions = {},
): Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'> {
  return {
    name: telemetryStreamName(namespace),
    description: `Telemetry batches of namespace ${namespace}`,
    subjects: [allTelemetrySubject(namespace)],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.New,
    max_age: nanos(options.maxAgeMs ?? 7 * 24 * 60 * 60 * 1000),
    // Nats-Msg-Id = device id and batch id: an agent's retry within this window is stored once; the
    // analytics service's ledger catches later ones.
    duplicate_window: nanos(10 * 60 * 1000),
    max_msgs: -1,
    // Left as it is on an existing stream unless given (the analytics service owns this setting).
    ...(options.maxBytes === undefined ? {} : { max_bytes: options.maxBytes }),
    max_msg_size: -1,
    max_msgs_per_subject: -1,
    max_consumers: -1,
    num_replicas: options.replicas ?? 1,
  };
}

/**
 * Creates the events stream of `namespace`, or brings an existing one to the expected configuration.
 * Idempotent and safe when several services call it at the same time at start.
 */
export function ensureEventsStream(
  jsm: JetStreamManager,
  namespace: string,
  options: EventsStreamOptions = {},
): Promise<StreamInfo> {
  return ensureStream(jsm, eventsStreamConfig(namespace, options));
}

/** The same for the telemetry stream (the gateway publishes to it, the analytics service reads it). */
export function ensureTelemetryStream(
  jsm: JetStreamManager,
  namespace: string,
  options: TelemetryStreamOptions = {},
): Promise<StreamInfo> {
  return ensureStream(jsm, telemetryStreamConfig(namespace, options));
}

async function ensureStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'>,
): Promise<StreamInfo> {
  try {
    // Creating a stream that exists with the identical configuration succeeds.
    return await jsm.streams.add({ ...config });
  } catch (error) {
    if (!isStreamNameInUse(error)) throw error;
  }
  // Exists with another configuration (an older version of this one, or one set by the server's
  // defaults): update the fields we own. Immutable ones (storage, retention) are left as they are.
  return jsm.streams.update(config.name, {
    subjects: config.subjects,
    description: config.description,
    discard: config.discard,
    max_age: config.max_age,
    ...(config.max_bytes === undefined ? {} : { max_bytes: config.max_bytes }),
    duplicate_window: config.duplicate_window,
    num_replicas: config.num_replicas,
  });
}

function isStreamNameInUse(error: unknown): boolean {
  if (error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE) return true;
  return error instanceof Error && /stream name already in use/i.test(error.message);
}
