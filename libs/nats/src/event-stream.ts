import {
  DiscardPolicy,
  JetStreamApiCodes,
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
import type { Logger } from '@sts/logger/create-logger';
import { isPermissionDenied, NatsProvisioningRequiredError } from './provisioning-errors';

/** JetStream API error code of "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

export interface EventsStreamOptions {
  /** Copies kept by a NATS cluster (1 on a single server, 3 in production clusters). */
  replicas?: number;
}

/** What every stream of the system shares: on disk, no limit of count or size, replicas as configured. */
function unlimitedFileStream(options: EventsStreamOptions) {
  return {
    storage: StorageType.File,
    max_msgs: -1,
    max_bytes: -1,
    max_msg_size: -1,
    max_msgs_per_subject: -1,
    max_consumers: -1,
    num_replicas: options.replicas ?? 1,
  };
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
    ...unlimitedFileStream(options),
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(EVENT_RETENTION_MS),
    // Publishers set Nats-Msg-Id = event id; a relay retrying within this window is deduplicated.
    duplicate_window: nanos(2 * 60 * 1000),
  };
}

export interface TelemetryStreamOptions extends EventsStreamOptions {
  /** How long an unconsumed batch waits (e.g. while ClickHouse is down). Default 7 days. */
  maxAgeMs?: number;
  /**
   * Bytes the stream may hold before the server refuses new batches (the gateway then answers 503).
   * Left as it is on an existing stream unless given (the analytics service and nats-setup own it).
   */
  maxBytes?: number;
}

/**
 * Telemetry batches: one message per accepted batch, kept until every consumer of the stream (analytics,
 * enrollment's last-seen) acknowledged it (interest retention), or by age; a full stream refuses, never
 * drops. Its consumers must exist before batches arrive: the provisioning creates them with it.
 */
export function telemetryStreamConfig(
  namespace: string,
  options: TelemetryStreamOptions = {},
): Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'> {
  return {
    name: telemetryStreamName(namespace),
    description: `Telemetry batches of namespace ${namespace}`,
    subjects: [allTelemetrySubject(namespace)],
    ...unlimitedFileStream(options),
    retention: RetentionPolicy.Interest,
    discard: DiscardPolicy.New,
    max_age: nanos(options.maxAgeMs ?? 7 * 24 * 60 * 60 * 1000),
    // Nats-Msg-Id = device id and batch id: an agent's retry within this window is stored once; the
    // analytics service's ledger catches later ones.
    duplicate_window: nanos(10 * 60 * 1000),
    // Left as it is on an existing stream unless given (the analytics service and nats-setup own it).
    max_bytes: options.maxBytes,
  };
}

/** Stream where analytics parks the deletions whose telemetry it has still to purge. */
export function devicePurgesStreamName(namespace: string): string {
  return `${namespace.toUpperCase()}_DEVICE_PURGES`;
}

/** Analytics' durable consumer of its parked purges. */
export const DEVICE_PURGES_CONSUMER = 'analytics-device-purges';

/** Subject of a parked purge (analytics publishes and consumes it; no other service sees it). */
export function devicePurgeSubject(namespace: string): string {
  return `${namespace}.analytics.device_purges`;
}

/**
 * Parked purges: a deleted device's telemetry is removed from ClickHouse however long ClickHouse stays
 * away, so a purge waits here until it is done (work-queue retention: kept until acknowledged, with no
 * age or size limit), not in the events stream, which forgets after 7 days.
 */
export function devicePurgesStreamConfig(
  namespace: string,
  options: EventsStreamOptions = {},
): Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'> {
  return {
    name: devicePurgesStreamName(namespace),
    description: `Device purges analytics has still to do, namespace ${namespace}`,
    subjects: [devicePurgeSubject(namespace)],
    ...unlimitedFileStream(options),
    retention: RetentionPolicy.Workqueue,
    discard: DiscardPolicy.New,
    max_age: 0,
    // A deletion's purge is parked with the event id as Nats-Msg-Id: a redelivered event parks it once.
    duplicate_window: nanos(2 * 60 * 1000),
  };
}

export interface EnsureStreamOptions {
  /** Where to say that settings differ and this user may not change them (per-service NATS users). */
  logger?: Logger;
}

/**
 * Makes sure the events stream of `namespace` exists with the expected configuration: creates it, or
 * brings an existing one to it. Idempotent and safe when several services call it at the same time.
 * A NATS user that may only read the stream's information (a service's own user) leaves it as it is.
 */
