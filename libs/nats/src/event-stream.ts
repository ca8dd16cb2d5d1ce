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

/**
 * Creates the events stream of `namespace`, or brings an existing one to the expected configuration.
 * Idempotent and safe when several services call it at the same time at start.
 */
export async function ensureEventsStream(
  jsm: JetStreamManager,
  namespace: string,
  options: EventsStreamOptions = {},
): Promise<StreamInfo> {
  const config = eventsStreamConfig(namespace, options);
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
    duplicate_window: config.duplicate_window,
    num_replicas: config.num_replicas,
  });
}

function isStreamNameInUse(error: unknown): boolean {
  if (error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE) return true;
  return error instanceof Error && /stream name already in use/i.test(error.message);
}
