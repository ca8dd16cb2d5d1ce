import { createHash } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { BatchClaims } from '@sts/analytics-domain/analytics-ports';
import { openKvBucket, telemetryClaimsBucketSpec } from '@sts/nats/kv-buckets';

/**
 * Batch claims in a NATS key-value bucket: a claim is created only where none exists (optimistic
 * concurrency), so of two replicas claiming one key, one wins. A failed insert releases its claims; a
 * crashed process's expire. In memory: a NATS
 * restart forgetting claims loses nothing, since stored batches are in ClickHouse's ledger.
 */
export async function openBatchClaims(
  nc: NatsConnection,
  namespace: string,
  replicas?: number,
): Promise<BatchClaims> {
  const kv = await openKvBucket(nc, telemetryClaimsBucketSpec(namespace, replicas));
  // Batch ids may hold any visible ASCII character; keys allow fewer.
  const keyOf = (batchKey: string) => createHash('sha256').update(batchKey).digest('base64url');
  return {
    claim: async (claims) => {
      const held = new Set<string>();
      await Promise.all(
        claims.map(async ({ key, holder }) => {
          try {
            await kv.create(keyOf(key), holder);
            held.add(key);
          } catch (error) {
            if (!isClaimedAlready(error)) throw error;
            // The same message again (a redelivery after a failed insert) keeps its own claim.
            if ((await kv.get(keyOf(key)))?.string() === holder) held.add(key);
          }
        }),
      );
      return held;
    },
    release: async (claims) => {
      await Promise.all(
        claims.map(async ({ key, holder }) => {
          const entry = await kv.get(keyOf(key));
          // Only our own claim, and only as we saw it (another holder may have claimed it since).
          if (entry?.string() === holder) await kv.delete(keyOf(key), { previousSeq: entry.revision });
        }),
      );
    },
  };
}

function isClaimedAlready(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
