import { randomUUID } from 'node:crypto';
import { isUuid } from '@sts/vocabulary/identifiers';
import { z } from 'zod';

/**
 * Every event travels in this envelope. `id` is unique per event and doubles as the JetStream
 * `Nats-Msg-Id` (publisher dedupe) and the consumers' idempotency key.
 */
export const eventEnvelopeSchema = z.object({
  id: z.string().refine(isUuid, 'Invalid UUID'),
  type: z.string().min(1),
  occurred_at: z.iso.datetime(),
  data: z.unknown(),
});

export type EventEnvelope<Type extends string = string, Data = unknown> = {
  id: string;
  type: Type;
  occurred_at: string;
  data: Data;
};

export function newEnvelope<Type extends string, Data>(
  type: Type,
  data: Data,
  now = new Date(),
): EventEnvelope<Type, Data> {
  return { id: randomUUID(), type, occurred_at: now.toISOString(), data };
}
