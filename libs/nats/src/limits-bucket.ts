import { jetstream, StorageType } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';

/** Longest counting window the bucket supports: a window's key must outlive the window. */
export const LIMITS_MAX_WINDOW_MS = 60_000;

/** Bytes of counters the bucket may hold; beyond, writes fail and the gateways count in process. */
const LIMITS_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The key-value bucket where the gateway's replicas count requests and failures per window (rate
 * limits), named after the namespace like its streams. Its stream is `KV_<bucket>`.
 */
export function limitsBucketName(namespace: string): string {
  return `${namespace.toUpperCase()}_GATEWAY_LIMITS`;
}

export interface LimitsBucketOptions {
  /** How long one read or write may take before the caller gives up on the bucket. */
  timeoutMs: number;
  /** Copies kept by a NATS cluster (1 on a single server). */
  replicas?: number;
}

/**
 * Creates the limits bucket of `namespace` (or opens it when it exists) and returns it bound to a
 * JetStream context with `timeoutMs`, so a stalled server costs a request that much at most.
 */
export async function openLimitsBucket(
  nc: NatsConnection,
  namespace: string,
  options: LimitsBucketOptions,
): Promise<KV> {
  const name = limitsBucketName(namespace);
  // Created with the default timeout: a clustered server may take longer than one counter write.
  const created = await new Kvm(nc).create(name, {
    description: `Rate-limit counters of the gateways of namespace ${namespace}`,
    history: 1,
    // Keys carry their window; the server drops them once the longest window is surely over.
    ttl: 2 * LIMITS_MAX_WINDOW_MS,
    // Counters live a minute: a NATS restart forgetting them is cheaper than a disk write per request.
    storage: StorageType.Memory,
    max_bytes: LIMITS_MAX_BYTES,
    replicas: options.replicas ?? 1,
  });
  const { streamInfo } = await created.status();
  return new Kvm(jetstream(nc, { timeout: options.timeoutMs })).open(name, {
    allow_direct: streamInfo.config.allow_direct === true,
  });
}
