import {
  jetstream,
  jetstreamManager,
  JetStreamApiCodes,
  JetStreamApiError,
  StorageType,
  type StreamInfo,
} from '@nats-io/jetstream';
import { Kvm, type KV, type KvOptions } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { telemetryClaimsBucketName } from '@sts/events/telemetry';
import { isPermissionDenied, NatsProvisioningRequiredError } from './provisioning-errors';

/** Longest counting window the bucket supports: a window's key must outlive the window. */
export const LIMITS_MAX_WINDOW_MS = 60_000;

/** Bytes of counters the bucket may hold; beyond, writes fail and the gateways count in process. */
const LIMITS_MAX_BYTES = 64 * 1024 * 1024;

/**
 * How long a telemetry claim lasts: longer than a live analytics replica takes from claiming a batch to
 * storing it (an insert gives up after 30 s), short enough that the bucket stays small.
 */
const CLAIM_TTL_MS = 2 * 60_000;
/** Room for about a million claims; a full bucket fails claims, and with them the batches (retried). */
const CLAIMS_MAX_BYTES = 256 * 1024 * 1024;

/**
 * The key-value bucket where the gateway's replicas count requests and failures per window (rate
 * limits), named after the namespace like its streams. Its stream is `KV_<bucket>`.
 */
export function limitsBucketName(namespace: string): string {
  return `${namespace.toUpperCase()}_GATEWAY_LIMITS`;
}

/** A key-value bucket of the system: its name and how it is made. */
export interface KvBucketSpec {
  name: string;
  options: Partial<KvOptions>;
}

export function limitsBucketSpec(namespace: string, replicas = 1): KvBucketSpec {
  return {
    name: limitsBucketName(namespace),
    options: {
      description: `Rate-limit counters of the gateways of namespace ${namespace}`,
      history: 1,
      // Keys carry their window; the server drops them once the longest window is surely over.
      ttl: 2 * LIMITS_MAX_WINDOW_MS,
      // Counters live a minute: a NATS restart forgetting them is cheaper than a disk write per request.
      storage: StorageType.Memory,
      max_bytes: LIMITS_MAX_BYTES,
      replicas,
    },
  };
}

/**
 * Where analytics replicas claim the telemetry batches they store. In memory: a NATS restart forgetting
 * claims loses nothing, since stored batches are in ClickHouse's ledger.
 */
export function telemetryClaimsBucketSpec(namespace: string, replicas = 1): KvBucketSpec {
  return {
    name: telemetryClaimsBucketName(namespace),
    options: {
      description: `Telemetry batches being stored by the analytics replicas of namespace ${namespace}`,
      history: 1,
      ttl: CLAIM_TTL_MS,
      storage: StorageType.Memory,
      max_bytes: CLAIMS_MAX_BYTES,
      replicas,
    },
  };
}

/**
 * Makes sure a bucket exists (created with its spec when missing; an existing one is left as it is) and
 * returns its stream's information. A service's own NATS user may read but not create it.
 */
export async function ensureKvBucket(nc: NatsConnection, spec: KvBucketSpec): Promise<StreamInfo> {
  const jsm = await jetstreamManager(nc);
  try {
    return await jsm.streams.info(`KV_${spec.name}`);
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
  }
  try {
    // Created with the default timeout: a clustered server may take longer than one counter write.
    const created = await new Kvm(nc).create(spec.name, spec.options);
    return (await created.status()).streamInfo;
  } catch (error) {
    if (isPermissionDenied(error))
      throw new NatsProvisioningRequiredError(`key-value bucket ${spec.name} does not exist`, {
        cause: error,
      });
    throw error;
  }
}

export interface OpenBucketOptions {
  /** How long one read or write may take before the caller gives up on the bucket. */
  timeoutMs?: number;
}

/**
 * Makes sure the bucket exists and opens it bound to a JetStream context with `timeoutMs`, so a stalled
 * server costs a request that much at most.
 */
export async function openKvBucket(
  nc: NatsConnection,
  spec: KvBucketSpec,
  options: OpenBucketOptions = {},
): Promise<KV> {
  const streamInfo = await ensureKvBucket(nc, spec);
  const js = options.timeoutMs === undefined ? jetstream(nc) : jetstream(nc, { timeout: options.timeoutMs });
  return new Kvm(js).open(spec.name, { allow_direct: streamInfo.config.allow_direct === true });
}

export interface LimitsBucketOptions {
  /** How long one read or write may take before the caller gives up on the bucket. */
  timeoutMs: number;
  /** Copies kept by a NATS cluster (1 on a single server). */
  replicas?: number;
}

/** The gateways' limits bucket of `namespace`, made when missing. */
export function openLimitsBucket(
  nc: NatsConnection,
  namespace: string,
  options: LimitsBucketOptions,
): Promise<KV> {
  return openKvBucket(nc, limitsBucketSpec(namespace, options.replicas), { timeoutMs: options.timeoutMs });
}
