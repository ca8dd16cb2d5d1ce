import { z } from 'zod';

/**
 * Telemetry batches: what a device reports, as the gateway hands it to JetStream and the analytics
 * service reads it. Not domain events (no outbox, no catalogue entry): a stream of their own, sized
 * for volume, with one message per accepted batch.
 */

export const VERDICTS = ['allowed', 'blocked', 'warned'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** What a batch may hold (docs/decisions.md, "Telemetry"). */
export const TELEMETRY_LIMITS = {
  eventsPerBatch: 5_000,
  bodyBytes: 2 * 1024 * 1024,
  urlLength: 4_096,
  batchIdLength: 128,
  /** observed_at may lie this far in the past (an agent's spool after a long time offline)… */
  pastMs: 30 * 24 * 60 * 60 * 1000,
  /** …and this far in the future (device clocks drift). */
  futureMs: 5 * 60 * 1000,
  /** A classification that took longer is a measuring error, not a latency. */
  classificationMs: 600_000,
} as const;

/** Stream of telemetry batches of a namespace. */
export function telemetryStreamName(namespace: string): string {
  return `${namespace.toUpperCase()}_TELEMETRY`;
}

/** Subject of a batch: by organization, so that a deployment can later split the stream by tenant. */
export function telemetrySubject(namespace: string, orgId: string): string {
  return `${namespace}.telemetry.${orgId}`;
}

export function allTelemetrySubject(namespace: string): string {
  return `${namespace}.telemetry.>`;
}

/** `Nats-Msg-Id` of a batch: a device repeating a batch id within the stream's window is stored once. */
export function telemetryMessageId(deviceId: string, batchId: string): string {
  return `${deviceId}:${batchId}`;
}

/**
 * Headers of a batch message, so that a consumer that needs only who sent it and when (enrollment's
 * `last_seen_at`) does not parse the body.
 */
export const TELEMETRY_HEADERS = {
  orgId: 'Sts-Org-Id',
  deviceId: 'Sts-Device-Id',
  /** Epoch milliseconds, as `received_at`. */
  receivedAt: 'Sts-Received-At',
} as const;

/** One analyzed address. Only the host is kept of the URL (docs/decisions.md, "Telemetry"). */
export const telemetryEventSchema = z.object({
  /** Epoch milliseconds. */
  observed_at: z.number().int().nonnegative(),
  host: z.string().max(TELEMETRY_LIMITS.urlLength),
  verdict: z.enum(VERDICTS),
  classification_ms: z.number().nonnegative().max(TELEMETRY_LIMITS.classificationMs),
});

export const telemetryBatchMessageSchema = z.object({
  org_id: z.string().min(1),
  device_id: z.string().min(1),
  batch_id: z.string().min(1).max(TELEMETRY_LIMITS.batchIdLength),
  /** When the gateway accepted it, epoch milliseconds. */
  received_at: z.number().int().nonnegative(),
  events: z.array(telemetryEventSchema).min(1).max(TELEMETRY_LIMITS.eventsPerBatch),
});

export type TelemetryEvent = z.infer<typeof telemetryEventSchema>;
export type TelemetryBatchMessage = z.infer<typeof telemetryBatchMessageSchema>;
