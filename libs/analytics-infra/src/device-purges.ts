import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { DevicePurges, DeviceRef, DeviceStateStore } from '@sts/analytics-domain/analytics-ports';
import type { Logger } from '@sts/logger/create-logger';
import { startBatchConsumer } from '@sts/nats/batch-consumer';
import { devicePurgeSubject, devicePurgesStreamName, ensureDevicePurgesStream } from '@sts/nats/event-stream';
import { devicePurgesConsumerServerSettings } from '@sts/nats/nats-topology';

/** A parked purge as the stream holds it. */
interface ParkedPurge {
  org_id: string;
  device_id: string;
  /** With a deletion: the state to record before purging. */
  deletion?: { hostname: string; version: number };
}

export interface ParkedDevicePurges extends DevicePurges {
  /**
   * How long the oldest purge not yet done has waited, in ms (0 when none waits). Read from the stream, so
   * every replica tells the same, whichever parked it or is trying it.
   */
  oldestWaitMs(): Promise<number>;
  stop(): Promise<void>;
}

export interface DevicePurgesOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  namespace: string;
  /** Copies of the purges stream a NATS cluster keeps, should this process make it (NATS_STREAM_REPLICAS). */
  streamReplicas?: number;
  store: DeviceStateStore;
  logger: Logger;
  /** Delay before a failed purge is tried again: doubles per attempt (default 1 s to 1 min). */
  retryDelay?: { initialMs: number; maxMs: number };
  now?: () => number;
}

const MAX_ID_LENGTH = 64;
const isId = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH;

/**
 * Purges of deleted devices' telemetry, parked in a stream of analytics' own (`<NS>_DEVICE_PURGES`:
 * kept until done, no age limit) and worked off by a durable consumer that never gives one up: a
 * ClickHouse outage of any length delays a purge, none loses it (the events stream forgets a deletion
 * after 7 days). A deletion records the device's `deleted` state first, then purges; a purge parked by
 * ingestion (rows that landed after a purge began) purges again. Replicas share the consumer, so each
 * purge runs on one of them.
 */
export async function startDevicePurges(options: DevicePurgesOptions): Promise<ParkedDevicePurges> {
  const { js, jsm, namespace, store } = options;
  const logger = options.logger.child({ component: 'device-purges' });
  const now = options.now ?? Date.now;
  const stream = devicePurgesStreamName(namespace);
  const subject = devicePurgeSubject(namespace);

  const consumer = await startBatchConsumer<ParkedPurge>({
    js,
    jsm,
    ...devicePurgesConsumerServerSettings(namespace),
    ensureStream: () =>
      ensureDevicePurgesStream(jsm, namespace, { logger, replicas: options.streamReplicas }),
    decode: (msg) => parseParkedPurge(msg.json()),
    describe: (purge) => ({ org_id: purge.org_id, device_id: purge.device_id }),
    handleBatch: async (batch) => {
      // One purge per device however many are parked for it; a deletion's state before the purge.
      const byDevice = new Map<
        string,
        { device: DeviceRef; deletion?: ParkedPurge['deletion']; msgs: JsMsg[] }
      >();
      for (const { msg, value } of batch) {
        const key = `${value.org_id}\n${value.device_id}`;
        let group = byDevice.get(key);
        if (!group)
          byDevice.set(
            key,
            (group = { device: { orgId: value.org_id, deviceId: value.device_id }, msgs: [] }),
          );
        group.msgs.push(msg);
        if (value.deletion && (!group.deletion || value.deletion.version > group.deletion.version))
          group.deletion = value.deletion;
      }
      const failures = new Map<JsMsg, unknown>();
      let failure: unknown;
      for (const { device, deletion, msgs } of byDevice.values()) {
        // ClickHouse failed one: the rest wait for the next try instead of each waiting out a timeout.
        if (failure === undefined) {
          try {
            if (deletion) await store.setState(device, deletion.hostname, 'deleted', deletion.version);
            await store.purge(device);
            logger.info({ org_id: device.orgId, device_id: device.deviceId }, 'device telemetry purged');
            continue;
          } catch (error) {
            failure = error;
          }
        }
        for (const msg of msgs) failures.set(msg, failure);
      }
      return failures;
    },
    logger,
    retryDelay: options.retryDelay ?? { initialMs: 1_000, maxMs: 60_000 },
    maxWaitMs: 20,
  });

  return {
    park: async (device, deletion) => {
      const parked: ParkedPurge = {
        org_id: device.orgId,
        device_id: device.deviceId,
        ...(deletion ? { deletion: { hostname: deletion.hostname, version: deletion.version } } : {}),
      };
      // A deletion parks once per event, however often the event is delivered.
      await js.publish(
        subject,
        JSON.stringify(parked),
        deletion ? { msgID: `device-purge:${deletion.eventId}` } : undefined,
      );
    },
    oldestWaitMs: async () => {
      // Work-queue retention: what the stream holds is what is not done yet, oldest first.
      const { state } = await jsm.streams.info(stream);
      return state.messages === 0 ? 0 : Math.max(0, now() - Date.parse(state.first_ts));
    },
    stop: () => consumer.stop(),
  };
}

function parseParkedPurge(json: unknown): ParkedPurge {
  const purge = json as Partial<Record<keyof ParkedPurge, unknown>> | null;
  if (typeof purge !== 'object' || purge === null) throw new TypeError('purge is not an object');
  if (!isId(purge.org_id) || !isId(purge.device_id)) throw new TypeError('purge names no device');
  if (purge.deletion === undefined) return { org_id: purge.org_id, device_id: purge.device_id };
  const deletion: unknown = purge.deletion;
  if (typeof deletion !== 'object' || deletion === null) throw new TypeError('purge has an invalid deletion');
  const { hostname, version } = deletion as { hostname?: unknown; version?: unknown };
  if (typeof hostname !== 'string' || typeof version !== 'number' || !Number.isSafeInteger(version)) {
    throw new TypeError('purge has an invalid deletion');
  }
  return {
    org_id: purge.org_id,
    device_id: purge.device_id,
    deletion: { hostname, version },
  };
}