export function ensureEventsStream(
  jsm: JetStreamManager,
  namespace: string,
  options: EventsStreamOptions & EnsureStreamOptions = {},
): Promise<StreamInfo> {
  return ensureStream(jsm, eventsStreamConfig(namespace, options), options.logger);
}

/**
 * The same for the telemetry stream (the gateway publishes to it, analytics and enrollment read it).
 * A stream made here gets its consumers at once (`consumers`), so no batch arrives before them and
 * goes unretained.
 */
export async function ensureTelemetryStream(
  jsm: JetStreamManager,
  namespace: string,
  options: TelemetryStreamOptions & EnsureStreamOptions & { consumers?: () => Promise<void> } = {},
): Promise<StreamInfo> {
  let created = false;
  const info = await ensureStream(jsm, telemetryStreamConfig(namespace, options), options.logger, () => {
    created = true;
  });
  if (created) await options.consumers?.();
  return info;
}

/** The same for analytics' parked device purges. */
export function ensureDevicePurgesStream(
  jsm: JetStreamManager,
  namespace: string,
  options: EventsStreamOptions & EnsureStreamOptions = {},
): Promise<StreamInfo> {
  return ensureStream(jsm, devicePurgesStreamConfig(namespace, options), options.logger);
}

type StreamSpec = Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'>;

async function ensureStream(
  jsm: JetStreamManager,
  config: StreamSpec,
  logger: Logger | undefined,
  onCreated?: () => void,
): Promise<StreamInfo> {
  let existing = await streamInfo(jsm, config.name);
  if (!existing) {
    try {
      const created = await jsm.streams.add({ ...config });
      onCreated?.();
      return created;
    } catch (error) {
      if (isPermissionDenied(error))
        throw new NatsProvisioningRequiredError(`stream ${config.name} does not exist`, { cause: error });
      // A twin process created it a moment ago.
      if (!isStreamNameInUse(error)) throw error;
      existing = await jsm.streams.info(config.name);
    }
  }
  const changes = differences(existing.config, config);
  if (Object.keys(changes).length === 0) return existing;
  // Exists with another configuration (an older version of this one, or one set by the server's
  // defaults): update the fields we own. Storage is immutable; retention changes only on servers that
  // allow it (2.10 and later, between limits and interest).
  try {
    return await jsm.streams.update(config.name, changes);
  } catch (error) {
    // A twin process updated it a moment ago (concurrent updates can fail on the server, e.g.
    // "subjects overlap with an existing stream" on NATS 2.9): done if nothing is left to change.
    const now = await streamInfo(jsm, config.name);
    if (now && Object.keys(differences(now.config, config)).length === 0) return now;
    if (isPermissionDenied(error)) {
      logger?.warn(
        { stream: config.name, differs: Object.keys(changes) },
        "stream settings differ from this process's and this NATS user may not change them; nats-setup applies them",
      );
      return existing;
    }
    if (changes.retention === undefined) throw error;
    logger?.warn(
      { stream: config.name, retention: existing.config.retention, err: error },
      'this server cannot change the retention of an existing stream; it stays as it is',
    );
    const { retention: _kept, ...rest } = changes;
    if (Object.keys(rest).length === 0) return existing;
    return jsm.streams.update(config.name, rest);
  }
}

async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      return undefined;
    throw error;
  }
}

/** The fields we own whose values differ (max_bytes only when the caller gives it). */
function differences(current: StreamConfig, wanted: StreamSpec): Partial<StreamConfig> {
  const changes: Partial<StreamConfig> = {};
  const sameSubjects =
    current.subjects.length === wanted.subjects.length &&
    [...current.subjects].sort().every((subject, i) => subject === [...wanted.subjects].sort()[i]);
  if (!sameSubjects) changes.subjects = wanted.subjects;
  for (const key of [
    'description',
    'retention',
    'discard',
    'max_age',
    'max_bytes',
    'duplicate_window',
    'num_replicas',
  ] as const) {
    const value = wanted[key];
    if (value !== undefined && current[key] !== value) Object.assign(changes, { [key]: value });
  }
  return changes;
}

function isStreamNameInUse(error: unknown): boolean {
  if (error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE) return true;
  return error instanceof Error && /stream name already in use/i.test(error.message);
}
